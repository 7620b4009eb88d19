"""The agents propose only points that fit the GPU's shared memory per block."""

from __future__ import annotations

from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.resources import smem_limit
from kernelkb.optimizer.agents.offline import catalog
from kernelkb.optimizer.agents.tuner import TunerAgent

ATTENTION = get_task("attention")
H200 = smem_limit("sm_90")
# fused K/V write with the RoPE table on the 128x64 tile: 3 stages need 256 KiB at head_dim 128
HEAVY = {**ATTENTION.default_config, "BLOCK_M": 128, "BLOCK_N": 64, "NUM_WARPS": 8,
         "NUM_STAGES": 2, "FUSE_KV_WRITE": True, "ROPE_TABLE": True, "CAUSAL_SKIP": True}


def test_the_tuner_grid_skips_points_over_the_limit() -> None:
    tuner = TunerAgent()
    on_h200 = tuner.space(ATTENTION, HEAVY, H200)
    anywhere = tuner.space(ATTENTION, HEAVY)
    assert {**HEAVY, "NUM_STAGES": 3} in anywhere and {**HEAVY, "NUM_STAGES": 3} not in on_h200
    assert all(ATTENTION.infeasible(c, H200) is None for c in on_h200)


def test_the_offline_catalog_offers_no_infeasible_edit() -> None:
    edits = [c.config for c in catalog(ATTENTION, HEAVY, H200)]
    assert edits and all(ATTENTION.why_illegal(c, H200) is None for c in edits)
    assert {**HEAVY, "NUM_STAGES": 3} in [c.config for c in catalog(ATTENTION, HEAVY)]
