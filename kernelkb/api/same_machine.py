"""Without a token, the service answers this machine only, browsers included.

Why: a server with no KERNELKB_API_TOKEN listens on loopback, but a web page the user
opens can still reach it: a cross-site form POST to /reindex or /experiences needs no
permission from the browser, and a page whose host name is rebound to 127.0.0.1 (DNS
rebinding) reads and writes as if it were local. Both carry a foreign name: the Host
header (rebinding) or the Origin header (cross-site). So, with no token set, a request
whose Host is not a loopback name is refused, and a write whose Origin is not a loopback
origin too. With a token, writes need it and browsers cannot send it cross-site. With or
without one, a request carries exactly one Host header (none, or two that disagree, is a
400).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from starlette.responses import JSONResponse

from kernelkb.api.access import is_loopback

_READS = (b"GET", b"HEAD", b"OPTIONS")


class SameMachineOnly:
    """Pure ASGI middleware; the token is read from the app's store settings per request
    (it is known once the lifespan has opened the store)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts = [v for k, v in scope.get("headers") or [] if k == b"host"]
        if len(hosts) != 1:  # RFC 9112 3.2: one Host, or 400; two could disagree
            await JSONResponse({"detail": f"a request carries exactly one Host header, "
                                          f"this one {len(hosts)}"}, status_code=400)(
                scope, receive, send)
            return
        if _token_set(scope):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        host = hosts[0]
        if not is_loopback(_host_name(host.decode("latin-1"))):
            await _refuse(scope, receive, send, "Host")
            return
        origin = headers.get(b"origin")
        if origin is not None and scope["method"].encode() not in _READS and \
                not is_loopback(urlsplit(origin.decode("latin-1")).hostname):
            await _refuse(scope, receive, send, "Origin")
            return
        await self.app(scope, receive, send)


def _token_set(scope: Any) -> bool:
    knowledge = getattr(scope["app"].state, "knowledge", None)
    return bool(knowledge is not None and knowledge.settings.api_token)


def _host_name(host: str) -> str:
    """'[::1]:8765' -> '::1', 'localhost:8765' -> 'localhost'."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


async def _refuse(scope: Any, receive: Any, send: Any, header: str) -> None:
    detail = (f"no token is configured: this server answers this machine only, and the "
              f"request's {header} header names another (set KERNELKB_API_TOKEN to serve "
              "other hosts)")
    await JSONResponse({"detail": detail}, status_code=403)(scope, receive, send)
