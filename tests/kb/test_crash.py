"""SQL and vectors cannot drift: real `kernelkb ingest` / `reindex` processes are killed
(SIGKILL at a crash point, kb/crashpoints.py) and two ingests run at once; afterwards
rows = vectors = records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kb_testdata import make_knowledge, record_dict
from servers import backend_env

from kernelkb.kb.doctor import sql_ids

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # real processes, each loading the model
BATCH = 16  # KERNELKB_WRITE_BATCH: records per committed write; crash points count batches


def _write(path: Path, first: int, last: int) -> set[str]:
    from kernelkb.kb.record import parse_record

    records = [record_dict(summary=f"crash record {n}", run=f"crash-{n // 50}",
                           iteration=n % 50, config={"B": n}) for n in range(first, last)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return {parse_record(r).id or "" for r in records}


def _cli(data: Path, *args: str, crash: str | None = None,
         backend: dict[str, Any] | None = None, batch: int = BATCH) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELKB_")}
    env.update(KERNELKB_DATA_DIR=str(data), KERNELKB_SEEDS_DIR=str(data / "no-seeds"),
               KERNELKB_WRITE_BATCH=str(batch), HF_HUB_OFFLINE="1",
               **backend_env(backend or {}))
    if crash:
        env["KERNELKB_TEST_CRASH"] = crash
    return subprocess.Popen([sys.executable, "-m", "kernelkb", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run(data: Path, *args: str, crash: str | None = None) -> int:
    proc = _cli(data, *args, crash=crash)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 1, -9), err[-2000:]
    return proc.returncode


def _counts(data: Path, backend: dict[str, Any] | None = None) -> tuple[set[str], set[str]]:
    kb = make_knowledge(data, **(backend or {}))
    try:
        assert kb.index is not None
        return sql_ids(kb.engine), kb.index.all_ids()
    finally:
        kb.close()


def test_ingest_killed_between_sql_and_vectors_is_repaired(tmp_path: Path) -> None:
    data, jsonl = tmp_path / "store", tmp_path / "run.jsonl"
    ids = _write(jsonl, 0, 2 * BATCH + 3)  # 3 batches: 16, 16, 3
    assert _run(data, "ingest", str(jsonl), crash="ingest.after_sql:2") == -9
    rows, vectors = _counts(data)
    assert len(rows) == 2 * BATCH and len(vectors) == BATCH  # batch 2 lost its vectors
    assert _run(data, "ingest", str(jsonl), crash="ingest.after_vectors:1") == -9
    rows, vectors = _counts(data)
    assert rows == vectors and len(rows) == 2 * BATCH  # start-up repair gave them
    assert _run(data, "ingest", str(jsonl)) == 0
    assert _counts(data) == (ids, ids)


def test_start_up_repairs_drift_both_ways(tmp_path: Path) -> None:
    data, jsonl = tmp_path / "store", tmp_path / "run.jsonl"
    ids = _write(jsonl, 0, BATCH + 5)
    assert _run(data, "ingest", str(jsonl), crash="ingest.after_sql:1") == -9  # no vectors
    kb = make_knowledge(data)
    assert kb.index is not None
    kb.index.upsert(["orphan-vector"], kb.index.vectors(["none"]) + 0.1)
    kb.close()
    kb = make_knowledge(data)
    kb.warm_up()  # what `serve` does at start-up
    assert kb.index is not None and kb.index.all_ids() == sql_ids(kb.engine)
    assert len(sql_ids(kb.engine)) == BATCH and sql_ids(kb.engine) < ids  # batch 1 of 2
    kb.close()


def test_reindex_killed_half_way_keeps_the_old_index(tmp_path: Path) -> None:
    data, jsonl = tmp_path / "store", tmp_path / "run.jsonl"
    ids = _write(jsonl, 0, 2 * BATCH + 3)  # 3 reindex batches: 16, 16, 3
    assert _run(data, "ingest", str(jsonl)) == 0
    assert _run(data, "reindex", crash="reindex.batch:2") == -9  # after 32 of 35
    assert _counts(data) == (ids, ids)
    assert _run(data, "reindex") == 0
    assert _counts(data) == (ids, ids)


def test_two_ingests_at_once_lose_and_duplicate_nothing(tmp_path: Path,
                                                        store_backend: dict[str, Any]) -> None:
    data = tmp_path / "store"
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    # small batches interleave the two writers often (about 12 batches each)
    ids = _write(a, 0, 200) | _write(b, 100, 300)  # half of each file is in the other
    procs = [_cli(data, "ingest", str(a), backend=store_backend),
             _cli(data, "ingest", str(b), backend=store_backend)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    accepted = sum(int(o[0].split(": ")[1].split(" accepted")[0]) for o in outs)
    assert accepted == len(ids) == 300  # each record stored once, by one of the two
    assert _counts(data, store_backend) == (ids, ids)
    kb = make_knowledge(data, **store_backend)
    assert kb.list(limit=1).total == 300
    with kb.session() as session:  # one full-text row per record (FTS5 / PostgreSQL's)
        assert session.connection().exec_driver_sql(
            "SELECT count(*) FROM experience_fts").scalar() == 300
    kb.close()
