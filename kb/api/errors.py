"""Error responses that can always be written: a 422 never echoes raw input back.

Why: FastAPI's default 422 body repeats the offending input, and an input of ``1e999``
(parsed as infinity) or a lone surrogate cannot be encoded as JSON, so a client error
became a 500. Here each error keeps its location, message and type, made printable.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from kb.limits import printable


def _safe_error(error: dict[str, Any]) -> dict[str, Any]:
    return {
        "loc": [part if isinstance(part, int) else printable(str(part), 200)
                for part in error.get("loc", ())],
        "msg": printable(str(error.get("msg", ""))),
        "type": printable(str(error.get("type", "")), 100),
    }


async def _invalid_request(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(status_code=422,
                        content={"detail": [_safe_error(e) for e in exc.errors()]})


async def _unknown_name(_request: Request, exc: Exception) -> JSONResponse:
    """A typed name (op, task, GPU, arch) nobody knows: the closest one and the list."""
    return JSONResponse(status_code=422, content={"detail": printable(str(exc), 4000)})


def install_error_handlers(app: FastAPI) -> None:
    from retrieval.names import UnknownName

    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(UnknownName, _unknown_name)
