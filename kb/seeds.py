"""Seeds: the experiences shipped in ``seeds/*.jsonl`` that an empty store loads first."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, overload

from kernelkb.kb.ingest import IngestReport
from kernelkb.kb.record import parse_record

log = logging.getLogger(__name__)

IngestFn = Callable[[Sequence[Any]], IngestReport]
FileDone = Callable[[str, IngestReport], None]  # a seed file's name and report, as it is stored


@overload
def read_jsonl(path: Path) -> list[str | bytes]: ...
@overload
def read_jsonl(path: Path, with_line_numbers: Literal[True]
               ) -> tuple[list[str | bytes], list[int]]: ...


def read_jsonl(path: Path, with_line_numbers: bool = False) -> Any:
    """Non-blank lines of a JSONL file (each validated later by ingest), and optionally
    the 1-based line number of each, so a rejection can name its line.

    Lines end at "\n" only: JSON text may hold U+2028 or U+0085 raw (``export`` writes
    them so), and ``str.splitlines`` would cut a record there. A leading byte-order mark
    is skipped. A line that is not UTF-8 stays bytes, and ingest rejects it by its line
    number (not decoded with replacement characters: that would store changed text)."""
    data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    lines: list[str | bytes] = []
    numbers: list[int] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        raw = raw.removesuffix(b"\r")
        if not raw.strip():
            continue
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append(raw)
        numbers.append(number)
    return (lines, numbers) if with_line_numbers else lines


def seed_files(seeds_dir: Path) -> list[Path]:
    return sorted(p for p in seeds_dir.glob("*.jsonl") if p.is_file())


def count_records(paths: Sequence[Path]) -> int:
    """Non-blank lines of the files: what a load will embed, for its first line."""
    total = 0
    for path in paths:
        with open(path, "rb") as handle:
            total += sum(1 for line in handle if line.strip())
    return total


def load_seeds(seeds_dir: Path, ingest: IngestFn,
               on_file: FileDone | None = None) -> dict[str, IngestReport]:
    """Ingest every ``*.jsonl`` in seeds_dir; one report per file, each logged (and given
    to ``on_file``) as it is stored: a fresh install embeds them for tens of seconds, and
    a line per file then beats nine lines at the end."""
    reports: dict[str, IngestReport] = {}
    for path in seed_files(seeds_dir):
        report = ingest(read_jsonl(path))
        reports[path.name] = report
        log.info("seeded %s: %d accepted, %d duplicate, %d rejected", path.name,
                 len(report.accepted), len(report.duplicates), len(report.rejected))
        for rejection in report.rejected:
            log.warning("seed %s line %d: %s: %s", path.name, rejection.index + 1,
                        rejection.field, rejection.reason)
        if on_file is not None:
            on_file(path.name, report)
    return reports


def seeds_missing(seeds_dir: Path, has: Callable[[str], bool]) -> list[str]:
    """Seed files whose first record the store does not hold (``has(id)``). A first line
    that does not parse is not evidence of anything: that file is left out here, and a
    full load names its problem."""
    missing = []
    for path in seed_files(seeds_dir):
        line = _first_line(path)
        if line is None:
            continue
        try:
            record = parse_record(json.loads(line))
        except Exception:  # noqa: BLE001 - a broken line: the load reports it
            continue
        if not has(record.id or ""):
            missing.append(path.name)
    return missing


def _first_line(path: Path) -> bytes | None:
    """The first non-blank line, read no further (seed files run to megabytes)."""
    with open(path, "rb") as handle:
        for raw in handle:
            raw = raw.removeprefix(b"\xef\xbb\xbf").strip()
            if raw:
                return raw
    return None
