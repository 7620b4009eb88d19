"""``kernelkb mcp``: serve the MCP server over stdio (default) or streamable HTTP.

Light at import (argparse only) so ``kernelkb --help`` stays instant.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from typing import Any

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
    from kb.api.access import write_policy
    from kb.settings import Settings

    settings = Settings()
    host = args.host or settings.host
    if args.http:
        try:  # before anything heavy: an unsafe bind is refused at once
            write_policy(host, settings.api_token)
        except ValueError as exc:
            sys.stderr.write(f"{exc}\n")
            return 2
        log.warning("MCP over HTTP on %s: %s", host,
                    "every call needs the bearer token (KERNELKB_API_TOKEN)"
                    if settings.api_token else "no token set: loopback clients only")
    server = _server(settings, args.timeout_s)
    if not args.http:
        server.run("stdio")
        return 0
    import uvicorn

    from kb.mcp.http import http_app

    uvicorn.run(http_app(server, host=host, token=settings.api_token), host=host,
                port=args.port, log_level="warning")
    return 0


def _server(settings, timeout_s: float):  # type: ignore[no-untyped-def]
    """The store as `kernelkb optimize` opens it (seeded when empty; the service when
    KERNELKB_SERVICE_URL is set), then the server over it."""
    from kb.mcp.server import build_server
    from optimizer.command import make_knowledge

    knowledge, write_back = make_knowledge(settings)
    if knowledge is None:
        raise SystemExit("kernelkb mcp: no knowledge store can be opened here")
    return build_server(WarmingUp(knowledge), write_back=write_back,
                        journal_dir=settings.data_dir / "mcp-journals", timeout_s=timeout_s)


class WarmingUp:
    """The store, warmed up (embedding model, vector matrix) on a thread while the server
    already answers: an agent's client times out a server that is slow to start (the
    model alone took 10-40 s of a loaded 2-core machine). The first use waits for it."""

    def __init__(self, knowledge: Any) -> None:
        self._knowledge = knowledge
        self._done = threading.Event()
        threading.Thread(target=self._warm_up, name="kernelkb-warm-up", daemon=True).start()

    def _warm_up(self) -> None:
        try:
            warm_up = getattr(self._knowledge, "warm_up", None)
            if warm_up is not None:
                warm_up()
        except Exception:  # noqa: BLE001 - each call then meets the fault itself
            log.exception("warming up the store failed")
        finally:
            self._done.set()

    def __getattr__(self, name: str) -> Any:
        self._done.wait()
        return getattr(self._knowledge, name)
