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
from pydantic import BaseModel

from kernelkb.errors import user_message
from kernelkb.kb.limits import printable
from kernelkb.kernels.shared.errors import UserError


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


async def _user_error(_request: Request, exc: Exception) -> JSONResponse:
    """An error the user can fix (kernelkb.errors): a typed name nobody knows (the
    closest one and the list), a GPU with no facts, a value the store cannot use."""
    return JSONResponse(status_code=422,
                        content={"detail": printable(user_message(exc) or str(exc), 4000)})


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(UserError, _user_error)
    _declare_errors(app)


class Problem(BaseModel):
    """An error answer with one sentence: what was wrong and, where one exists, the way out."""

    detail: str


# answers any route can give before it runs (kernelkb/api/same_machine.py), declared on every one
_EVERY_ROUTE = {"400": "not exactly one Host header",
                "403": "no token is set and the Host or Origin names another site"}


def _declare_errors(app: FastAPI) -> None:
    """The OpenAPI document says what the routes really answer: a 422 is either the
    field list (a body or query that does not validate) or one sentence (a name nobody
    knows, the closest named), and every route may answer 400 or 403 before it runs."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components["Problem"] = Problem.model_json_schema()
        problem = {"$ref": "#/components/schemas/Problem"}
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                invalid = responses.get("422", {}).get("content", {}).get("application/json")
                if invalid and invalid.get("schema", {}).get("$ref", "").endswith(
                        "/HTTPValidationError"):
                    invalid["schema"] = {"anyOf": [invalid["schema"], problem]}
                for code, why in _EVERY_ROUTE.items():
                    responses.setdefault(code, {"description": why, "content": {
                        "application/json": {"schema": problem}}})
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
