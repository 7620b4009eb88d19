"""A store shared by many processes, on both backends (SQLite file + Chroma folder, and
PostgreSQL + a Chroma server): a running service sees what other processes write, and
writers at once lose and duplicate nothing. Every writer here is a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from kb_testdata import record_dict
from servers import backend_env

from kernelkb.kb.doctor import sql_ids
from kernelkb.kb.record import parse_record
from kernelkb.service import LocalKnowledge

REPO = Path(__file__).resolve().parents[2]
from live_server import live_server  # noqa: E402


def _records(first: int, last: int, summary: str) -> list[dict[str, Any]]:
    return [record_dict(summary=f"{summary} {n}", run=f"team-{n // 40}", iteration=n % 40,
                        config={"ROWS": n}) for n in range(first, last)]


def _env(data: Path, backend: dict[str, Any]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELKB_")}
    env.update(KERNELKB_DATA_DIR=str(data), KERNELKB_SEEDS_DIR=str(data / "no-seeds"),
               HF_HUB_OFFLINE="1", **backend_env(backend))
    return env


@pytest.mark.slow  # a CLI process loads the model (~1 min on 2 busy cores)
def test_running_server_sees_vectors_and_rows_another_process_wrote(
        tmp_path: Path, knowledge: LocalKnowledge, store_backend: dict[str, Any]) -> None:
    kb = knowledge  # on both backends (tests/kb/conftest.py)
    data = kb.settings.data_dir
    kb.ingest(_records(0, 20, "raise BLOCK_SIZE to cover the row"))
    later = _records(0, 12, "persistent programs loop over rows of the batch")
    path = tmp_path / "later.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in later))
    query = {"op_type": "softmax", "gpu_name": "NVIDIA H200", "arch": "sm_90", "k": 20,
             "triton_version": "3.5.0", "max_warnings": 0,
             "feedback_text": "persistent programs that loop over the rows"}
    with live_server(kb) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}",
                                               timeout=60) as client:
        before = client.post("/retrieve", json=query).json()
        assert before["candidates"] == 20  # the matrix is loaded, the server is warm
        proc = subprocess.run([sys.executable, "-m", "kernelkb", "ingest", str(path)], cwd=REPO,
                              env=_env(data, store_backend), capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0 and "12 accepted" in proc.stdout, proc.stderr[-2000:]
        after = client.post("/retrieve", json=query).json()
    written = {parse_record(r).id for r in later}
    assert after["candidates"] == 32  # rows: the other process's records are candidates
    hits = {h["id"]: h for h in after["hits"]}
    assert written <= set(hits)  # closest to the query, so all twelve come first
    assert all(hits[i]["similarity"] is not None and hits[i]["similarity"] > 0.5
               for i in written)  # vectors: scored by the vectors the other process wrote
    kb.close()


_CLIENT = textwrap.dedent("""
    import json, sys
    from kernelkb.retrieval.remote import RemoteKnowledge

    records = [json.loads(line) for line in open(sys.argv[2])]
    service = RemoteKnowledge(sys.argv[1], timeout=300)
    accepted = duplicates = 0
    for start in range(0, len(records), 25):
        report = service.ingest(records[start : start + 25])
        assert report.ok, report.rejected
        accepted += len(report.accepted)
        duplicates += len(report.duplicates)
    print(json.dumps({"accepted": accepted, "duplicates": duplicates}))
""")


@pytest.mark.slow  # two client processes and 450 records embedded
def test_two_writer_processes_through_one_service_lose_and_duplicate_nothing(
        tmp_path: Path, knowledge: LocalKnowledge) -> None:
    """Two optimizer-like client processes post overlapping batches to one service at
    once (as two optimizer workers on two GPUs would): each record is stored once, and
    rows = vectors = records."""
    kb = knowledge  # on both backends (tests/kb/conftest.py)
    a, b = _records(0, 150, "worker edit"), _records(75, 225, "worker edit")
    files = []
    for name, records in (("a", a), ("b", b)):
        files.append(tmp_path / f"{name}.jsonl")
        files[-1].write_text("".join(json.dumps(r) + "\n" for r in records))
    ids = {parse_record(r).id for r in a + b}
    with live_server(kb) as port:
        procs = [subprocess.Popen([sys.executable, "-c", _CLIENT, f"http://127.0.0.1:{port}",
                                   str(f)], cwd=REPO, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for f in files]
        outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    reports = [json.loads(o[0]) for o in outs]
    assert sum(r["accepted"] for r in reports) == len(ids) == 225
    assert sum(r["duplicates"] for r in reports) == 300 - 225
    assert kb.index is not None
    assert sql_ids(kb.engine) == ids and kb.index.all_ids() == ids
    assert kb.list(limit=1).total == 225
    kb.close()


@pytest.mark.slow  # a CLI process loads the model
def test_running_server_survives_a_reindex_by_another_process(
        knowledge: LocalKnowledge, store_backend: dict[str, Any]) -> None:
    """Another process's `kernelkb reindex` swaps the collection under a running service:
    the service's handle to the old one is replaced, and it keeps reading and writing."""
    kb = knowledge  # on both backends (tests/kb/conftest.py)
    data = kb.settings.data_dir
    ids = set(kb.ingest(_records(0, 30, "tile the row in two passes")).accepted)
    query = {"op_type": "softmax", "gpu_name": "NVIDIA H200", "arch": "sm_90", "k": 5,
             "feedback_text": "two passes over the row"}
    with live_server(kb) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}",
                                               timeout=60) as client:
        assert client.get("/stats").json()["vectors"] == 30
        proc = subprocess.run([sys.executable, "-m", "kernelkb", "reindex"], cwd=REPO,
                              env=_env(data, store_backend), capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert client.get("/stats").json()["vectors"] == 30
        hits = client.post("/retrieve", json=query).json()["hits"]
        assert len(hits) == 5 and all(h["similarity"] is not None for h in hits)
        more = client.post("/experiences/batch", json=_records(30, 35, "tile again")).json()
        assert len(more["accepted"]) == 5
        ids |= set(more["accepted"])
    assert kb.index is not None and kb.index.all_ids() == ids == sql_ids(kb.engine)
    kb.close()
