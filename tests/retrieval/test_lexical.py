"""The lexical side: when BM25 runs, and that cached term counts never hide a new term."""

from __future__ import annotations

from kb_testdata import record_dict
from sqlmodel import Session

from retrieval.lexical import distinctive, has_code
from retrieval.query import RetrievalQuery
from retrieval.service import LocalKnowledge

H200 = dict(op_type="softmax", gpu_name="NVIDIA H200", arch="sm_90", triton_version="3.5.0")


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
