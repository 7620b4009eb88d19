"""``kernelkb mcp``: serve the MCP server over stdio (default) or streamable HTTP.

Light at import (argparse only) so ``kernelkb --help`` stays instant.
"""

from __future__ import annotations

import argparse
import logging
import sys

from kernelkb.cli.common import Command

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
    from kernelkb.api.access import write_policy
    from kernelkb.kb.settings import Settings

    settings = Settings()
    host = args.host or settings.host
    if args.http:
        try:  # before anything heavy: an unsafe bind is refused at once
            write_policy(host, settings.api_token)
        except ValueError as exc:
            sys.stderr.write(f"{exc}\n")
            return 2
        from kernelkb.api.http_protocol import port_problem

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

        from kernelkb.mcp.stdio import serve

        anyio.run(serve, server)
        return 0
    import uvicorn

    from kernelkb.api.http_protocol import serve_options
    from kernelkb.mcp.http import http_app

    uvicorn.run(http_app(server, host=host, token=settings.api_token), host=host,
                port=args.port, log_level="warning", **serve_options())
    return 0


def _server(settings, timeout_s: float):  # type: ignore[no-untyped-def]
    """The server over the store, which opens and warms up on a thread meanwhile."""
    from kernelkb.mcp.opening import OpeningStore
    from kernelkb.mcp.server import build_server

    store = OpeningStore(settings)
    return build_server(store, write_back=lambda: store.write_back,
                        journal_dir=settings.data_dir / "mcp-journals", timeout_s=timeout_s)


COMMANDS = (Command("mcp", HELP, add_arguments, run),)
