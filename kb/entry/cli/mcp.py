"""``kernelkb mcp``: serve the MCP server over stdio (default) or streamable HTTP.

Light at import (argparse only) so ``kernelkb --help`` stays instant.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from typing import TYPE_CHECKING, Any, cast

from kernelkb.kb.entry.cli.common import Command

if TYPE_CHECKING:
    from kernelkb.kb.service import LocalKnowledge

HELP = "serve KernelKB to coding agents over MCP (stdio, or streamable HTTP with --http)"
log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http", action="store_true",
                        help="streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    parser.add_argument("--host", default=None, help="with --http; default: KERNELKB_HOST "
                        "or 127.0.0.1 (another address needs KERNELKB_API_TOKEN)")
    parser.add_argument("--port", type=int, default=8766, help="with --http (default 8766)")
    parser.add_argument("--timeout-s", type=float, default=60.0,
                        help="wall-clock limit of one candidate's evaluation")


def run(args: argparse.Namespace) -> int:
    from kernelkb.kb.entry.api.access import write_policy
    from kernelkb.kb.settings import Settings

    settings = Settings()
    host = args.host or settings.host
    if args.http:
        try:  # before anything heavy: an unsafe bind is refused at once
            write_policy(host, settings.api_token)
        except ValueError as exc:
            sys.stderr.write(f"{exc}\n")
            return 2
        from kernelkb.kb.entry.api.http_protocol import port_problem

        problem = port_problem(host, args.port)  # before the store opens on its thread
        if problem:
            sys.stderr.write(f"kernelkb mcp: {problem}\n")
            return 2
        log.warning("MCP over HTTP on %s: %s", host,
                    "every call needs the bearer token (KERNELKB_API_TOKEN)"
                    if settings.api_token else "no token set: loopback clients only")
    server = _server(settings, args.timeout_s)
    if not args.http:
        import anyio

        from kernelkb.kb.entry.mcp.stdio import serve

        anyio.run(serve, server)
        return 0
    import uvicorn

    from kernelkb.kb.entry.api.http_protocol import serve_options
    from kernelkb.kb.entry.mcp.http import http_app

    uvicorn.run(http_app(server, host=host, token=settings.api_token), host=host,
                port=args.port, log_level="warning", **serve_options())
    return 0


def _server(settings, timeout_s: float):  # type: ignore[no-untyped-def]
    """The server over the store, which opens and warms up on a thread meanwhile."""
    from kernelkb.kb.entry.mcp.server import build_server

    store = WarmingUp(settings)
    # a stand-in that forwards every attribute to the store once that is open
    return build_server(cast("LocalKnowledge", store), write_back=lambda: store.write_back,
                        journal_dir=settings.data_dir / "mcp-journals", timeout_s=timeout_s)


class WarmingUp:
    """The store, opened as `kernelkb optimize` opens it (seeded when empty; the service
    when KERNELKB_SERVICE_URL is set) and warmed up (embedding model, vector matrix) on a
    thread while the server already answers: an agent's client gives up on a server slow
    to start, and the first start embeds the shipped seeds. A call waits for the store to
    be open, not for the warm-up (SQL-only tools such as insights answer at once)."""

    def __init__(self, settings: Any) -> None:
        self._settings = settings
        self._knowledge: Any = None
        self._error: str | None = None
        self._write_back = False
        self._done = threading.Event()
        threading.Thread(target=self._open, name="kernelkb-store", daemon=True).start()

    def _open(self) -> None:
        from kernelkb.kb.entry.operations import open_for_runs

        try:
            self._knowledge, self._write_back = open_for_runs(self._settings)
            if self._knowledge is None:
                self._error = "no knowledge store can be opened here (see the server's log)"
        except Exception as err:  # noqa: BLE001 - every call reports it instead
            log.exception("opening the store failed")
            self._error = f"{type(err).__name__}: {err}"
        finally:
            self._done.set()
        try:  # calls go ahead meanwhile: the embedder and the index load under their locks
            if self._knowledge is not None:
                self._knowledge.warm_up()
        except Exception:  # noqa: BLE001 - a call that needs the model meets the fault itself
            log.exception("warming up the store failed")

    def _ready(self) -> Any:
        self._done.wait()
        if self._error is not None:
            from mcp.server.mcpserver.exceptions import ToolError

            raise ToolError(f"the KernelKB store could not be opened: {self._error}")
        return self._knowledge

    @property
    def write_back(self) -> bool:
        self._ready()
        return self._write_back

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ready(), name)


COMMANDS = (Command("mcp", HELP, add_arguments, run),)
