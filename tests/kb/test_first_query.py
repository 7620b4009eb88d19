"""The first query of a fresh process reads only what it needs (issue 29: a 100k store's
first `kernelkb query` took 10-25 s), with the same answers as a full load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from kernelkb.kb.vector_index import VectorIndex
from kernelkb.kernels.discovery import all_tasks, related_ops_of

if TYPE_CHECKING:
    from kernelkb.service import LocalKnowledge


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_first_top_reads_only_the_candidates_and_ranks_as_a_full_load(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    ids = [f"e{i:03d}" for i in range(120)]
    writer = VectorIndex(path=tmp_path / "chroma")
    with writer.writing():
        writer.upsert(ids, _unit(rng, len(ids)))
    writer.close()
    query = _unit(rng, 1)[0]
    candidates = ids[10:70] + ["not-stored"]

    fresh = VectorIndex(path=tmp_path / "chroma")
    pos, sim = fresh.top(query, candidates, 25)
    assert not fresh._loaded and len(fresh._ids) == 60  # the candidates' vectors only
    again = fresh.top(query, candidates, 25)  # from the part read, the same
    full = VectorIndex(path=tmp_path / "chroma")
    full.ensure_loaded()
    want = full.top(query, candidates, 25)
    for got in ((pos, sim), again):
        assert got[0].tolist() == want[0].tolist()
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    assert "not-stored" not in [candidates[p] for p in pos]
    fresh.ensure_loaded()  # a later full load replaces the part
    assert fresh._loaded and len(fresh._ids) == len(ids)
    fresh.close()
    full.close()


def test_registry_summary_is_the_registry_and_later_needs_no_torch(tmp_path: Path) -> None:
    tasks = all_tasks()
    ops = sorted({t.op_type for t in tasks.values()})
    live = {"ops": ops, "tasks": sorted(tasks),
            "related": {op: list(related_ops_of(op)) for op in ops}}
    code = ("import json, sys; from kernelkb.kernels.discovery import registry_summary; "
            "print(json.dumps([registry_summary(), 'torch' in sys.modules]))")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("KERNELKB_NO_TASK_CACHE", None)
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                      capture_output=True, text=True).stdout.splitlines()[-1])
            for _ in range(2)]
    assert runs[0] == [live, True]  # built from the tasks (torch), written to disk
    assert runs[1] == [live, False]  # read back: no task module imported
    assert (tmp_path / "kernelkb" / "task_registry.json").is_file()


def test_a_later_process_takes_the_vectors_from_the_mirror_until_a_write(
        tmp_path: Path) -> None:
    """The vectors a first query read from Chroma go to the folder's mirror file; the
    next process ranks from it without opening Chroma, with the same answer; a write to
    the folder (the generation moves) makes the mirror stale, and Chroma is read again."""
    rng = np.random.default_rng(1)
    ids = [f"e{i:03d}" for i in range(90)]
    folder = tmp_path / "chroma"
    writer = VectorIndex(path=folder)
    with writer.writing():
        writer.upsert(ids, _unit(rng, len(ids)))
    writer.close()
    query, candidates = _unit(rng, 1)[0], ids[5:60]

    first = VectorIndex(path=folder)
    want = first.top(query, candidates, 20)
    first.close()
    assert (folder / "kernelkb-vectors.bin").is_file()
    second = VectorIndex(path=folder)
    got = second.top(query, candidates, 20)
    assert second._collection is None  # Chroma never opened: all from the mirror
    assert got[0].tolist() == want[0].tolist()
    np.testing.assert_array_equal(got[1], want[1])

    changed = _unit(rng, 1)
    with writer.writing():  # another process's write: new vectors, the generation moves
        writer.upsert([ids[5]], changed)
    writer.close()
    third = VectorIndex(path=folder)
    third.top(query, candidates, 20)
    assert third._collection is not None  # the stale mirror was not used
    np.testing.assert_allclose(third._matrix[third._pos[ids[5]]], changed[0], rtol=1e-6)
    third.close()
    (folder / "kernelkb-vectors.bin").write_bytes(b"not a mirror")
    broken = VectorIndex(path=folder)
    assert broken.top(query, candidates, 20)[0].tolist() == third.top(
        query, candidates, 20)[0].tolist()  # an unreadable mirror is only a miss
    broken.close()


def test_a_fresh_process_takes_the_columns_from_the_cache_and_reads_only_new_rows(
        tmp_path: Path) -> None:
    """The column snapshot is kept beside a SQLite database; a new engine loads it and
    reads only the rows added since. A database that is not the one the cache describes
    (another file under the same name) is read whole."""
    from kb_testdata import record_dict
    from sqlalchemy import text

    from kernelkb.kb.settings import Settings
    from kernelkb.retrieval import columns
    from kernelkb.service import LocalKnowledge

    def store(root: Path) -> LocalKnowledge:
        return LocalKnowledge(Settings(data_dir=root, seeds_dir=root / "none", vectors=False))

    def table_ids(kb: LocalKnowledge) -> list[str]:
        with kb.engine.connect() as conn:
            return list(conn.execute(text("SELECT id FROM experience ORDER BY rowid")).scalars())

    kb = store(tmp_path)
    kb.ingest([record_dict(config={"B": n}, run=f"r{n}") for n in range(6)])
    with kb.session() as session:
        columns.snapshot(session)
    cache = columns.cache_file(kb.engine)
    assert cache is not None and cache.is_file()
    kb.ingest([record_dict(config={"B": n}, run=f"r{n}") for n in range(6, 9)])
    kb.close()

    again = store(tmp_path)
    with again.engine.connect() as conn:
        loaded = columns._load(cache, conn, 10**9)
    assert loaded is not None and len(loaded) == 6  # the cache as written
    with again.session() as session:
        snap = columns.snapshot(session)
    assert snap.ids.tolist() == table_ids(again) and len(snap) == 9
    again.close()

    whole = cache.read_bytes()
    for junk in (b"PK\x03\x04 truncated", whole[:100], b""):
        cache.write_bytes(junk)  # a cache cut short or not a cache: read the table
        broken = store(tmp_path)
        with broken.session() as session:
            assert columns.snapshot(session).ids.tolist() == table_ids(broken)
        with broken.engine.connect() as conn:  # and written whole again
            rewritten = columns._load(cache, conn, 10**9)
        assert rewritten is not None and len(rewritten) == 9
        broken.close()

    other = tmp_path / "other"  # a different database, its cache file copied in
    fresh = store(other)
    fresh.ingest([record_dict(config={"B": 99}, run="x")])
    fresh.close()
    other_cache = other / cache.name
    other_cache.write_bytes(cache.read_bytes())
    reopened = store(other)
    with reopened.session() as session:
        assert columns.snapshot(session).ids.tolist() == table_ids(reopened)
    reopened.close()


def test_the_mirror_keeps_what_other_queries_read(tmp_path: Path) -> None:
    """Two processes asking about different candidates both leave their vectors in the
    mirror: the second adds to it, it does not replace the first's."""
    rng = np.random.default_rng(2)
    ids = [f"e{i:03d}" for i in range(40)]
    folder = tmp_path / "chroma"
    writer = VectorIndex(path=folder)
    with writer.writing():
        writer.upsert(ids, _unit(rng, len(ids)))
    writer.close()
    query = _unit(rng, 1)[0]
    for part in (ids[:20], ids[20:]):
        reader = VectorIndex(path=folder)
        reader.top(query, part, 5)
        reader.close()
    last = VectorIndex(path=folder)
    last.top(query, ids, 5)
    assert last._collection is None and len(last._ids) == len(ids)
    last.close()


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) on the SQLite file (the column cache lies beside
    it), without vectors."""
    return {"vectors": False}


def test_a_few_new_rows_do_not_rewrite_the_column_cache(knowledge: LocalKnowledge,
                                                         monkeypatch) -> None:
    """A long-lived process (a server) reading a few rows per ingest leaves the file as it
    is until RESAVE_ROWS rows have come since it was written."""
    from kb_testdata import record_dict

    from kernelkb.retrieval import columns

    monkeypatch.setattr(columns, "RESAVE_ROWS", 3)
    kb = knowledge

    def rows_in_file() -> int:
        with kb.engine.connect() as conn:
            held = columns._load(cache, conn, 10**9)
        assert held is not None
        return len(held)

    kb.ingest([record_dict(config={"B": 0}, run="r0")])
    with kb.session() as session:
        columns.snapshot(session)  # nothing current on disk: written
    cache = columns.cache_file(kb.engine)
    assert cache is not None and rows_in_file() == 1
    sizes = []
    for n in range(1, 5):  # one row per ingest, read by the next query each time
        kb.ingest([record_dict(config={"B": n}, run=f"r{n}")])
        with kb.session() as session:
            columns.snapshot(session)
        sizes.append(rows_in_file())
    assert sizes == [1, 1, 4, 4]  # rewritten on the third row since, not on each
    kb.close()
