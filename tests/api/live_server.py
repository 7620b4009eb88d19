"""A real uvicorn server on a free port in a thread, for tests that need live HTTP."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from kernelkb.api.app import create_app
from kernelkb.api.http_protocol import serve_options
from kernelkb.service import LocalKnowledge

START_S = 120  # a loaded 2-core machine can take this long to import and warm up
TOKEN = "test-token"  # the write token of the API tests' store (tests/api/conftest.py)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextmanager
def serving(app: Any, host: str = "127.0.0.1", **options: Any) -> Iterator[int]:
    """Serve the ASGI ``app`` on ``host``; yields the port. A server thread that dies
    while starting fails at once instead of after the deadline. ``options`` override
    the served ones (serve_options: as `kernelkb serve` runs)."""
    port = free_port(host)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                           **{**serve_options(), **options}))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_S
    while not server.started:
        assert thread.is_alive(), "server thread died while starting (see the log above)"
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextmanager
def live_server(kb: LocalKnowledge, host: str = "127.0.0.1") -> Iterator[int]:
    """Serve ``kb`` through the service's app on ``host``; yields the port."""
    with serving(create_app(knowledge_=kb), host) as port:
        yield port
