"""Retrieval: the fallback ladder, evidence-aware ranking, warnings, diversity, budget."""

from __future__ import annotations

from kb_testdata import record_dict

from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.service import LocalKnowledge

H200 = dict(gpu_name="NVIDIA H200", arch="sm_90", triton_version="3.5.0")


def _q(**kwargs) -> RetrievalQuery:
    return RetrievalQuery(**{"op_type": "softmax", **H200, **kwargs})


def test_ladder_prefers_same_gpu_then_arch_then_any(knowledge: LocalKnowledge) -> None:
    knowledge.ingest([
        record_dict(hw="H200", summary="h200 tile"),
        record_dict(hw="H100", summary="h100 tile", config={"BLOCK_SIZE": 2048}),
        record_dict(hw="A100", summary="a100 tile", config={"BLOCK_SIZE": 512}),
    ])
    exact = knowledge.retrieve(_q(k=1))
    assert exact.hits[0].rung == "same_gpu_triton" and "h200" in exact.hits[0].record.edit.summary
    # an unseen sm_90 card falls back to the same architecture first
    new_card = knowledge.retrieve(_q(gpu_name="NVIDIA GH200", k=3))
    assert [h.rung for h in new_card.hits][0] == "same_arch"
    assert new_card.hits[0].record.env.arch == "sm_90"
    # an unseen architecture falls back to any hardware
    other = knowledge.retrieve(_q(gpu_name="AMD MI300X", arch="gfx942", k=3))
    assert {h.rung for h in other.hits} == {"any_hardware"} and len(other.hits) == 3


def test_related_ops_rung_and_held_out_tasks(knowledge: LocalKnowledge) -> None:
    knowledge.ingest([
        record_dict(op="softmax", summary="one pass over the row"),
        record_dict(op="matmul", summary="grouped tile order", categories=("launch_shape",)),
    ])
    rmsnorm = _q(op_type="rmsnorm", related_ops=["softmax", "attention"])  # as its Task says
    result = knowledge.retrieve(rmsnorm)
    assert [h.record.task.op_type for h in result.hits] == ["softmax"]  # matmul is not related
    assert result.hits[0].rung == "related_same_gpu_triton" and result.hits[0].related
    assert knowledge.retrieve(rmsnorm.model_copy(update={"include_related": False})).hits == []
    assert knowledge.retrieve(_q(op_type="rmsnorm")).hits == []  # no relatives declared
    assert knowledge.retrieve(_q(exclude_tasks=["softmax"], include_related=False)).hits == []


def test_measured_win_outranks_a_closer_unmeasured_claim(knowledge: LocalKnowledge) -> None:
    feedback = "rows are long, the kernel is memory bound, reduce passes over global memory"
    knowledge.ingest([
        record_dict(summary=feedback, evidence="claimed", speedup=2.0,
                    config={"BLOCK_SIZE": 4096}),
        record_dict(summary="switch to online softmax", categories=("algorithm",),
                    evidence="measured", speedup=1.3, config={"ONLINE": True}),
    ])
    hits = knowledge.retrieve(_q(feedback_text=feedback)).hits
    assert [h.evidence for h in hits] == ["measured", "claimed"]
    assert hits[0].similarity < hits[1].similarity  # it won on evidence, not on text


def test_failures_come_back_as_warnings(knowledge: LocalKnowledge) -> None:
    knowledge.ingest([
        record_dict(summary="BLOCK_SIZE 1024", config={"BLOCK_SIZE": 1024}),
        record_dict(summary="BLOCK_SIZE 65536 in one tile", verdict="failed", speedup=None,
                    evidence="claimed", error_kind="compile_error", config={"BLOCK_SIZE": 65536}),
        record_dict(summary="num_stages 4", verdict="regressed", speedup=0.8,
                    categories=("warps_stages",), config={"num_stages": 4}),
        record_dict(hw="A100", summary="a100 loss", verdict="regressed", speedup=0.7,
                    config={"BLOCK_SIZE": 8}),
    ])
    result = knowledge.retrieve(_q())
    assert [h.record.verdict.value for h in result.hits] == ["improved"]
    lost = {h.record.edit.summary for h in result.warnings}
    assert lost == {"BLOCK_SIZE 65536 in one tile", "num_stages 4"}  # A100's loss is not "here"
    assert "Tried here and lost" in result.prompt_block and "compile_error" in result.prompt_block


def test_near_identical_hits_are_collapsed(knowledge: LocalKnowledge) -> None:
    same = [record_dict(summary="raise BLOCK_SIZE", run=f"run-{i}") for i in range(5)]
    other = [
        record_dict(summary="num_warps 8", categories=("warps_stages",), config={"W": 8}),
        record_dict(summary="mask only the tail", categories=("masking",), config={"EVEN": True}),
    ]
    knowledge.ingest(same + other)
    hits = knowledge.retrieve(_q(k=5)).hits
    assert len(hits) == 3
    assert sum(h.record.edit.summary == "raise BLOCK_SIZE" for h in hits) == 1
    assert hits[0].support == 5  # five runs agree: a repeated win ranks first


def test_prompt_block_respects_the_budget(knowledge: LocalKnowledge) -> None:
    long_diff = "\n".join(f"+    line {i} of a long diff" for i in range(200))
    knowledge.ingest([record_dict(summary=f"edit {i}", diff=long_diff, config={"B": i})
                      for i in range(8)])
    for budget in (300, 1200, 5000):
        block = knowledge.retrieve(_q(k=8, max_chars=budget)).prompt_block
        assert 0 < len(block) <= budget and "[1]" in block


def test_new_experiences_reach_the_next_query(knowledge: LocalKnowledge) -> None:
    """The ladder's in-memory columns follow the SQL store between queries."""
    knowledge.ingest([record_dict(summary="first tile", config={"BLOCK_SIZE": 1})])
    assert len(knowledge.retrieve(_q()).hits) == 1
    knowledge.ingest([record_dict(summary="second tile", config={"BLOCK_SIZE": 2}),
                      record_dict(hw="A100", summary="a100 tile", config={"BLOCK_SIZE": 3})])
    result = knowledge.retrieve(_q(k=5))
    assert {h.record.edit.summary for h in result.hits} == {"first tile", "second tile",
                                                            "a100 tile"}
    assert result.rungs_used == ["same_gpu_triton", "any_hardware"]
