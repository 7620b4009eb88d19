"""One rendering of user errors for every entry point (CLI, HTTP API, MCP server).

``user_message`` turns an exception into the one sentence a user can act on, or None for
a fault of the program (which keeps its traceback). The CLI prints it (exit 2), the API
answers 422 with it (``api/errors.py``), the MCP tools return it as an ``isError`` result
(``mcp/tools.py``): the same words for the same mistake, whichever door it came through.
"""

from __future__ import annotations

from typing import Any

from kernelkb.kernels.shared.errors import UserError, UserFixable


class UsageError(UserError):
    """A command or call given something it cannot use (a flag, an argument)."""


def user_message(err: BaseException) -> str | None:
    """The one-line message for an error the user can fix, or None."""
    from pydantic import ValidationError

    if isinstance(err, UserFixable):
        return str(err)
    if isinstance(err, ValidationError):  # a value outside the record's bounds
        return validation_message(err)
    return environment_message(err)


def validation_message(err: Any) -> str:
    """``field: reason; ...`` of a pydantic ValidationError; a Settings error names the
    environment variable (``KERNELKB_PORT``) the user set."""
    def where(loc: tuple[Any, ...]) -> str:
        if err.title == "Settings":
            return "KERNELKB_" + "_".join(str(p) for p in loc).upper()
        return ".".join(str(p) for p in loc) or "value"

    return "; ".join(f"{where(e['loc'])}: {e['msg']}" for e in err.errors())


def environment_message(err: BaseException) -> str | None:
    """One line for a store or file this machine cannot use as set up (a corrupt or
    read-only database, a bad URL, a full disk)."""
    from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError

    if isinstance(err, ArgumentError | NoSuchModuleError):
        return f"KERNELKB_DATABASE_URL: {err}"
    if isinstance(err, DatabaseError):  # the driver's reason, not the statement's values
        reason = str(getattr(err, "orig", None) or err).splitlines()[0]
        return f"the database cannot be used: {reason}"
    if isinstance(err, OSError) and err.strerror:
        where = f": {err.filename}" if err.filename else ""
        return f"{err.strerror}{where}"
    return None
