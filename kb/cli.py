"""The ``kernelkb`` console command: argparse subcommands from one dispatch table.

To add a subcommand, write ``_add_<name>(parser)`` and ``_run_<name>(args) -> int`` and
put a ``Command`` into ``COMMANDS`` (or call ``register`` from another entry module).
Heavy imports (torch, chromadb, the embedder) happen inside the handlers, so
``kernelkb --help`` is instant.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}


def register(command: Command) -> None:
    """Add (or replace) a subcommand."""
    COMMANDS[command.name] = command


def _not_yet(args: argparse.Namespace) -> int:
    raise NotImplementedError(f"kernelkb {args.command} is not implemented yet")


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


for _name, _help in [
    ("serve", "run the HTTP service (loads seeds into an empty store)"),
    ("ingest", "ingest a JSONL file of experience records"),
    ("query", "retrieve experiences and print the few-shot block"),
    ("insights", "what worked: aggregate by edit category"),
    ("bootstrap", "what to try first on new hardware"),
    ("reindex", "rebuild the vector index from SQL"),
    ("export", "write every experience as JSONL"),
    ("stats", "counts by op, hardware, verdict"),
    ("seed", "ingest every seeds/*.jsonl"),
]:
    register(Command(_name, _help, _no_arguments, _not_yet))

from optimizer import command as _optimize  # noqa: E402 - light at import (argparse only)

register(Command("optimize", _optimize.HELP, _optimize.add_arguments, _optimize.run))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelkb", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_arguments(sub.add_parser(command.name, help=command.help))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    return COMMANDS[args.command].run(args)


if __name__ == "__main__":
    sys.exit(main())
