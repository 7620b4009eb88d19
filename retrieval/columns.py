"""The ladder's columns of every experience, held in memory as numpy arrays.

Why: at 100k rows the ladder's SQL (~9 ms) and the Python loops that weighed each of
~1,700 candidates (~7 ms) were a third of a query. The columns the ladder and the
ranking read are small and experiences are immutable (content-hash ids, never updated),
so a columnar snapshot answers a rung with a few vectorised comparisons.

SQL stays the source of truth: each query checks ``max(rowid)`` (O(1) in SQLite) and
reads only rows added since; a smaller maximum on a fresh read (rows deleted by hand)
reloads all. On other databases (no rowid) the key is ``count(*)``: a larger count reads
the rows whose ids the snapshot lacks, a smaller one reloads all. Strings are
stored as integer codes of a per-column vocabulary, so a filter is ``codes == code``.

On SQLite the snapshot is also kept in a file beside the database (``<db>.columns.npz``):
a fresh process (every CLI ``query``) loads it and reads only the rows added since,
instead of every row (1.3 s of a first query at 100k rows). The file is a cache, never a
source: it is used only when the first row and the row at its key still have the ids it
recorded; anything else reads the table as before.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import bindparam, text
from sqlalchemy.engine import Engine
from sqlmodel import Session

from kernelkb.kb.db import engine_of
from kernelkb.kernels.shared.atomic import replaced
from kernelkb.retrieval.row_cache import RowCache

log = logging.getLogger(__name__)
RESAVE_ROWS = 1000  # rows read since the cache file was written that make it worth rewriting

CODED = ("op_type", "gpu_name", "arch", "triton_version", "task_id", "dtype", "verdict",
         "evidence", "categories", "regime", "confidence")
FLOATS = ("speedup_vs_parent", "speedup_vs_baseline")  # NaN where SQL has NULL


@dataclass
class Vocab:
    """String <-> int code for one column; codes only grow, so old arrays stay valid."""

    words: list[str] = field(default_factory=list)
    codes: dict[str, int] = field(default_factory=dict)

    def encode(self, values: list[str]) -> np.ndarray:
        out = np.empty(len(values), dtype=np.int32)
        for n, value in enumerate(values):
            code = self.codes.get(value)
            if code is None:
                code = self.codes[value] = len(self.words)
                self.words.append(value)
            out[n] = code
        return out

    def code(self, value: str | None) -> int:
        """-1 for a value no row has: it matches nothing."""
        return -1 if value is None else self.codes.get(value, -1)

    def codes_with_part(self, part: str) -> list[int]:
        """Codes of the "+"-joined values that contain ``part`` (a regime), and of the
        empty ones (NULL, ""): a row whose regime is unknown is not evidence against."""
        return [n for n, word in enumerate(self.words) if not word or part in word.split("+")]


@dataclass(frozen=True)
class Snapshot:
    """Immutable columns of rows 0..n-1 (rowid order); replaced, never changed in place."""

    ids: np.ndarray  # object array of experience ids
    coded: dict[str, np.ndarray]
    floats: dict[str, np.ndarray]
    vocab: dict[str, Vocab]
    key: int  # max(rowid), or count(*) off SQLite
    # parsed rows, shared along one lineage of snapshots; a reload (rows deleted) drops it
    rows: RowCache = field(default_factory=RowCache, compare=False)

    def __len__(self) -> int:
        return len(self.ids)

    def rows_of_ops(self, op_types: tuple[str, ...]) -> np.ndarray:
        """Row numbers (ascending) whose op_type is one of op_types."""
        codes = [self.vocab["op_type"].code(op) for op in op_types]
        groups = [self._op_rows[c] for c in codes if c in self._op_rows]
        if not groups:
            return np.zeros(0, dtype=np.int64)
        return groups[0] if len(groups) == 1 else np.sort(np.concatenate(groups))

    @property
    def _op_rows(self) -> dict[int, np.ndarray]:
        cached = self.__dict__.get("_op_rows_cache")
        if cached is None:
            ops = self.coded["op_type"]
            order = np.argsort(ops, kind="stable")
            bounds = np.flatnonzero(np.diff(ops[order])) + 1
            cached = {int(ops[g[0]]): g for g in np.split(order, bounds) if len(g)}
            object.__setattr__(self, "_op_rows_cache", cached)
        return cached


_COLUMNS = ", ".join(("id", *CODED, *FLOATS))


class ColumnStore:
    """Keeps one engine's snapshot current; thread-safe, cheap to ask when nothing changed."""

    def __init__(self, engine: Engine) -> None:
        self._sqlite = engine.dialect.name == "sqlite"
        self._lock = threading.Lock()
        self._snap: Snapshot | None = None
        self._file = cache_file(engine)
        self._unsaved: int | None = None  # rows this snapshot holds beyond the file; None:
        # the file holds nothing current

    def current(self, session: Session) -> Snapshot:
        conn = session.connection()
        key_sql = "SELECT max(rowid) FROM experience" if self._sqlite else \
            "SELECT count(*) FROM experience"
        key = int(conn.exec_driver_sql(key_sql).scalar() or 0)  # no statement compiling
        with self._lock:
            snap = self._snap
            if snap is not None and snap.key == key:
                return snap
            if snap is not None and key < snap.key:
                # a reader whose transaction began before another thread's refresh: the
                # snapshot is newer, not wrong. Only a fresh read below it means deletion.
                with engine_of(session).connect() as fresh:
                    if int(fresh.execute(text(key_sql)).scalar() or 0) >= snap.key:
                        return snap
            if snap is None and self._file is not None:
                snap = _load(self._file, conn, key)
                self._unsaved = 0 if snap is not None else None
            if snap is None or key < snap.key:
                snap = _empty()
            if self._sqlite:
                rows = conn.execute(text(f"SELECT {_COLUMNS} FROM experience WHERE rowid > "
                                         f"{snap.key} AND rowid <= {key} ORDER BY rowid")).all()
            else:
                rows = _rows_not_held(conn, snap)
            self._snap = _extend(snap, rows, key)
            # written when it holds nothing current, or once RESAVE_ROWS came since: a
            # server taking a few rows per ingest does not rewrite it on each query after
            if self._file is not None and rows:
                unsaved = None if self._unsaved is None else self._unsaved + len(rows)
                if unsaved is None or unsaved >= RESAVE_ROWS:
                    unsaved = 0 if _save(self._file, self._snap) else None
                self._unsaved = unsaved
            return self._snap


def cache_file(engine: Engine) -> Path | None:
    """``<db>.columns.npz`` for a SQLite file database, else None."""
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database + ".columns.npz")


def _save(path: Path, snap: Snapshot) -> bool:
    """Written whole to a temporary file, then renamed over: a reader sees the old file
    or the new one. A folder that cannot be written keeps no cache (False)."""
    last = str(snap.ids[-1]) if len(snap) else ""
    meta = {"key": snap.key, "last": last, "ids": snap.ids.tolist(),
            "vocab": {c: snap.vocab[c].words for c in CODED}}
    arrays: dict[str, np.ndarray] = {"meta": np.array(json.dumps(meta))}
    arrays.update({f"c_{c}": snap.coded[c] for c in CODED})
    arrays.update({f"f_{c}": snap.floats[c] for c in FLOATS})
    try:
        with replaced(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as bool
    except OSError as exc:
        log.debug("column snapshot not cached at %s: %s", path, exc)
        return False
    return True


def _load(path: Path, conn: Any, key: int) -> Snapshot | None:
    """The cached snapshot if it still describes the table's first rows, else None."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            coded = {c: data[f"c_{c}"] for c in CODED}
            floats = {c: data[f"f_{c}"] for c in FLOATS}
    except Exception as exc:  # noqa: BLE001 - a cache: truncated, not a zip, other keys
        log.debug("column snapshot cache %s unreadable: %s", path, exc)
        return None
    held = int(meta["key"])
    if held > key or not meta["ids"]:
        return None
    # the row at the key and the first row as recorded: the same table, grown since (a
    # row deleted in between leaves a stale id, which retrieval drops when it reads SQL)
    ends = conn.execute(text("SELECT id FROM experience WHERE rowid = :k OR rowid = "
                             "(SELECT min(rowid) FROM experience) ORDER BY rowid"),
                        {"k": held}).scalars().all()
    if ends != list(dict.fromkeys([meta["ids"][0], meta["last"]])):
        return None
    ids = np.empty(len(meta["ids"]), dtype=object)
    ids[:] = meta["ids"]
    vocab = {c: Vocab(list(words), {w: n for n, w in enumerate(words)})
             for c, words in meta["vocab"].items()}
    if any(len(a) != len(ids) for a in (*coded.values(), *floats.values())):
        return None
    return Snapshot(ids, coded, floats, vocab, held)


def _rows_not_held(conn: Any, snap: Snapshot) -> list[Any]:
    """Without a rowid (PostgreSQL): rows are never updated, so the rows to add are those
    whose id the snapshot lacks. Reading the ids is much cheaper than reloading every
    column on each write, and keeps the parsed-row cache (a full reload dropped both)."""
    if not len(snap):
        return list(conn.execute(text(f"SELECT {_COLUMNS} FROM experience")).all())
    held = set(snap.ids.tolist())
    new = [i for i in conn.execute(text("SELECT id FROM experience")).scalars()
           if i not in held]
    query = text(f"SELECT {_COLUMNS} FROM experience WHERE id IN :ids").bindparams(
        bindparam("ids", expanding=True))
    return [row for start in range(0, len(new), 500)
            for row in conn.execute(query, {"ids": new[start : start + 500]}).all()]


def _empty() -> Snapshot:
    return Snapshot(ids=np.zeros(0, dtype=object),
                    coded={c: np.zeros(0, dtype=np.int32) for c in CODED},
                    floats={c: np.zeros(0, dtype=np.float64) for c in FLOATS},
                    vocab={c: Vocab() for c in CODED}, key=0)


def _extend(snap: Snapshot, rows: Sequence[Any], key: int) -> Snapshot:
    if not rows:
        return Snapshot(snap.ids, snap.coded, snap.floats, snap.vocab, key, snap.rows)
    cols = list(zip(*rows, strict=True))
    ids = np.empty(len(rows), dtype=object)
    ids[:] = cols[0]
    coded = {c: np.concatenate([snap.coded[c], snap.vocab[c].encode(list(cols[1 + n]))])
             for n, c in enumerate(CODED)}
    floats = {c: np.concatenate([snap.floats[c], np.array(
        [math.nan if v is None else v for v in cols[1 + len(CODED) + n]], dtype=np.float64)])
        for n, c in enumerate(FLOATS)}
    return Snapshot(np.concatenate([snap.ids, ids]), coded, floats, snap.vocab, key, snap.rows)


_STORES: weakref.WeakKeyDictionary[Engine, ColumnStore] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def last_snapshot(engine: Engine) -> Snapshot | None:
    """The engine's snapshot as last read, without asking the database whether it is
    current (None before the first read): for what may lag a write by a moment."""
    with _STORES_LOCK:
        store = _STORES.get(engine)
    return store._snap if store is not None else None


def snapshot(session: Session) -> Snapshot:
    """The current columns of the session's database (one store per engine)."""
    engine = engine_of(session)
    with _STORES_LOCK:
        store = _STORES.get(engine)
        if store is None:
            store = _STORES[engine] = ColumnStore(engine)
    return store.current(session)
