"""The offline agent's launch-shape moves: on a model's decode shapes (small M) it jumps
to split-K with the one-launch reduction first; on large shapes it does not; after the
jumps lose twice it walks as before."""

from __future__ import annotations

from kernelkb.kernels.config import header_constants
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.model_config import read_model_config, shipped_configs
from kernelkb.kernels.model_shapes import model_shapes
from kernelkb.optimizer.agents import launch_shape
from kernelkb.optimizer.agents.base import AgentContext, RoundNote
from kernelkb.optimizer.agents.offline import OfflineAgent

MATMUL = get_task("matmul")
H200_SMS = 132
LLAMA = read_model_config(shipped_configs()["llama-3-8b"])
DECODE = [u.shape for u in model_shapes(MATMUL, LLAMA, [1, 8, 32], [512]).uses
          if u.phase == "decode"]


def context(shapes, sm_count=H200_SMS, **kwargs) -> AgentContext:
    return AgentContext(task=MATMUL, dtype="float16", iteration=1, round_kind="exploit",
                        best_source=MATMUL.template, gpu_arch="sm_90", shapes=list(shapes),
                        sm_count=sm_count, **kwargs)


def test_decode_shapes_get_one_launch_split_k_first() -> None:
    assert DECODE and all(m <= 32 for m, _n, _k in DECODE)
    proposal = OfflineAgent(epsilon=0.0).propose(context(DECODE))
    header = header_constants(proposal.source)
    assert header["SPLIT_K"] > 1 and header["SPLIT_REDUCE"] == "atomic"
    assert header["BLOCK_M"] == 16
    assert MATMUL.why_illegal(header) is None
    assert proposal.summary.startswith(launch_shape.TAG + "set SPLIT_K 1 -> ")
    assert "launch shape first" in proposal.rationale and "132 SMs" in proposal.rationale
    assert "algorithm" in proposal.categories


def test_every_fill_move_is_a_legal_point_that_fills_better() -> None:
    best = MATMUL.default_config
    moves = launch_shape.fill_moves(MATMUL, best, DECODE, "float16", H200_SMS)
    assert moves
    base = launch_shape.fill(MATMUL, best, DECODE, "float16", H200_SMS)
    for move in moves:
        assert MATMUL.why_illegal(move.config) is None
        assert move.fill - base >= launch_shape.MIN_GAIN
    # the summing kernel's second launch costs: the first atomic move outranks any
    # split-K point that sums in a second kernel
    first_kernel = next((i for i, m in enumerate(moves)
                         if m.config["SPLIT_REDUCE"] == "kernel" and m.config["SPLIT_K"] > 1),
                        len(moves))
    assert moves[0].config["SPLIT_REDUCE"] == "atomic" and first_kernel > 0


def test_large_shapes_and_unknown_gpus_keep_the_catalog_walk() -> None:
    agent = OfflineAgent(epsilon=0.0)
    for ctx in (context([(4096, 4096, 4096), (4096, 14336, 4096)]),
                context(DECODE, sm_count=None), context([])):
        proposal = agent.propose(ctx)
        assert launch_shape.TAG not in proposal.summary
        assert "catalog order" in proposal.rationale


def test_two_lost_jumps_end_the_preference() -> None:
    lost = [RoundNote(i, launch_shape.TAG + "set SPLIT_K 1 -> 4", ("algorithm",), "regressed",
                      {}) for i in (1, 2)]
    proposal = OfflineAgent(epsilon=0.0).propose(context(DECODE, history=lost))
    assert launch_shape.TAG not in proposal.summary
    one = OfflineAgent(epsilon=0.0).propose(context(DECODE, history=lost[:1]))
    assert one.summary.startswith(launch_shape.TAG)
