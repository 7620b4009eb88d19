"""Item 5: another Triton version's experiences rank below the current version's, labelled,
in retrieval, the few-shot block, insights and the bootstrap plan. CUDA/HIP data
(triton_version "none") counts as another version."""

from __future__ import annotations

from kb_testdata import record_dict

from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.service import LocalKnowledge

NOW, OLD = "3.6.0", "3.5.0"


def _q(**kwargs) -> RetrievalQuery:
    return RetrievalQuery(**{"op_type": "softmax", "gpu_name": "NVIDIA H200", "arch": "sm_90",
                             "triton_version": NOW, **kwargs})


def test_same_version_first_and_others_labelled(knowledge: LocalKnowledge) -> None:
    knowledge.ingest([
        record_dict(triton=OLD, summary="old big win", speedup=2.5, config={"BLOCK_SIZE": 4096}),
        record_dict(triton=NOW, summary="new small win", speedup=1.1, config={"BLOCK_SIZE": 512}),
        record_dict(triton="none", summary="cuda tuning data", speedup=3.0,
                    config={"BLOCK_SIZE": 64}),
        record_dict(hw="A100", triton=NOW, summary="a100 now", speedup=1.2,
                    config={"BLOCK_SIZE": 2048}),
    ])
    result = knowledge.retrieve(_q(k=4))
    order = [h.record.edit.summary for h in result.hits]
    # the current version first (this GPU's, then another GPU's), older advice after
    assert order[:2] == ["new small win", "a100 now"]
    assert set(order[2:]) == {"old big win", "cuda tuning data"}
    notes = {h.record.edit.summary: h.version_note for h in result.hits}
    assert notes["new small win"] is None and notes["a100 now"] is None
    assert notes["old big win"] == f"measured on Triton {OLD}; current {NOW}"
    assert "without Triton" in notes["cuda tuning data"]
    assert f"measured on Triton {OLD}; current {NOW}" in result.prompt_block
    # without a current version nothing is "other": no labels, score order
    plain = knowledge.retrieve(_q(triton_version=None, k=4))
    assert all(h.version_note is None for h in plain.hits)


def test_warnings_prefer_the_current_version(knowledge: LocalKnowledge) -> None:
    knowledge.ingest([
        record_dict(triton=OLD, summary="old loss", verdict="regressed", speedup=0.5,
                    config={"NUM_WARPS": 1}),
        record_dict(triton=NOW, summary="new loss", verdict="regressed", speedup=0.9,
                    config={"NUM_WARPS": 2}),
    ])
    warnings = knowledge.retrieve(_q(max_warnings=2)).warnings
    assert [w.record.edit.summary for w in warnings] == ["new loss", "old loss"]
    assert warnings[1].version_note and warnings[0].version_note is None


def test_insights_rank_other_version_categories_lower(knowledge: LocalKnowledge) -> None:
    knowledge.ingest([
        *(record_dict(triton=OLD, summary=f"tile {i}", speedup=2.0, config={"BLOCK_SIZE": i},
                      run=f"r{i}") for i in range(3)),
        record_dict(triton=NOW, summary="warps", speedup=1.1, categories=("warps_stages",),
                    config={"NUM_WARPS": 8}),
        record_dict(triton=NOW, summary="tile now", speedup=1.05, verdict="neutral",
                    config={"BLOCK_SIZE": 99}),
    ])
    report = knowledge.insights(op_type="softmax", current_triton=NOW)
    cats = {c.category: c for c in report.categories}
    assert [c.category for c in report.categories] == ["warps_stages", "tiling"]
    assert cats["tiling"].other_version == 3 and cats["tiling"].other_version_wins == 3
    assert cats["tiling"].version_note == f"3 of 4 measured on Triton {OLD}; current {NOW}"
    assert cats["warps_stages"].version_note is None
    # the plain report (no current version) keeps its old order: most wins first
    assert knowledge.insights(op_type="softmax").categories[0].category == "tiling"


def test_bootstrap_prefers_and_labels_by_version(knowledge: LocalKnowledge) -> None:
    knowledge.ingest([
        record_dict(triton=OLD, summary="old best", speedup=2.0, config={"BLOCK_SIZE": 4096}),
        record_dict(triton=NOW, summary="new best", speedup=1.5, config={"BLOCK_SIZE": 1024}),
        record_dict(op="rmsnorm", triton=OLD, summary="rms old", speedup=3.0,
                    config={"BLOCK_SIZE": 256}),
    ])
    target = {"gpu_name": "NVIDIA GH200", "arch": "sm_90", "triton_version": NOW}
    configs = [i for i in knowledge.bootstrap(target).items if i.kind == "config"]
    by_task = {i.task_id: i for i in configs}
    # softmax: the current version's config stands although the old one measured faster
    assert by_task["softmax"].config == {"BLOCK_SIZE": 1024}
    assert by_task["softmax"].version_note is None
    # rmsnorm has only an old-version config: offered, labelled, after the current ones
    assert by_task["rmsnorm"].version_note == f"measured on Triton {OLD}; current {NOW}"
    assert by_task["rmsnorm"].triton_version == OLD
    items = knowledge.bootstrap(target).items
    flags = [i.version_note is not None for i in items]
    assert flags == sorted(flags)
