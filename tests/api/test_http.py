"""The HTTP service on a real loopback port (uvicorn in a thread), and RemoteKnowledge."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from kb_testdata import record_dict
from live_server import TOKEN, free_port, live_server

from kernelkb.kb.embedder import Embedder
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.retrieval.remote import RemoteKnowledge, ServiceError, ServiceUnavailable
from kernelkb.service import LocalKnowledge


def test_token_is_enforced_on_mutations(url: str) -> None:
    body = record_dict(summary="token test")
    assert httpx.post(f"{url}/experiences", json=body).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert httpx.post(f"{url}/experiences", json=body, headers=wrong).status_code == 401
    ok = httpx.post(f"{url}/experiences", json=body,
                    headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 201 and len(ok.json()["accepted"]) == 1
    again = httpx.post(f"{url}/experiences", json=body,
                       headers={"Authorization": f"Bearer {TOKEN}"})
    assert again.status_code == 200 and again.json()["duplicates"] == ok.json()["accepted"]
    assert httpx.get(f"{url}/health").json()["status"] == "ok"  # reads stay open


def test_bootstrap_for_shapes_over_http(url: str) -> None:
    """``shapes`` travels through POST /bootstrap and the client: the fastest measured on
    them wins over the largest speedup (the rule: tests/retrieval/test_insights.py)."""
    short = "rows=128,cols=4096"
    records = []
    for config, speedup, ms in (({"B": 11}, 9.0, 0.010), ({"B": 12}, 1.1, 0.006)):
        record = record_dict(summary=f"timed {config}", speedup=speedup, config=config,
                             op="matmul", run=f"shapes-{config['B']}")
        record["feedback"]["timings"] = [{"shape": short, "median_ms": ms}]
        records.append(record)
    remote = RemoteKnowledge(url, token=TOKEN)
    assert len(remote.ingest(records).accepted) == 2
    target = {"gpu_name": "NVIDIA H200"}

    def first(**kwargs) -> dict:
        plan = remote.bootstrap(target, op_type="matmul", include_own=True, **kwargs)
        return next(i.config for i in plan.items if i.kind == "config")

    assert first() == {"B": 11} and first(shapes=[short]) == {"B": 12}
    bad = httpx.post(f"{url}/bootstrap", json={"env": target, "shapes": ["x" * 10_000]})
    assert bad.status_code == 422 and "shapes" in bad.text


def test_remote_client_round_trip(url: str) -> None:
    remote = RemoteKnowledge(url, token=TOKEN)
    bad = record_dict(summary="bad")
    bad["verdict"] = "great"
    report = remote.ingest([record_dict(summary="remote win", config={"B": 7}), bad])
    assert len(report.accepted) == 1
    assert report.rejected[0].index == 1 and report.rejected[0].field == "verdict"
    stored = remote.get(report.accepted[0])
    assert stored is not None and stored.edit.summary == "remote win"
    assert remote.get("missing") is None
    result = remote.retrieve(RetrievalQuery(op_type="softmax", gpu_name="NVIDIA H200",
                                            arch="sm_90", triton_version="3.5.0"))
    assert result.hits and "Past experiences" in result.prompt_block
    # no related_ops on the wire: the service fills them from the kernels registry, and
    # rmsnorm's Task declares softmax related
    rmsnorm = remote.retrieve(RetrievalQuery(op_type="rmsnorm", gpu_name="NVIDIA H200"))
    assert rmsnorm.hits and all(h.related and h.record.task.op_type == "softmax"
                                for h in rmsnorm.hits)
    assert "(related op softmax" in rmsnorm.prompt_block
    assert remote.insights(op_type="softmax").categories[0].category == "tiling"
    assert remote.stats()["experiences"] >= 1
    plan = remote.bootstrap({"gpu_name": "NVIDIA GH200", "arch": "sm_90"})
    assert plan.similar_hardware[0].gpu_name == "NVIDIA H200"
    # a GPU by name alone: facts from kernels.shared.gpus; an unknown name is a 422 that lists
    # the known parts
    named = remote.bootstrap({"gpu_name": "NVIDIA A100"}, op_type="softmax")
    assert named.target["arch"] == "sm_80"
    assert named.prediction is not None or named.prediction_note
    unknown = httpx.post(f"{url}/bootstrap", json={"env": {"gpu_name": "Voodoo 5"}})
    assert unknown.status_code == 422 and "NVIDIA H200" in unknown.json()["detail"]
    page = httpx.get(f"{url}/experiences", params={"op_type": "softmax", "limit": 1}).json()
    assert page["total"] >= 1 and len(page["items"]) == 1
    assert httpx.get(f"{url}/docs").status_code == 200
    with pytest.raises(ServiceError, match="401"):
        RemoteKnowledge(url).ingest([record_dict(summary="no token")])


def test_remote_list_pages_like_the_local_one(api_store: tuple[LocalKnowledge, str]) -> None:
    """``Knowledge.list`` over HTTP: the same page the store gives, names in the door's
    spelling on the wire."""
    kb, url = api_store
    kb.ingest([record_dict(summary=f"listed {n}", run="remote-list", config={"B": n})
               for n in range(3)])
    remote = RemoteKnowledge(url)
    page = remote.list(run_id="remote-list", op_type="softmax", limit=2)
    local = kb.list(run_id="remote-list", op_type="softmax", limit=2)
    assert page.total == local.total == 3
    assert [r.id for r in page.items] == [r.id for r in local.items]
    assert remote.list(run_id="remote-list", offset=2).items[0].id == \
        kb.list(run_id="remote-list", offset=2).items[0].id


def test_service_down_raises_service_unavailable() -> None:
    remote = RemoteKnowledge(f"http://127.0.0.1:{free_port()}", timeout=2)
    with pytest.raises(ServiceUnavailable):
        remote.stats()


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) served by two worker threads."""
    return {"serve_threads": 2}


def test_requests_waiting_for_the_query_model_hold_no_worker_thread(
        knowledge: LocalKnowledge, embedder: Embedder) -> None:
    """Query texts the server has not embedded wait for the embedding batcher outside the
    worker threads (``serve_threads``), so more requests than workers join one model run.
    The first run is held until the other requests are queued behind it; with the waiting
    done on the workers, no more than ``serve_threads - 1`` could ever be queued."""
    own = Embedder()  # its own batcher, to be held; the session's loaded runner, no reload
    own._query_model = embedder.query_model
    kb = knowledge
    kb.embedder = own
    kb.ingest([record_dict(summary=f"tile {n}", run=f"wait-{n}") for n in range(3)])
    batcher = own._queries
    encode, sizes, crowd = batcher._encode, [], 8
    batcher.parallel = 1  # one model run at a time: the rest must queue
    batcher.max_batch = crowd  # and all of them may join the next run

    def held(texts: list[str]) -> np.ndarray:
        deadline = time.monotonic() + 20
        while not sizes and len(batcher._pending) < crowd - 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        sizes.append(len(texts))
        return encode(texts)

    with live_server(kb) as port:
        url = f"http://127.0.0.1:{port}"
        before = httpx.get(f"{url}/stats").json()["query_embedding"]  # start-up's warm-up
        batcher._encode = held
        bodies = [{"op_type": "softmax", "feedback_text": f"new text {n}", "k": 2}
                  for n in range(crowd)]
        with ThreadPoolExecutor(crowd) as pool:
            answers = list(pool.map(lambda b: httpx.post(f"{url}/retrieve", json=b,
                                                         timeout=60), bodies))
        after = httpx.get(f"{url}/stats").json()["query_embedding"]
    counts = {key: after[key] - before[key] for key in after}
    assert [a.status_code for a in answers] == [200] * crowd
    assert all(a.json()["hits"] for a in answers)
    assert sizes == [1, crowd - 1]
    assert counts == {"asked": crowd, "cached": 0, "embedded": crowd, "batches": 2}


@contextmanager
def _answering(content_type: str, body: bytes) -> Iterator[str]:
    """A real HTTP server on loopback that answers every POST with ``body``."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Fixed(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server hook
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Fixed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


@pytest.mark.parametrize(("content_type", "body"), [
    ("text/html", b"<html><body>proxy error</body></html>"),
    ("application/json", b'{"unexpected": [1, 2, 3]}'),
    ("application/json", b'{"accepted": ["someone-else"], "duplicates": [], "rejected": []}'),
])
def test_an_answer_of_another_shape_is_an_outage_and_nothing_is_lost(
        tmp_path: Path, content_type: str, body: bytes) -> None:
    """Another server on the port (a proxy's page, some other JSON API) answered 200 to an
    ingest: the optimizer once counted its records as stored (all lost) or died on the
    HTML. An answer that does not account for the records sent is an outage: the run's
    records go to its journal."""
    from kernelkb.kb.record import parse_record
    from kernelkb.optimizer.writeback import Journal, Writeback

    record = parse_record(record_dict(summary="sent to a stranger"))
    with _answering(content_type, body) as url:
        remote = RemoteKnowledge(url, timeout=10)
        with pytest.raises(ServiceUnavailable):
            remote.ingest([record])
        journal = Journal(tmp_path / "journal.jsonl")
        assert Writeback(remote, journal).write(record) == "journaled"
        assert [r.id for r in journal.read()] == [record.id]


def test_a_record_the_service_rejects_is_journaled(tmp_path: Path) -> None:
    """A rejection is not a store: the record stays in the run's journal."""
    from kernelkb.kb.record import parse_record
    from kernelkb.optimizer.writeback import Journal, Writeback

    record = parse_record(record_dict(summary="rejected by the service"))
    answer = b'{"accepted": [], "duplicates": [], "rejected": [{"index": 0, "field": ' \
             b'"edit.summary", "reason": "no room"}]}'
    with _answering("application/json", answer) as url:
        journal = Journal(tmp_path / "journal.jsonl")
        writeback = Writeback(RemoteKnowledge(url, timeout=10), journal)
        assert writeback.write(record) == "journaled" and writeback.stored == 0
        assert [r.id for r in journal.read()] == [record.id]
