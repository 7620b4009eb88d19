"""Tuner mode: structure fixed, grid or TPE-like search over the knobs."""

from __future__ import annotations

import pytest

from kernelkb.kernels.base import get_task
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
