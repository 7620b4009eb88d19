"""Ingest: idempotence, field-level rejections, reindex, seeds, reads."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from kb_testdata import make_knowledge, record_dict

from kernelkb.kb.record import parse_record
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.service import LocalKnowledge


@pytest.fixture
def backend(store_backend: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) on both backends (tests/kb/conftest.py), its seeds
    folder tmp_path/seeds: absent, as the default one is, unless a test writes seeds there."""
    return {**store_backend, "seeds_dir": tmp_path / "seeds"}


def _batch() -> list[dict]:
    return [
        record_dict(),
        record_dict(hw="A100", summary="num_warps 8 hides latency", categories=("warps_stages",)),
        record_dict(op="rmsnorm", summary="fuse the weight multiply", categories=("fusion",)),
    ]


def test_reingest_is_idempotent(knowledge: LocalKnowledge) -> None:
    first = knowledge.ingest(_batch())
    assert len(first.accepted) == 3 and not first.duplicates and first.ok
    second = knowledge.ingest(_batch())
    assert second.accepted == [] and sorted(second.duplicates) == sorted(first.accepted)
    stats = knowledge.stats()
    assert stats["experiences"] == 3 and stats["vectors"] == 3
    # the same record twice inside one batch is stored once
    third = knowledge.ingest([record_dict(summary="new one")] * 2)
    assert len(third.accepted) == 1 and third.duplicates == third.accepted


def test_bad_records_are_rejected_by_field_and_the_rest_kept(knowledge: LocalKnowledge) -> None:
    missing_op = record_dict(summary="a")
    del missing_op["task"]["op_type"]
    negative = record_dict(summary="b", speedup=-1.0)
    typo = record_dict(summary="c", categories=("tilling",))
    items = [record_dict(summary="good 1"), missing_op, negative, typo, "not json {",
             [1, 2], record_dict(summary="good 2")]
    report = knowledge.ingest(items)
    assert len(report.accepted) == 2
    by_index = {r.index: r for r in report.rejected}
    assert by_index[1].field == "task.op_type" and "required" in by_index[1].reason.lower()
    assert by_index[2].field == "feedback.speedup_vs_parent" and "greater" in by_index[2].reason
    assert by_index[3].field == "edit.categories" and "tilling" in by_index[3].reason
    assert by_index[4].field == "<record>" and "invalid JSON" in by_index[4].reason
    assert by_index[5].field == "<record>" and "list" in by_index[5].reason
    assert knowledge.stats()["experiences"] == 2


def test_wrong_id_is_rejected(knowledge: LocalKnowledge) -> None:
    data = record_dict()
    data["id"] = "0" * 32
    report = knowledge.ingest([data])
    assert report.rejected and report.rejected[0].field == "<record>"
    assert "content hash" in report.rejected[0].reason


def test_vector_writes_of_two_stores_take_turns(tmp_path: Path,
                                                store_backend: dict[str, Any]) -> None:
    """While one store object holds the vector writer lock (a repair reading ids, a
    reindex), another one on the same data (another process, in effect: its own client,
    connection and lock handle) stores its rows but waits to write vectors. Without the
    turn, a repair took the other's fresh vectors for orphans and deleted them."""
    holder = make_knowledge(tmp_path, **store_backend)
    writer = make_knowledge(tmp_path, **store_backend)
    records = [record_dict(summary=f"turn {i}", config={"B": i}) for i in range(3)]
    done = threading.Event()
    thread = threading.Thread(target=lambda: (writer.ingest(records), done.set()))
    with holder.index.writing():
        thread.start()
        assert not done.wait(2.0), "the second store wrote vectors under the first's lock"
        assert holder.list(limit=10).total == 3  # its rows are committed meanwhile
        assert holder.index.count() == 0
    assert done.wait(120)
    thread.join()
    assert holder.index.count() == 3 and holder.sync_index() == (0, 0)
    holder.close()
    writer.close()


def test_reindex_after_deleting_chroma_gives_same_results(tmp_path: Path,
                                                         store_backend: dict[str, Any]) -> None:
    kb = make_knowledge(tmp_path, **store_backend)
    kb.ingest(_batch() + [record_dict(summary=f"variant {i}", config={"BLOCK_SIZE": 2 ** i})
                          for i in range(6, 11)])
    query = RetrievalQuery(op_type="softmax", gpu_name="NVIDIA H200", arch="sm_90",
                           triton_version="3.5.0", feedback_text="memory bound, wide rows", k=4)
    before = [(h.id, round(h.score, 5)) for h in kb.retrieve(query).hits]
    if kb.settings.chroma_host:  # a Chroma server: drop the collection
        kb.index.collection  # noqa: B018  (connects)
        kb.index._client.delete_collection(kb.settings.chroma_collection)
    kb.close()
    shutil.rmtree(tmp_path / "chroma", ignore_errors=True)
    rebuilt = make_knowledge(tmp_path, **store_backend)
    assert rebuilt.index.count() == 0
    assert rebuilt.reindex() == 8
    after = [(h.id, round(h.score, 5)) for h in rebuilt.retrieve(query).hits]
    assert after == before and len(before) == 4


def test_seeds_load_into_an_empty_store_only(knowledge: LocalKnowledge) -> None:
    kb = knowledge
    seeds = kb.settings.seeds_dir
    seeds.mkdir()
    (seeds / "a.jsonl").write_text("\n".join(json.dumps(r) for r in _batch()) + "\n\n")
    reports = kb.seed_if_empty()
    assert len(reports["a.jsonl"].accepted) == 3
    assert kb.seed_if_empty() == {}  # the seeds are there: nothing loaded
    assert kb.stats()["experiences"] == 3


def test_a_store_filled_by_an_import_first_still_gets_the_seeds(
        knowledge: LocalKnowledge) -> None:
    """`kernelkb import` before any other command left the shipped seeds out for good: the
    store was not empty, so nothing loaded them, and queries answered 'no experiences'."""
    kb = knowledge
    seeds = kb.settings.seeds_dir
    seeds.mkdir()
    batch = _batch()
    (seeds / "a.jsonl").write_text("\n".join(json.dumps(r) for r in batch[1:]) + "\n")
    assert kb.ingest(batch[:1]).accepted  # the user's own import, first
    reports = kb.seed_if_empty()
    assert len(reports["a.jsonl"].accepted) == 2
    assert kb.seed_if_empty() == {} and kb.stats()["experiences"] == 3


def test_get_list_and_filters(knowledge: LocalKnowledge) -> None:
    ids = knowledge.ingest(_batch()).accepted
    record = knowledge.get(ids[0])
    assert record is not None and record.id == ids[0]
    assert knowledge.get("nope") is None
    page = knowledge.list(op_type="softmax", limit=1)
    assert page.total == 2 and len(page.items) == 1
    assert knowledge.list(category="fusion").total == 1
    assert knowledge.list(gpu_name="NVIDIA A100-SXM4-80GB").items[0].env.arch == "sm_80"


def test_rationale_is_kept_but_not_embedded_and_old_ids_hold() -> None:
    """The agent's reasons (evidence, search state) stay with the record, out of the text
    the vector index compares; records without one keep the ids they had before the
    field existed (pinned: computed by the code of the commit before it)."""
    plain = parse_record(record_dict())
    assert plain.id == "5dde0e8ff61cc596444c12325e46b0ad"
    data = record_dict()
    data["edit"]["rationale"] = "catalog order (no evidence)"
    reasoned = parse_record(data)
    assert reasoned.edit.rationale == "catalog order (no evidence)"
    assert reasoned.id != plain.id
    assert reasoned.embedding_text() == plain.embedding_text()
    assert "catalog" not in reasoned.embedding_text()


def _segment_folders(chroma: Path) -> list[str]:
    import uuid

    found = []
    for child in chroma.iterdir():
        try:
            uuid.UUID(child.name)
        except ValueError:
            continue
        found.append(child.name)
    return found


def test_reindexes_leave_one_copy_of_the_vectors_on_disk(tmp_path: Path) -> None:
    """Chroma's folder client leaves a deleted collection's segment folder behind: each
    reindex added a copy (5 folders after 3 reindexes and 3 interrupted ones)."""
    kb = make_knowledge(tmp_path)  # the Chroma folder alone (``knowledge`` is also a server)
    kb.ingest(_batch())
    for _ in range(3):
        assert kb.reindex() == 3
    assert len(_segment_folders(tmp_path / "chroma")) == 1
    assert kb.index.count() == 3


def test_a_vector_folder_chroma_cannot_open_is_set_aside_and_rebuilt(
        tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    """A truncated chroma.sqlite3 failed every command, doctor and reindex included, with
    chromadb's traceback. Now commands say so in one line, doctor reports it, and doctor
    --repair (or reindex) moves the folder's files aside and rebuilds from SQL."""
    from kernelkb.cli.main import main

    kb = make_knowledge(tmp_path)  # the Chroma folder alone (``knowledge`` is also a server)
    kb.ingest(_batch())
    kb.close()
    with (tmp_path / "chroma" / "chroma.sqlite3").open("r+b") as handle:
        handle.truncate(10_000)
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path))
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KERNELKB_SEEDS_DIR", str(tmp_path / "no-seeds"))
    capsys.readouterr()
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "cannot be opened" in out and "rows_without_vector: 3" in out
    assert main(["doctor", "--repair"]) == 0
    out = capsys.readouterr().out
    assert "rebuilt: 3" in out and "rows_without_vector: 0" in out
    assert [p.name.startswith("unreadable-") for p in (tmp_path / "chroma").iterdir()
            if p.is_dir() and p.name not in _segment_folders(tmp_path / "chroma")] == [True]
    fresh = make_knowledge(tmp_path)
    assert fresh.index.count() == 3
    assert fresh.retrieve(RetrievalQuery(op_type="softmax", k=3)).hits
