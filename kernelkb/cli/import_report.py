"""What ``kernelkb import`` prints: a line per file that holds tuning data, a capped list of
files that could not be read, and one line per kind of file skipped.

Why: a Triton cache of 400 compiled kernels holds about 800 JSON files of compile
metadata beside one autotune file; a line for each buried the one that mattered.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernelkb.kb.importers.load import FileImport
from kernelkb.kb.importers.records import SKIPS

UNREADABLE_SHOWN = 10  # files that could not be read, each with its reason
PROBLEMS_SHOWN = 5  # bad entries shown per file
EXAMPLES_SHOWN = 3  # names of files skipped as not tuning data


def progress_line(r: FileImport) -> str | None:
    """The line printed as a file finishes; None for a file skipped or refused whole."""
    if r.skipped or r.unreadable:
        return None
    rate = r.seen / r.seconds if r.seconds else 0.0
    return f"{r.source}: {r.seen} records in {r.seconds:.1f} s ({rate:.0f}/s)"


def summary_lines(results: Iterable[FileImport]) -> list[str]:
    results = list(results)
    lines: list[str] = []
    for r in results:
        if r.skipped or r.unreadable:
            continue
        lines.append(f"{r.source}: {r.accepted} accepted, {r.duplicates} duplicate, "
                     f"{r.rejected} rejected")
        lines += [f"  note: {note}" for note in r.notes]
        lines += [f"  {line}" for line in r.problems[:PROBLEMS_SHOWN]]
        if len(r.problems) > PROBLEMS_SHOWN:
            lines.append(f"  ... and {len(r.problems) - PROBLEMS_SHOWN} more")
    unreadable = [r for r in results if r.unreadable and not r.skipped]
    for r in unreadable[:UNREADABLE_SHOWN]:
        lines += [f"{line} (not imported)" for line in r.problems[:1]]
    if len(unreadable) > UNREADABLE_SHOWN:
        lines.append(f"... and {len(unreadable) - UNREADABLE_SHOWN} more files not "
                     "imported (--json lists each)")
    for kind, what in SKIPS.items():
        skipped = [r for r in results if r.skipped == kind]
        if not skipped:
            continue
        line = f"{len(skipped)} file{'s' if len(skipped) != 1 else ''} skipped: {what}"
        if kind != "triton-compiled":
            names = ", ".join(r.source for r in skipped[:EXAMPLES_SHOWN])
            more = f" and {len(skipped) - EXAMPLES_SHOWN} more" \
                if len(skipped) > EXAMPLES_SHOWN else ""
            line += f": {names}{more}"
        lines.append(line)
    return lines


def skipped_counts(results: Iterable[FileImport]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        if r.skipped:
            counts[r.skipped] = counts.get(r.skipped, 0) + 1
    return counts
