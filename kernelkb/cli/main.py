"""The ``kernelkb`` console command: the subcommands of every command group, one parser.

Each group module (``serve``, ``store``, ``query``, ``optimize``, ``revalidate``,
``tasks``, ``dispatch``, ``mcp``) declares ``COMMANDS``; a new command goes into its
group's tuple (or is added with ``register``). Groups are light at import (argparse
only), so ``kernelkb --help`` is instant. An error a user can fix prints one line and
exits 2 (``kernelkb.errors``); a fault of the program keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from kernelkb.cli import (
    dispatch,
    mcp,
    optimize,
    query,
    revalidate,
    serve,
    store,
    sweep,
    tasks,
)
from kernelkb.cli.common import Command
from kernelkb.errors import user_message

COMMANDS: dict[str, Command] = {}


def register(command: Command) -> None:
    """Add (or replace) a subcommand."""
    COMMANDS[command.name] = command


for _group in (serve, store, query, optimize, revalidate, sweep, tasks, dispatch, mcp):
    for _command in _group.COMMANDS:
        register(_command)


def _version() -> str:
    """The installed distribution's version (pyproject.toml's, once installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kernelkb")
    except PackageNotFoundError:  # a checkout on sys.path, never installed
        return "unknown (not installed)"


class DefaultsHelp(argparse.HelpFormatter):
    """Every flag's help says its default, unless it already names one in words."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text.lower() or default in (None, False, [], argparse.SUPPRESS) \
                or not action.option_strings:
            return text
        return f"{text} (default: {default})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelkb", description="KernelKB: an experience base for agent-driven Triton "
        "kernel optimization. Store, query and serve what worked (serve, query, insights, "
        "bootstrap); optimize a kernel (optimize); give coding agents the tools (mcp).")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"kernelkb {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_arguments(sub.add_parser(command.name, help=command.help,
                                             description=command.help,
                                             formatter_class=DefaultsHelp))
    return parser


def _use_tasks_dirs(args: argparse.Namespace) -> None:
    """Name the task folders (setting and --tasks-dir) before the command runs; tasks
    are read from them when a command first needs a task."""
    from kernelkb.kb.settings import Settings
    from kernelkb.kernels.discovery import add_tasks_dirs, split_dirs

    add_tasks_dirs([*split_dirs(Settings().tasks_dir), *getattr(args, "tasks_dir", [])])


def main(argv: Sequence[str] | None = None) -> int:
    from kernelkb.kb.terminal import configure_logging

    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)  # bars on a terminal only; no third-party INFO noise
    try:
        _use_tasks_dirs(args)
    except ValueError as err:  # a tasks folder that is not one
        print(f"kernelkb: error: {user_message(err) or err}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[args.command].run(args)
    except BrokenPipeError:  # `kernelkb export | head -1`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"kernelkb {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        message = user_message(err)
        if message is None:
            raise
        print(f"kernelkb {args.command}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
