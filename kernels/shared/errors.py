"""The one family of errors a user can fix: a name nobody knows, a value out of range, a
task file that is not one, a store that cannot be opened as set up.

Every layer raises a subclass where the user, not the program, is at fault; the entry
points (``kernelkb.errors``) render any of them the same way: the CLI prints the message
and exits 2, the HTTP API answers 422 with it, an MCP tool returns it as an error result.
"""


class UserFixable(Exception):  # noqa: N818 - a mark, not an error of its own
    """The mark of the family: raised where the user, not the program, is at fault, so
    the entry points render its message instead of a traceback. Errors that keep another
    base (a lookup, a busy sandbox) carry it as a second base."""


class UserError(UserFixable, ValueError):
    """A request the user can fix; the message says what was wrong and the way out."""


def quoted(value: str, limit: int = 80) -> str:
    """A typed value as an error message quotes it: at most ``limit`` characters (a
    100,000-character name was once printed back whole)."""
    return repr(value) if len(value) <= limit else \
        repr(value[:limit]) + f"... ({len(value)} characters)"
