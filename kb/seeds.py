"""Seeds: the experiences shipped in ``seeds/*.jsonl`` that an empty store loads first."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, overload

from kb.ingest import IngestReport

log = logging.getLogger(__name__)

IngestFn = Callable[[Sequence[Any]], IngestReport]


@overload
def read_jsonl(path: Path) -> list[str]: ...
@overload
def read_jsonl(path: Path, with_line_numbers: Literal[True]) -> tuple[list[str], list[int]]: ...


def read_jsonl(path: Path, with_line_numbers: bool = False) -> Any:
    """Non-blank lines of a JSONL file (each validated later by ingest), and optionally
    the 1-based line number of each, so a rejection can name its line. Bytes that are
    not UTF-8 become U+FFFD rather than failing the whole file."""
    lines, numbers = [], []
    text = path.read_text(encoding="utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            lines.append(line)
            numbers.append(number)
    return (lines, numbers) if with_line_numbers else lines


def load_seeds(seeds_dir: Path, ingest: IngestFn) -> dict[str, IngestReport]:
    """Ingest every ``*.jsonl`` in seeds_dir; one report per file."""
    reports: dict[str, IngestReport] = {}
    for path in sorted(seeds_dir.glob("*.jsonl")):
        report = ingest(read_jsonl(path))
        reports[path.name] = report
        for rejection in report.rejected:
            log.warning("seed %s line %d: %s: %s", path.name, rejection.index + 1,
                        rejection.field, rejection.reason)
    return reports
