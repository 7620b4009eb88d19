"""What the CLI's command groups share: the store a command opens, the names it matches,
the flags several commands take, JSON output.

Heavy imports (torch, chromadb, the embedder) happen inside the functions, so
``kernelkb --help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kernelkb.errors import UsageError

if TYPE_CHECKING:
    from kernelkb.kb.ingest import IngestReport
    from kernelkb.service import LocalKnowledge

__all__ = ["TASK_HELP", "Command", "UsageError", "hardware_flags", "json_flag", "knowledge",
           "no_arguments", "not_a_readable_file", "print_json", "print_report",
           "quiet_batches", "reader"]


# what a command that acts on a task (optimize, sweep, revalidate) takes as its TASK
TASK_HELP = ("a task's name, e.g. softmax (`kernelkb tasks` lists them; each shipped task is "
             "named after its op)")


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one line of help, its flags and what it runs."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def knowledge() -> LocalKnowledge:
    """The store the settings name (kernelkb.operations.open_store)."""
    from kernelkb.kb.settings import Settings
    from kernelkb.operations import open_store

    return open_store(Settings())


def no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def reader() -> LocalKnowledge:
    """The store for a command that answers questions: an empty store first loads the
    shipped seeds, so a fresh install answers from its first command (as ``serve`` does);
    one kept empty by the settings says how to fill it."""
    from kernelkb.kb.terminal import progress

    store = knowledge()
    reports: dict[str, IngestReport] = {}
    if store.seeds_to_load():  # said only when it loads (a full store: a few lookups)
        print(f"first use: loading seeds from {store.settings.seeds_dir} into the store at "
              f"{store.location()} (the embedding model loads first)", file=sys.stderr,
              flush=True)

        def stored(name: str, report: IngestReport) -> None:
            print(f"  stored {name}: {len(report.accepted)} experiences", file=sys.stderr,
                  flush=True)

        levels = {name: logging.getLogger(name).level for name in SEEDING_LOGGERS}
        for name in levels:
            logging.getLogger(name).setLevel(logging.WARNING)
        try:
            with progress("first use: loading the shipped seeds into the store"):
                reports = store.seed_if_empty(on_file=stored)
        finally:
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)
    if reports:
        loaded = sum(len(r.accepted) for r in reports.values())
        print(f"empty store at {store.location()}: loaded {loaded} shipped experiences "
              "first", file=sys.stderr)
    note = store.empty_note()
    if note:
        print(note, file=sys.stderr)
    return store


def print_json(data: object) -> None:
    print(json.dumps(data, indent=2, default=str))


def json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def hardware_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--op", dest="op_type", metavar="NAME", help="the op, e.g. softmax")
    parser.add_argument("--gpu", dest="gpu_name", help="GPU name, e.g. 'NVIDIA H200'")
    parser.add_argument("--arch", help="e.g. sm_90")
    parser.add_argument("--triton", dest="triton_version", help="Triton version")
    parser.add_argument("--regime", help="shape regime of the op's task, e.g. long_rows "
                        "(see `kernelkb dispatch regimes TASK`)")


def print_report(name: str, report, as_json: bool,  # type: ignore[no-untyped-def]
                  line_numbers: list[int] | None = None) -> None:
    if as_json:
        print_json({name: report.model_dump()})
        return
    print(f"{name}: {len(report.accepted)} accepted, {len(report.duplicates)} duplicate, "
          f"{len({r.index for r in report.rejected})} rejected")
    for r in report.rejected:
        line = line_numbers[r.index] if line_numbers else r.index + 1
        print(f"  {name}:{line}: {r.field}: {r.reason}")


# their INFO lines (each batch, each seed file) repeat what a command prints as it goes
SEEDING_LOGGERS = ("kernelkb.kb.ingest", "kernelkb.kb.seeds", "kernelkb.service")


def quiet_batches(args: argparse.Namespace) -> None:
    """Without --verbose, ingest's per-batch INFO lines are noise beside a command's own
    summary."""
    if not args.verbose:
        for name in SEEDING_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def not_a_readable_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a data file, or None: a folder, a pipe or a device
    (/dev/zero never ends) is not one."""
    if not path.exists():
        return "no such file"
    if not path.is_file():
        return "not a regular file (a folder, a pipe or a device)"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None
