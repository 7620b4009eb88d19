"""Refuse request bodies over a size limit with 413 before they are read into memory.

Why: with no limit one request could hold the server's memory and CPU (a 10 MB op type
cost 11 s of validation). The limit fits a full ingest batch of records at their largest
allowed fields (kb/limits.py) with room to spare.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

MAX_BODY_BYTES = 64 * 1024 * 1024


class BodyLimit:
    """Pure ASGI middleware: checks Content-Length, and counts chunked bodies as they come."""

    def __init__(self, app: Any, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        encoding = headers.get(b"content-encoding", b"identity").strip().lower()
        if encoding != b"identity":  # a gzip body would be parsed as JSON text: 400 before
            await JSONResponse(status_code=415, content={
                "detail": f"Content-Encoding {encoding.decode('latin-1')[:40]!r} is not "
                          "accepted: send the body uncompressed"})(scope, receive, send)
            return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._too_large(scope, receive, send)
            return
        seen = 0
        over = started = False

        async def counted() -> Any:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    over = True
                    raise _TooLarge
            return message

        async def answer(message: Any) -> None:
            """The app's own answer, unless the body ran over: FastAPI's body reader
            catches the error above and answers 400 "error parsing the body"."""
            nonlocal started
            if over:
                return
            started = True
            await send(message)

        try:
            await self.app(scope, counted, answer)
        except _TooLarge:
            pass
        if over and not started:
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope: Any, receive: Any, send: Any) -> None:
        response = JSONResponse(status_code=413, content={
            "detail": f"request body over {self.max_bytes} bytes"})
        await response(scope, receive, send)


class _TooLarge(Exception):
    pass
