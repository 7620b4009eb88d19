"""``kernelkb serve``: the HTTP API and the web pages (loads seeds into an empty store)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from kernelkb.cli.common import Command


def _add_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default=None, help="default: KERNELKB_HOST or 127.0.0.1")
    parser.add_argument("--port", type=int, default=None, help="default: KERNELKB_PORT or 8765")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes sharing the port and the store (default 1; "
                             "2 on a 2-core host doubles what the GIL lets one answer)")


def _run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from kernelkb.api.access import write_policy
    from kernelkb.api.app import create_app
    from kernelkb.api.http_protocol import port_problem, serve_options
    from kernelkb.kb.settings import Settings

    if args.workers < 1:
        print(f"--workers {args.workers}: at least 1", file=sys.stderr)
        return 2
    settings = Settings()
    host = args.host or settings.host
    try:
        write_policy(host, settings.api_token)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    settings.host = host  # the app logs who may write at start-up
    port = args.port if args.port is not None else settings.port
    problem = port_problem(host, port)
    if problem:  # before the store and the model load, not 20 s later
        print(problem, file=sys.stderr)
        return 2
    if args.workers > 1:  # each worker process builds its app from the environment
        os.environ["KERNELKB_HOST"] = host
        os.environ[WORKER_VERBOSE] = "1" if getattr(args, "verbose", False) else ""
        uvicorn.run("kernelkb.cli.serve:worker_app", factory=True, host=host,
                    port=port, workers=args.workers, **serve_options())
        return 0
    uvicorn.run(create_app(settings), host=host, port=port, **serve_options())
    return 0


# -v of the command, for the worker processes (they start from the environment)
WORKER_VERBOSE = "_KERNELKB_SERVE_VERBOSE"


def worker_app() -> Any:
    """The app of one of several server processes (``--workers N``). Uvicorn starts each
    in a fresh process, where the command's logging was never set up: its start-up lines
    (the store, each seed file as it is stored, the model) were dropped, and a fresh team
    store's first minutes said nothing. Set up here as the command sets it up."""
    from kernelkb.api.app import create_app
    from kernelkb.kb.terminal import configure_logging

    configure_logging(os.environ.get(WORKER_VERBOSE) == "1")
    return create_app()


COMMANDS = (Command("serve", "run the HTTP service (loads seeds into an empty store)",
                    _add_serve, _run_serve),)
