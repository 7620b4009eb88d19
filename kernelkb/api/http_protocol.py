"""uvicorn's fast HTTP parser with the two bounds it lacks: header size and header time.

Why: httptools buffers a header of any length, at a cost that grows with the square of
its size (one connection sending a 400 MB header held the server for 326 s, and /health
timed out meanwhile), and a connection that never finishes its headers stays open for
ever (10,000 of them used up the file descriptors). Here a request head over HEAD_BYTES
gets 431 and a head not complete within HEAD_TIMEOUT_S is closed; complete requests run
exactly as before, at httptools' speed (pure-Python h11, which has a size bound, costs
~0.3 ms more CPU a request).

Why a subclass of ``HttpToolsProtocol`` (uvicorn.protocols.http, not uvicorn's documented
API) and not options: uvicorn 0.55's public Config bounds a head only in bytes, only
for h11 (``h11_max_incomplete_event_size``, the CPU cost above), and has no timeout for
a head that never ends (``timeout_keep_alive`` starts after a response) nor a refusal
when a connection is made past ``limit_concurrency`` (its 503 waits for a request, so
idle connections still hold descriptors). Handing a protocol class to ``http=`` is
public; tests/api/test_edge.py holds the three bounds on a real server, so an uvicorn
release that changes the parent class fails there, not in use.
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEAD_BYTES = 64 * 1024  # request line plus headers (a bearer token, a long query string)
HEAD_TIMEOUT_S = 30.0  # from a request's first byte to the end of its headers


def serve_options() -> dict[str, Any]:
    """The uvicorn options every KernelKB HTTP server runs with. The descriptor limit is
    raised to its hard limit first (the soft one is often 1024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    # past this many open connections new requests get 503, while descriptors remain for
    # the store's files, the database and the answers themselves
    concurrency = max(64, min(2048, soft // 2)) if soft != resource.RLIM_INFINITY else 2048
    return {"http": BoundedHeadProtocol, "limit_concurrency": concurrency,
            "timeout_keep_alive": 5}


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop it after a 431 was sent."""


class BoundedHeadProtocol(HttpToolsProtocol):
    """HttpToolsProtocol whose request heads are bounded in bytes and in time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        self._in_head = True  # until the headers of the request being read are complete
        self._begun = False  # a request's first byte has been parsed
        self._head_timer: asyncio.TimerHandle | None = None
        self._oversized = False  # refused with 431 after the parser collected the head

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # past the connection limit, answer 503 now and close: an idle connection held
        # open until its request came let a flood of them use up the descriptors, and
        # the server then accepted nothing more, answering no one
        if self.limit_concurrency is not None and len(self.connections) > self.limit_concurrency:
            self._refuse(b"503 Service Unavailable",
                         f"over {self.limit_concurrency} open connections: try again later")
            return
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = self._begun = True
        self._start_head_timer()

    def on_headers_complete(self) -> None:
        self._in_head = self._begun = False
        self._head_bytes = 0
        self._stop_head_timer()
        # a head that arrived in one chunk with its end is measured here, from what the
        # parser collected (the request line's method and version: ~20 bytes, counted)
        head = len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers) + 20
        if head > HEAD_BYTES:
            self._oversized = True
            self._refuse(b"431 Request Header Fields Too Large",
                         f"request head over {HEAD_BYTES} bytes")
            raise _HeadTooLarge  # stops the parser; send_400_response stays silent
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        if not self._oversized:
            super().send_400_response(msg)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        # counted before the parser ran, judged after: a chunk that completes the head
        # (and carries body bytes) is never refused
        if self._in_head and self._head_bytes > HEAD_BYTES and not self.transport.is_closing():
            self._refuse(b"431 Request Header Fields Too Large",
                         f"request head over {HEAD_BYTES} bytes")

    def _start_head_timer(self) -> None:
        self._stop_head_timer()
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT_S, self._head_too_slow)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self._in_head and not self.transport.is_closing():
            if self._begun:  # a request begun and not finished: say why
                self._refuse(b"408 Request Timeout",
                             f"request head not complete within {HEAD_TIMEOUT_S:.0f} s")
            else:
                self.transport.close()

    def _refuse(self, status: bytes, message: str) -> None:
        if self.transport.is_closing():
            return
        body = message.encode("ascii")
        self.transport.write(b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; "
                             b"charset=utf-8\r\ncontent-length: " + str(len(body)).encode()
                             + b"\r\nconnection: close\r\n\r\n" + body)
        self.transport.close()


def port_problem(host: str, port: int) -> str | None:
    """Why a server could not listen on host:port (in use, not an address here), or None:
    asked before uvicorn starts, whose own error is a traceback and exit code 3."""
    import socket

    if not 0 < port < 65536:
        return f"--port {port}: a port is 1-65535"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        return f"--host {host}: not an address this machine can listen on ({err})"
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind(address)
        except OSError as err:
            return (f"cannot listen on {host}:{port}: {err.strerror or err}; another "
                    "server (perhaps kernelkb serve) holds it: choose --port or stop it")
    return None
