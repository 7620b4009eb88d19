"""Experience rows as retrieval reads them, parsed once per process.

Why: under 20 concurrent clients a retrieve spent most of its CPU reading the same rows
again (SQL, ~0.5 ms per chunk), JSON-decoding each walked row to compare edits, and
validating each picked record (~0.7 ms). Experiences never change (content-hash ids, no
updates), so a parsed row stays right for as long as its row exists. The cache belongs to
a column snapshot (retrieval/columns.py) and is dropped with it when the snapshot sees rows
deleted (``kernelkb doctor --quarantine``), so a removed row is not served from memory.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from cachetools import LRUCache
from sqlmodel import Session, col, select

from kernelkb.kb.models import Experience
from kernelkb.kb.queries import load_or_skip
from kernelkb.kb.record import ExperienceRecord

ROWS_KEPT = 8192  # ~3 KiB of JSON each


@dataclass
class ParsedRow:
    """What retrieval needs of one row; the full record is validated on first use."""

    row: Experience
    keys: set[tuple[str, str]]
    _record: ExperienceRecord | None = field(default=None, repr=False)
    _failed: bool = False

    @property
    def triton_version(self) -> str:
        return self.row.triton_version

    def record(self) -> ExperienceRecord | None:
        """The validated record, or None for a row that fails to load (logged once)."""
        if self._record is None and not self._failed:
            self._record = load_or_skip(self.row)
            self._failed = self._record is None
        return self._record


# the words a summary compares by (edit_keys)
_WORD = re.compile(r"[a-z0-9_.]+|->")


def edit_keys(categories: str, config: dict, summary: str,
              diff: str = "") -> set[tuple[str, str]]:
    """What makes two hits the same edit: the same categories and configuration, the same
    summary text, or the same changed lines (one change measured again in other
    surroundings: the RoPE-table flip won in 26 attention configurations and filled five of
    five slots). Text compares by its words, case, punctuation and the edit's own category
    tags aside ("set NUM_WARPS 4 -> 2" and "set NUM_WARPS 4 -> 2 (warps_stages)" are one
    edit); a diff by its added and removed lines, context aside."""
    tags = set(categories.strip("|").split("|"))
    words = [w for w in _WORD.findall(summary.lower()) if w not in tags]
    keys = {("summary", " ".join(words))}
    if config:
        keys.add(("config", f"{categories}|{json.dumps(config, sort_keys=True)}"))
    changed = sorted({line.strip() for line in diff.splitlines()
                      if line[:1] in "+-" and line[:3] not in ("+++", "---") and line[1:].strip()})
    if changed:
        keys.add(("diff", "\n".join(changed)))
    return keys


def _parse(row: Experience) -> ParsedRow:
    try:
        edit = json.loads(row.record_json)["edit"]
        keys = edit_keys(row.categories, edit["config"], edit["summary"], edit["diff"])
    except (ValueError, KeyError, TypeError):  # unreadable JSON: its record() says so
        keys = {("id", row.id)}
    return ParsedRow(row=row, keys=keys)


class RowCache:
    """id -> ParsedRow, least recently used dropped past ``size``; thread-safe."""

    def __init__(self, size: int = ROWS_KEPT) -> None:
        self.size = size
        self._items: LRUCache[str, ParsedRow] = LRUCache(size)  # cachetools; not thread-safe
        self._lock = threading.Lock()

    def get_many(self, session: Session, ids: Sequence[str]) -> dict[str, ParsedRow]:
        """The rows of these ids that exist (read from SQL only when not cached)."""
        with self._lock:
            found = {i: p for i in ids if (p := self._items.get(i)) is not None}
        missing = [i for i in ids if i not in found]
        if missing:
            fresh = {r.id: _parse(r) for r in session.exec(
                select(Experience).where(col(Experience.id).in_(missing)))}
            for row in fresh.values():
                session.expunge(row.row)  # kept past the session: plain data from now on
            found.update(fresh)
            with self._lock:
                self._items.update(fresh)
        return found
