"""The lexical side: when BM25 runs, and that cached term counts never hide a new term;
on both backends (SQLite FTS5, PostgreSQL full-text search) through the real store."""

from __future__ import annotations

from typing import Any

import pytest
from kb_testdata import record_dict
from sqlalchemy import text
from sqlmodel import Session

from kernelkb.kb.db import FTS_TABLE, make_engine
from kernelkb.retrieval.lexical import distinctive, has_code
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.service import LocalKnowledge

H200 = dict(op_type="softmax", gpu_name="NVIDIA H200", arch="sm_90", triton_version="3.5.0")
TEAM = pytest.param("team", marks=pytest.mark.postgres)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) on the SQLite file + Chroma folder; a test that
    parametrizes ``backend`` (indirect) with "team" gets PostgreSQL + a Chroma server."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return {}
    return request.getfixturevalue("team_backend")


def test_has_code_tells_identifiers_from_prose() -> None:
    assert has_code("BLOCK_SIZE = 1024") and has_code(None, "m = tl.max(x, axis=0)")
    assert has_code("switch to fp32 accumulation")
    assert not has_code("rows are long, the kernel is memory bound", None)
    assert not has_code(None, None)


def test_bm25_runs_for_source_queries_and_is_skipped_for_prose(
    knowledge: LocalKnowledge,
) -> None:
    knowledge.ingest([
        record_dict(summary="even tiles skip the mask", diff="+EVEN_K_TILE: tl.constexpr",
                    categories=("masking",), config={"EVEN_K_TILE": True}),
        record_dict(summary="wider tile", config={"BLOCK_SIZE": 2048}),
    ])
    code = knowledge.retrieve(RetrievalQuery(**H200, kernel_source="if EVEN_K_TILE:\n  pass"))
    ranked = {h.record.edit.summary: h.lexical_rank for h in code.hits}
    assert ranked["even tiles skip the mask"] == 0 and ranked["wider tile"] is None
    assert code.timings_ms["lexical"] > 0
    prose = knowledge.retrieve(RetrievalQuery(**H200, feedback_text="the mask costs time"))
    assert len(prose.hits) == 2 and all(h.lexical_rank is None for h in prose.hits)


def test_a_new_identifier_is_searchable_at_once(knowledge: LocalKnowledge) -> None:
    knowledge.ingest([record_dict(summary="first")])
    with Session(knowledge.engine) as session:
        assert distinctive(session, ["grid_swizzle_m"]) == []  # unseen: zero documents
    knowledge.ingest([record_dict(summary="swizzle", diff="+GRID_SWIZZLE_M = 8",
                                  config={"GRID_SWIZZLE_M": 8})])
    with Session(knowledge.engine) as session:
        assert distinctive(session, ["grid_swizzle_m"]) == ["grid_swizzle_m"]


def test_no_warnings_when_none_are_asked_for(knowledge: LocalKnowledge) -> None:
    knowledge.ingest([
        record_dict(summary="win"),
        record_dict(summary="loss", verdict="regressed", speedup=0.8, config={"B": 1}),
    ])
    assert knowledge.retrieve(RetrievalQuery(**H200, max_warnings=0)).warnings == []
    assert len(knowledge.retrieve(RetrievalQuery(**H200, max_warnings=1)).warnings) == 1


# close in meaning to the first two records, but none of its words is in any record
FEEDBACK = "hold the rowwise max in regs between blocks rather than redoing it"


def _fill(knowledge: LocalKnowledge) -> None:
    """Prose records close to FEEDBACK, and one whose diff alone holds an identifier."""
    knowledge.ingest([
        record_dict(summary="keep the row maximum in registers across tiles instead of "
                    "recomputing it for every tile", config={"BLOCK_SIZE": 512}),
        record_dict(summary="recompute the row maximum once per tile", config={"BLOCK_SIZE": 256}),
        record_dict(summary="unroll the inner loop", categories=("algorithm",),
                    diff="-acc = 0\n+SPLIT_REDUCE_STRIDE: tl.constexpr = 4\n+acc = tl.zeros",
                    config={"SPLIT_REDUCE_STRIDE": 4}),
    ])


@pytest.mark.parametrize("backend", ["sqlite", TEAM], indirect=True)
def test_the_lexical_path_finds_an_identifier_on_both_backends(
        knowledge: LocalKnowledge) -> None:
    """The query's words are only in one record's diff: vectors rank a prose record first,
    the lexical side (FTS5 on SQLite, tsvector + ts_rank on PostgreSQL) ranks it first."""
    _fill(knowledge)
    try:
        result = knowledge.retrieve(RetrievalQuery(
            **H200, feedback_text=FEEDBACK,
            kernel_source="for k in range(0, n, SPLIT_REDUCE_STRIDE):\n  pass"))
        by_summary = {h.record.edit.summary: h for h in result.hits}
        target = by_summary["unroll the inner loop"]
        assert target.lexical_rank == 0
        assert [h.lexical_rank for h in result.hits if h is not target] == [None, None]
        closest = max(result.hits, key=lambda h: h.similarity or -1.0)
        assert closest is not target  # not the vectors' first: the lexical path found it
        assert result.hits[0] is target  # and fused, it ranks first
        assert "lexical" in result.timings_ms
    finally:
        knowledge.close()


@pytest.mark.parametrize("backend", [TEAM], indirect=True)
def test_a_postgres_store_made_before_full_text_search_is_indexed_on_open(
        knowledge: LocalKnowledge, backend: dict[str, Any]) -> None:
    _fill(knowledge)
    with knowledge.engine.begin() as conn:  # as a store of an earlier version: no table
        conn.execute(text(f"DROP TABLE {FTS_TABLE}"))
    knowledge.close()
    engine = make_engine(backend["db_url"])
    try:
        with Session(engine) as session:
            assert session.connection().execute(
                text(f"SELECT count(*) FROM {FTS_TABLE}")).scalar() == 3
            assert distinctive(session, ["split_reduce_stride", "never_seen_here"]) == [
                "split_reduce_stride"]
    finally:
        engine.dispose()
