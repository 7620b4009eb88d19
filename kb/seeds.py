"""Seeds: the experiences shipped in ``seeds/*.jsonl`` that an empty store loads first."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kb.ingest import IngestReport

log = logging.getLogger(__name__)

IngestFn = Callable[[Sequence[Any]], IngestReport]


def read_jsonl(path: Path) -> list[str]:
    """Non-blank lines of a JSONL file (each validated later by ingest)."""
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


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
