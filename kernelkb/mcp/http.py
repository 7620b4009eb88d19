"""The streamable-HTTP transport behind the API's rule: a token when one is set, loopback
clients only when none is (kernelkb/api/access.py). Every MCP request counts as a write here,
since evaluate_kernel and record_experience write to the store over the same endpoint."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from kernelkb.api.access import bearer_of, refusal


class TokenGate:
    """Pure ASGI middleware: refuses an HTTP request that ``access.refusal`` refuses; the
    lifespan (the SDK's session manager) passes through."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            client = scope.get("client")
            headers = dict(scope.get("headers") or [])
            authorization = headers.get(b"authorization", b"").decode("latin-1")
            refused = refusal(client[0] if client else None, bearer_of(authorization),
                              self.token)
            if refused is not None:
                code, detail = refused
                extra = {"WWW-Authenticate": "Bearer"} if code == 401 else None
                await JSONResponse({"detail": detail}, status_code=code,
                                   headers=extra)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_app(server: Any, *, host: str, token: str | None, path: str = "/mcp") -> TokenGate:
    """The SDK's streamable-HTTP app of ``server`` behind the token gate."""
    return TokenGate(server.streamable_http_app(streamable_http_path=path, host=host), token)
