"""Tuner mode: structure fixed, grid or TPE-like search over the knobs."""

from __future__ import annotations

import pytest

from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.optimizer.agents.base import AgentContext, Proposal
from kernelkb.optimizer.agents.tuner import TunerAgent

TASK = get_task("softmax")


def context(best: dict | None = None, tried: set[str] | None = None) -> AgentContext:
    return AgentContext(task=TASK, dtype="float16", iteration=1, round_kind="exploit",
                        best_source=TASK.render(best or {}), tried_hashes=tried or set())


def test_structure_is_fixed_and_the_grid_goes_nearest_first() -> None:
    structure = {**TASK.default_config, "BLOCK_SIZE": 1024, "ONLINE": True}
    tuner = TunerAgent(search="grid")
    points = tuner.space(TASK, structure)
    assert all(p["ONLINE"] is True for p in points)
    assert points[0] == structure  # distance zero
    proposal = tuner.propose(context(structure, {source_hash(TASK.render(structure))}))
    assert proposal.summary.startswith("tune ") and proposal.summary.count("->") == 1
    assert "ONLINE" not in proposal.summary


def test_tpe_prefers_values_of_the_fastest_points() -> None:
    tuner = TunerAgent(search="tpe", startup=4)
    ctx = context({"BLOCK_SIZE": 1024})
    tried: set[str] = set()
    for warps in (1, 2, 4, 8, 16):  # synthetic times: 8 warps is clearly fastest
        for block in (1024, 4096):
            config = {**TASK.default_config, "BLOCK_SIZE": block, "NUM_WARPS": warps}
            source = TASK.render(config)
            tuner._pending[source_hash(source)] = config
            tuner.observe(Proposal(source=source, summary="synthetic"),
                          0.5 if warps == 8 else 2.0, "neutral")
            tried.add(source_hash(source))
    ctx.tried_hashes = tried
    proposal = tuner.propose(ctx)
    assert "tpe: l/g" in proposal.rationale
    assert "NUM_WARPS" not in proposal.summary or "-> 8" in proposal.summary
    assert "NUM_WARPS = 8" in proposal.source


def test_unknown_search_is_refused() -> None:
    with pytest.raises(ValueError, match="search must be"):
        TunerAgent(search="anneal")


# What optuna's TPESampler would not keep (optimizer/agents/tuner.py says why it is not
# used): the same picks for a seed, failed points as evidence, legal untried points only.

def _observe(tuner: TunerAgent, config: dict, score: float | None, verdict: str) -> str:
    source = TASK.render(config)
    tuner._pending[source_hash(source)] = config
    tuner.observe(Proposal(source=source, summary="synthetic"), score, verdict)
    return source_hash(source)


def test_tpe_picks_the_same_points_for_a_seed() -> None:
    def picks(seed: int) -> list[str]:
        tuner, tried, order = TunerAgent(search="tpe", seed=seed), set[str](), []
        for round_ in range(8):  # the random start (4 timed), then the densities
            proposal = tuner.propose(context(tried=tried))
            order.append(proposal.summary)
            tried.add(source_hash(proposal.source or ""))
            tuner.observe(proposal, 1.0 + round_ % 3, "neutral")
        return order
    assert picks(3) == picks(3)
    assert picks(3) != picks(4)


def test_tpe_counts_a_failed_configuration_as_bad() -> None:
    """8 warps timed fastest; five more 8-warp points failed: the next pick leaves 8."""
    def pick(failures: bool) -> str:
        tuner, tried = TunerAgent(search="tpe", startup=4), set[str]()
        for warps in (1, 2, 4, 8):
            tried.add(_observe(tuner, {**TASK.default_config, "BLOCK_SIZE": 1024,
                                       "NUM_WARPS": warps}, 0.5 if warps == 8 else 2.0,
                               "neutral"))
        for other in ({"ROWS_PER_PROGRAM": 2}, {"ROWS_PER_PROGRAM": 4},
                      {"BLOCK_SIZE": 4096}, {"BLOCK_SIZE": 4096, "NUM_STAGES": 2},
                      {"BLOCK_SIZE": 1024, "NUM_STAGES": 2}):
            if failures:
                tried.add(_observe(tuner, {**TASK.default_config, "NUM_WARPS": 8, **other},
                                   None, "failed"))
        return tuner.propose(context(tried=tried)).source or ""
    assert "NUM_WARPS = 8" in pick(failures=False)
    assert "NUM_WARPS = 8" not in pick(failures=True)


def test_tpe_proposes_legal_untried_points_only() -> None:
    """matmul: 49 of its 432 knob settings are legal under the default structure."""
    matmul = get_task("matmul")
    tuner, tried = TunerAgent(search="tpe", seed=1), set[str]()
    legal = [matmul.render(c) for c in tuner.space(matmul, matmul.default_config)]
    for round_ in range(12):
        proposal = tuner.propose(AgentContext(
            task=matmul, dtype="float16", iteration=round_ + 1, round_kind="tune",
            best_source=matmul.render(matmul.default_config), tried_hashes=tried))
        source = proposal.source or ""
        assert source in legal and source_hash(source) not in tried
        tried.add(source_hash(source))
        tuner.observe(proposal, 1.0 + round_ % 3, "neutral")
