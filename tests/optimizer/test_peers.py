"""Peers: checked against the reference before they are timed, wrong ones dropped with the
reason, impossible figures listed as failures, the best possible peer per shape."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.peers import Peer, peers_for, rope_hf, rotate_half
from kernelkb.optimizer.peers import PeerTimes, best_peer, check_peer, time_peers, trustworthy
from kernelkb.optimizer.report import peer_lines

SOFTMAX = get_task("softmax")
ROPE = get_task("rope")
SHAPE = (4096, 32768)
LABEL = SOFTMAX.shape_label(SHAPE)
PEAKS = {"mem_bandwidth_gbps": 4000.0, "peak_tflops": 600.0}
ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"


def test_a_peer_faster_than_the_roofline_is_not_the_best_peer() -> None:
    floor = SOFTMAX.bytes_moved(SHAPE, torch.float16) / 4000e9 * 1e3  # ms at peak bandwidth
    times = {"eager": 3 * floor, "compiled": 1.5 * floor, "liger": 0.5 * floor, "x": None}
    assert set(trustworthy(times, floor)) == {"eager", "compiled"}
    assert best_peer(SOFTMAX, "float16", SHAPE, times, PEAKS) == ("compiled", 1.5 * floor)


# -- the check, with torch-only peers on any device -----------------------------------------
def test_a_correct_peer_passes_the_check() -> None:
    assert check_peer(SOFTMAX, Peer("eager", lambda x: torch.softmax(x, -1), ""), "float16",
                      (64, 1000), device=DEVICE) is None


def test_a_wrong_peer_is_named_with_what_is_wrong() -> None:
    wrong_axis = Peer("bad", lambda x: torch.softmax(x, 0), "softmax over the wrong axis")
    reason = check_peer(SOFTMAX, wrong_axis, "float16", (64, 1000), device=DEVICE)
    assert reason and reason.startswith("wrong output") and "over tolerance" in reason


def test_a_small_systematic_bias_is_caught() -> None:
    biased = Peer("bad", lambda x: torch.softmax(x.float(), -1).mul(1.004).half(), "")
    reason = check_peer(SOFTMAX, biased, "float16", (64, 1000), device=DEVICE)
    assert reason and "bias" in reason


def test_a_peer_that_cannot_run_the_shape_says_so() -> None:
    def refuses(x):
        raise RuntimeError("too many columns for one block")
    reason = check_peer(SOFTMAX, Peer("bad", refuses, ""), "float16", (2, 8), device=DEVICE)
    assert reason == "cannot run: RuntimeError: too many columns for one block"


def test_a_peer_that_writes_its_input_is_dropped_unless_in_place_is_its_contract() -> None:
    def softmax_into_input(x):
        return x.copy_(torch.softmax(x.float(), -1).half())
    reason = check_peer(SOFTMAX, Peer("bad", softmax_into_input, ""), "float16", (4, 64),
                        device=DEVICE)
    assert reason == "writes into input(s) [0], which the op only reads"
    declared = Peer("ok", softmax_into_input, "writes in place", in_place=True)
    assert check_peer(SOFTMAX, declared, "float16", (4, 64), device=DEVICE) is None


def test_rope_at_the_wrong_positions_is_caught() -> None:
    """The old Liger call: cos / sin at arange(seq), ignoring each sequence's offset."""
    def from_zero(q, k, positions):
        start = torch.arange(q.shape[1], device=q.device)[None].expand_as(positions)
        return rope_hf()(q, k, start.to(positions.dtype))
    reason = check_peer(ROPE, Peer("bad", from_zero, ""), "float32", (2, 8, 4, 2, 64),
                        device=DEVICE)
    assert reason and reason.startswith("wrong output")


def test_the_hf_formulation_is_rope_in_the_input_dtype() -> None:
    """HF's rotate-half in fp32 passes the task's fp32 check; in fp16 it is RoPE to within
    the fp16 rounding of cos, sin and each product (about one ulp of |q| <= 4)."""
    shape = (2, 8, 4, 2, 64)
    assert check_peer(ROPE, Peer("eager", rope_hf(), ""), "float32", shape, device=DEVICE) \
        is None
    q, k, positions = ROPE.make_inputs(shape, torch.float16, 3, DEVICE)
    q_out, k_out = rope_hf()(q, k, positions)
    q_ref, k_ref = ROPE.reference(q, k, positions)
    assert q_out.dtype == torch.float16 and q_out.shape == q.shape
    assert (q_out.double() - q_ref.double()).abs().max() < 4e-3
    assert (k_out.double() - k_ref.double()).abs().max() < 4e-3


def test_rotate_half_is_the_hf_one() -> None:
    x = torch.arange(4.0)
    assert rotate_half(x).tolist() == [-2.0, -3.0, 0.0, 1.0]


def test_the_unfused_attention_must_write_the_cache_too() -> None:
    """The op writes the KV cache: a peer with the right output but no cache write fails."""
    from kernelkb.kernels.peers import attention_unfused

    attention, shape = get_task("attention"), (1, 2, 9, 13, 32)
    assert check_peer(attention, Peer("eager", attention_unfused, ""), "float16", shape,
                      device=DEVICE) is None

    def no_cache_write(q, k, v, k_cache, v_cache, cache_len):
        return attention_unfused(q, k, v, k_cache.clone(), v_cache.clone(), cache_len)
    reason = check_peer(attention, Peer("bad", no_cache_write, ""), "float16", shape,
                        device=DEVICE)
    assert reason == "wrong input(s) [3, 4] written by the op: not what the reference wrote"


def test_our_triton_kernel_passes_the_same_check() -> None:
    """The check is the candidates' rule: the naive Triton RoPE (interpreted on a CPU) and
    softmax pass it in fp16."""
    from kernelkb.kernels.candidate_loading import load_candidate

    for task, shape in ((ROPE, ROPE.cpu_shapes[0]), (SOFTMAX, (3, 100))):
        kernel = load_candidate(task.template, f"naive_{task.name}")
        assert check_peer(task, kernel.run, "float16", shape, device=DEVICE) is None


def test_wrong_peers_are_dropped_before_any_timing() -> None:
    """Only wrong peers: nothing is timed (no GPU needed), every one has its reason."""
    bad = {"axis0": Peer("axis0", lambda x: torch.softmax(x, 0), "wrong axis"),
           "zeros": Peer("zeros", lambda x: torch.zeros_like(x), "zeros")}
    shapes = [(4, 64), (16, 128)]
    times = time_peers(SOFTMAX, "float16", shapes, peers=bad, device=DEVICE)
    for shape in shapes:
        label = SOFTMAX.shape_label(shape)
        assert times.eager[label] == {}
        assert set(times.dropped[label]) == {"axis0", "zeros"}
    assert times.how == {"axis0": "wrong axis", "zeros": "zeros"}


# -- the report's table ---------------------------------------------------------------------
def _result(peer_times: PeerTimes, ours_ms: float, ours_graph: float | None = None):
    best = SimpleNamespace(timing_available=True, timings={LABEL: (ours_ms, 0.001)},
                           graph_timings={LABEL: ours_graph} if ours_graph else {})
    return SimpleNamespace(task=SOFTMAX, dtype="float16", best_sweep=best,
                           env=SimpleNamespace(**PEAKS), peer_timings=peer_times)


def test_the_report_lists_every_peer_with_call_and_gpu_time() -> None:
    times = PeerTimes(eager={LABEL: {"eager": 0.5, "compiled": 0.3}},
                      graph={LABEL: {"eager": 0.45, "compiled": None}}, dropped={LABEL: {}},
                      how={"eager": "torch.softmax", "compiled": "torch.compile"})
    text = "\n".join(peer_lines(_result(times, 0.2, 0.18)))
    assert "| eager | compiled |" in text  # every peer has a column
    assert "| 0.2000 / 0.1800 |" in text  # ours: call / graph
    assert "0.5000 / 0.4500 (2.50x)" in text and "0.3000 / - (1.50x)" in text
    assert "1.50x (compiled)" in text and "**eager**: torch.softmax" in text


def test_a_dropped_peer_shows_its_reason_in_the_report() -> None:
    times = PeerTimes(eager={LABEL: {"eager": 0.5}}, graph={LABEL: {"eager": 0.4}},
                      dropped={LABEL: {"liger": "wrong output (x): 3 of 9 elements"}},
                      how={"eager": "e", "liger": "l"})
    text = "\n".join(peer_lines(_result(times, 0.2)))
    assert "dropped [1]" in text and "1. liger on " in text and "3 of 9 elements" in text


def test_a_figure_under_the_roofline_is_a_failure_not_the_best_peer() -> None:
    floor = SOFTMAX.bytes_moved(SHAPE, torch.float16) / 4000e9 * 1e3
    times = PeerTimes(eager={LABEL: {"liger": 0.5 * floor, "eager": 3 * floor}},
                      graph={LABEL: {}}, dropped={LABEL: {}}, how={})
    text = "\n".join(peer_lines(_result(times, 2 * floor)))
    assert "BELOW FLOOR" in text and "**Failures to explain**" in text
    assert "liger on " in text.split("**Failures to explain**")[1]
    assert f"{3 / 2:.2f}x (eager)" in text  # the best peer is the possible one


# -- on a GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
def test_peers_are_checked_then_timed_on_the_gpu() -> None:
    """Every peer of every task ends up timed (call and graph) or dropped with a reason on
    its smallest sweep shape: none silently missing."""
    from kernelkb.kernels.discovery import all_tasks

    for task in all_tasks().values():
        shape = min(task.sweep_shapes, key=lambda s: task.bytes_moved(s, torch.float16))
        label = task.shape_label(shape)
        peers = peers_for(task)
        times = time_peers(task, "float16", [shape], peers=peers)
        assert set(times.eager[label]) | set(times.dropped[label]) == set(peers), task.name
        assert all(ms > 0 for ms in times.eager[label].values()), task.name
        assert all(times.dropped[label].values()), task.name


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU or importlib.util.find_spec("liger_kernel") is None,
                    reason="needs a CUDA GPU and Liger-Kernel")
def test_liger_rope_is_called_in_its_layout_on_the_tokens_positions() -> None:
    """Liger's RoPE on the (batch, heads, seq, dim) views with per-sequence positions
    computes RoPE (to fp16 rounding) and rotates q and k in place, as a model uses it."""
    liger = peers_for(ROPE)["liger"]
    q, k, positions = ROPE.make_inputs((2, 64, 8, 2, 128), torch.float16, 1, "cuda")
    q_ref, _ = ROPE.reference(q, k, positions)
    q_out, _ = liger.fn(q, k, positions)
    assert (q_out.double() - q_ref.double()).abs().max() < 4e-3
    assert q_out.data_ptr() == q.data_ptr() and liger.in_place
