"""MCP over stdio where every line gets an answer.

The SDK's stdio reader hands a line that is not a JSON-RPC message to the server as an
exception, and the server drops it: a client that sent a request with a lone surrogate,
a truncated line or a wrong shape waits for a reply that never comes. Here each such line
is answered with JSON-RPC's own error: -32700 (parse error, id null) when the line is not
JSON at all, -32600 (invalid request) with the line's id when one can be read from it,
so the client's pending call ends with a reason.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

MESSAGE_CHARS = 300  # of the validator's reason, quoted back to the client


async def serve(server: Any) -> None:
    """Run an MCPServer over this process's stdin/stdout."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # what MCPServer.run("stdio") runs over the same streams
    async with stdio_server() as (incoming, outgoing):
        to_server, from_transport = anyio.create_memory_object_stream[Any](0)

        async def sift() -> None:
            async with to_server:
                async for item in incoming:
                    if isinstance(item, Exception):
                        await outgoing.send(SessionMessage(error_reply(item)))
                    else:
                        await to_server.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(sift)
            await lowlevel.run(from_transport, outgoing, lowlevel.create_initialization_options())
            tasks.cancel_scope.cancel()


def error_reply(error: Exception) -> mcp_types.JSONRPCError:
    """The JSON-RPC error for a line the SDK could not read as a message."""
    reason, line = _reason_and_input(error)
    try:
        parsed = json.loads(line) if isinstance(line, str) else line
    except (ValueError, RecursionError):
        return _error(None, mcp_types.PARSE_ERROR, f"not JSON: {reason}")
    request_id = parsed.get("id") if isinstance(parsed, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        request_id = None
    elif isinstance(request_id, str):
        request_id = _clean(request_id)
    return _error(request_id, mcp_types.INVALID_REQUEST, f"not a valid JSON-RPC message: {reason}")


def _reason_and_input(error: Exception) -> tuple[str, Any]:
    errors = getattr(error, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            return str(first.get("msg", error)), first.get("input")
        except (IndexError, TypeError, AttributeError):
            pass
    return f"{type(error).__name__}: {error}", None


def _clean(text: str) -> str:
    """Lone surrogates cannot be written as UTF-8: each becomes "?"."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _error(request_id: int | str | None, code: int, message: str) -> mcp_types.JSONRPCError:
    return mcp_types.JSONRPCError(
        jsonrpc="2.0", id=request_id,
        error=mcp_types.ErrorData(code=code, message=_clean(message)[:MESSAGE_CHARS]))
