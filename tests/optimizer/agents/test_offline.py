"""The offline agent's catalog, evidence ordering, exploration and exhaustion."""

from __future__ import annotations

import pytest

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.config import header_constants
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.optimizer.agents.base import AgentContext, SearchExhausted
from kernelkb.optimizer.agents.offline import OfflineAgent, catalog
from kernelkb.optimizer.diffcheck import unified_diff

RMSNORM = get_task("rmsnorm")
SOFTMAX = get_task("softmax")


def experience(task_name: str, config: dict, verdict: str, arch: str = "sm_90",
               speedup: float | None = None) -> ExperienceRecord:
    task = get_task(task_name)
    parent, child = task.template, task.render(config)
    timed = speedup is not None
    return ExperienceRecord(
        run_id="earlier", iteration=1,
        task={"op_type": task.op_type, "task_id": task.name, "dtype": "float16"},
        env={"gpu_name": "H200", "arch": arch, "triton_version": "3.5", "torch_version": "2.9"},
        edit={"summary": f"set {config}", "categories": ["tiling"],
              "diff": unified_diff(parent, child), "child_hash": source_hash(child)},
        feedback={"stage": "performance" if timed else "correctness",
                  "timing_available": timed, "time_ms": 1.0 if timed else None,
                  "speedup_vs_parent": speedup},
        verdict=verdict, provenance={"agent": "offline"})


def context(task=RMSNORM, **kwargs) -> AgentContext:
    return AgentContext(task=task, dtype="float16", iteration=1, round_kind="exploit",
                        best_source=task.template, gpu_arch="sm_90", **kwargs)


def test_every_candidate_is_one_legal_change_of_the_current_config() -> None:
    current = SOFTMAX.default_config
    for cand in catalog(SOFTMAX, current):
        changed = {k for k, v in cand.config.items() if current[k] != v}
        assert changed == {cand.param, *cand.enabler}
        assert len(cand.enabler) <= 1
        assert SOFTMAX.constraint(cand.config) is None


def test_without_evidence_the_catalog_order_holds() -> None:
    proposal = OfflineAgent(epsilon=0.0).propose(context())
    assert proposal.summary.startswith("set PERSISTENT False -> True")
    assert "catalog order" in proposal.rationale
    assert not proposal.claimed_gain


def test_a_measured_win_on_the_same_op_and_gpu_goes_first_and_is_cited() -> None:
    win = experience("rmsnorm", {"NUM_WARPS": 8}, "improved", speedup=1.3)
    proposal = OfflineAgent(epsilon=0.0).propose(context(experiences=[win]))
    assert proposal.summary.startswith("set NUM_WARPS 4 -> 8")
    assert win.id[:10] in proposal.rationale
    assert "+NUM_WARPS = 8" in unified_diff(RMSNORM.template, proposal.source)


def test_failures_push_an_edit_down_and_related_ops_count_less() -> None:
    agent = OfflineAgent(epsilon=0.0)
    lost = experience("rmsnorm", {"PERSISTENT": True}, "failed")
    ranked = agent.rank(context(experiences=[lost]))
    assert ranked[0][0].param != "PERSISTENT"
    assert [c for c, _ in ranked if c.param == "PERSISTENT"][0] is ranked[-1][0]
    same_op = experience("rmsnorm", {"NUM_WARPS": 2}, "improved", speedup=1.2)
    related = experience("softmax", {"NUM_WARPS": 16}, "improved", speedup=1.2)
    order = [c.value for c, _ in agent.rank(context(experiences=[related, same_op]))
             if c.param == "NUM_WARPS"]
    assert order[:2] == [2, 16]


def test_exploration_round_picks_a_structural_change() -> None:
    win = experience("rmsnorm", {"NUM_WARPS": 8}, "improved", speedup=1.3)
    ctx = context(experiences=[win])
    ctx.round_kind = "explore"
    proposal = OfflineAgent(epsilon=0.0).propose(ctx)
    assert proposal.summary.startswith(("set PERSISTENT", "set NATIVE_WEIGHT_MUL"))
    assert "exploration round" in proposal.rationale


def test_tried_candidates_are_skipped_until_nothing_is_left() -> None:
    agent = OfflineAgent(epsilon=0.0)
    tried: set[str] = set()
    seen = set()
    while True:
        try:
            proposal = agent.propose(context(tried_hashes=set(tried)))
        except SearchExhausted:
            break
        assert proposal.summary not in seen
        seen.add(proposal.summary)
        tried.add(source_hash(proposal.source))
    assert len(seen) == len(list(catalog(RMSNORM, RMSNORM.default_config)))
    with pytest.raises(SearchExhausted):
        agent.propose(context(tried_hashes=tried))


def test_with_the_best_exhausted_it_walks_on_from_the_runner_up() -> None:
    from kernelkb.optimizer.agents.base import RoundNote

    agent = OfflineAgent(epsilon=0.0)
    best = RMSNORM.default_config
    tried = {source_hash(RMSNORM.render(c.config)) for c in catalog(RMSNORM, best)}
    runner_up = {**best, "NUM_WARPS": 8}
    header = {**header_constants(RMSNORM.render(runner_up)), "EPS_NOT_A_KNOB": 1e-6}
    note = RoundNote(1, "set NUM_WARPS 4 -> 8", ("warps_stages",), "regressed", header,
                     {"NUM_WARPS": 8}, time_ms=1.1)
    proposal = agent.propose(context(tried_hashes=set(tried), history=[note]))
    assert proposal.summary.startswith("from the runner-up at 1.1000 ms: set ")
    config = header_constants(proposal.source)
    assert config["NUM_WARPS"] == 8 and sum(config[k] != best[k] for k in best) == 2
    assert source_hash(proposal.source) not in tried


def test_evidence_measured_in_the_same_surroundings_counts_more() -> None:
    from kernelkb.optimizer.agents.evidence import CONTEXT_FLOOR, context_weight

    def with_config(config: dict) -> ExperienceRecord:
        record = experience("rmsnorm", config, "improved", speedup=1.2)
        return record.model_copy(update={"edit": record.edit.model_copy(
            update={"config": config})})

    here = {**RMSNORM.default_config, "NUM_WARPS": 8}
    alike = with_config(here)
    elsewhere = with_config({**here, "BLOCK_SIZE": 1024, "NATIVE_WEIGHT_MUL": True})
    assert context_weight(alike, here, "NUM_WARPS") == 1.0
    assert CONTEXT_FLOOR < context_weight(elsewhere, here, "NUM_WARPS") < 1.0


def known(config: dict, similarity: float = 1.0):
    from kernelkb.retrieval.schemas import PlanItem

    return PlanItem(kind="config", category="warps_stages", config=config,
                    from_hardware="NVIDIA H200|sm_90", evidence="best measured: 1.07x",
                    example_ids=["abc123def456"], score=1.07, task_id="softmax",
                    dtype="float16", similarity=similarity)


def test_an_exploit_round_adopts_a_known_best_configuration_whole() -> None:
    best = {**SOFTMAX.default_config, "NUM_WARPS": 8, "ROWS_PER_PROGRAM": 2}
    ctx = context(SOFTMAX, known_configs=[known(best)])
    proposal = OfflineAgent(epsilon=0.0).propose(ctx)
    assert header_constants(proposal.source)["NUM_WARPS"] == 8
    assert header_constants(proposal.source)["ROWS_PER_PROGRAM"] == 2
    assert proposal.summary.startswith("adopt a known best configuration")
    assert set(proposal.categories) == {"warps_stages", "launch_shape"}
    assert "abc123def4" in proposal.rationale


def test_a_known_configuration_is_skipped_when_tried_current_illegal_or_exploring() -> None:
    best = {**SOFTMAX.default_config, "NUM_WARPS": 8}
    illegal = {**SOFTMAX.default_config, "ONLINE": True}  # ONLINE needs BLOCK_SIZE > 0
    agent = OfflineAgent(epsilon=0.0)
    tried = context(SOFTMAX, known_configs=[known(best)],
                    tried_hashes={source_hash(SOFTMAX.render(best))})
    current = context(SOFTMAX, known_configs=[known(SOFTMAX.default_config)])
    bad = context(SOFTMAX, known_configs=[known(illegal)])
    for ctx in (tried, current, bad):
        assert not agent.propose(ctx).summary.startswith("adopt")
    exploring = context(SOFTMAX, known_configs=[known(best)])
    exploring.round_kind = "explore"
    assert not agent.propose(exploring).summary.startswith("adopt")
