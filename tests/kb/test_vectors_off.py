"""The store without vectors, as on a bare GPU host: SQL + ladder + evidence + BM25."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kernelkb.service as service
from kernelkb.kb.settings import Settings
from kernelkb.operations import open_for_runs as make_knowledge
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.service import LocalKnowledge

SEEDS = Path(__file__).resolve().parents[2] / "seeds"


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) on the SQLite file, without vectors, with the
    shipped seeds to load."""
    return {"vectors": False, "seeds_dir": SEEDS}


def test_seeds_load_and_retrieval_answers_without_embedding_or_chroma(
        knowledge: LocalKnowledge) -> None:
    kb = knowledge
    reports = kb.seed_if_empty()
    assert sum(len(r.accepted) for r in reports.values()) > 300
    assert not any(r.rejected for r in reports.values())
    assert kb.embedder is None and not kb.settings.chroma_folder.exists()
    result = kb.retrieve(RetrievalQuery(op_type="attention", gpu_name="NVIDIA H200",
                                        triton_version="3.6.0",
                                        kernel_source="ROPE_TABLE = False\nCAUSAL_SKIP = False"))
    assert result.hits and all(h.record.task.op_type == "attention" for h in result.hits)
    assert result.hits[0].record.verdict.value == "improved" and result.hits[0].similarity is None
    assert result.warnings and "ROPE_TABLE" in result.prompt_block + "".join(
        h.record.edit.diff for h in result.hits)
    assert kb.stats()["vectors"] == 0
    with pytest.raises(ValueError, match="vectors are off"):
        kb.reindex()
    kb.close()


def test_a_bare_gpu_host_reads_the_seeded_store_and_journals_its_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service, "vector_stack_available", lambda: False)
    knowledge, write_back = make_knowledge(
        Settings(data_dir=tmp_path, seeds_dir=SEEDS, service_url=None))
    assert knowledge.embedder is None and write_back is False
    assert knowledge.insights(op_type="softmax", gpu_name="NVIDIA H200").total > 0
    knowledge.close()


def test_a_bare_host_whose_store_fails_still_runs_on_the_journal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("no such module: fts5")

    monkeypatch.setattr(service, "vector_stack_available", lambda: False)
    monkeypatch.setattr(service, "LocalKnowledge", broken)
    assert make_knowledge(Settings(data_dir=tmp_path, seeds_dir=SEEDS)) == (None, False)
