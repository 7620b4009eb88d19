"""Check, then time, each task's peers on a GPU (eager, torch.compile, Liger, cuBLAS,
unfused SDPA), and pick the best one per shape.

A peer is held to the candidates' rule before any figure of it is taken: on every shape
it is timed on, its output (and any input the task writes on purpose, e.g. a KV cache)
must match the task's reference within the task's tolerances, with no element over and
no systematic bias (``optimizer.sandbox.checks``). A peer that is wrong there, or cannot
run the shape, is dropped from that shape with the reason kept for the table.

Two figures per implementation: the eager call (``do_bench``: events around each call, L2
flushed, what an eager caller waits for, launch path included) and the GPU time alone
(the same calls replayed from a CUDA graph; L2 not flushed). A ``do_bench`` figure under
the roofline floor (bytes at the measured copy bandwidth, FLOPs at the matmul rate, 15%
slack because reads stream faster than the copy that measured the peak) cannot be real:
it is a failure to explain, listed as such and never taken as the best peer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelkb.kernels.base import Shape, Task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, peers_for
from kernelkb.optimizer.sandbox import checks
from kernelkb.optimizer.sandbox.timing import floor_ms, graph_ms, measure, rotating

log = logging.getLogger(__name__)

FLOOR_SLACK = 0.85
INPUT_SETS = 3
CHECK_SEED = 7


@dataclass
class PeerTimes:
    """One sweep of the peers: per shape label, per peer."""

    eager: dict[str, dict[str, float]] = field(default_factory=dict)  # do_bench median ms
    graph: dict[str, dict[str, float | None]] = field(default_factory=dict)  # replay ms
    dropped: dict[str, dict[str, str]] = field(default_factory=dict)  # why not timed
    how: dict[str, str] = field(default_factory=dict)  # peer -> how it is called

    def names(self) -> list[str]:
        seen = dict.fromkeys(self.how)
        for per_shape in (self.eager, self.dropped):
            for times in per_shape.values():
                seen.update(dict.fromkeys(times))
        return list(seen)


# -- correctness --------------------------------------------------------------------------
def check_peer(task: Task, peer: Peer | Callable, dtype: str, shape: Shape,
               device: str = "cuda", seed: int = CHECK_SEED) -> str | None:
    """None if the peer computes the op on ``shape`` (the candidates' rule), else why not."""
    fn = peer.fn if isinstance(peer, Peer) else peer
    in_place = isinstance(peer, Peer) and peer.in_place
    tol = task.tolerances[dtype]
    inputs = task.make_inputs(shape, DTYPES[dtype], seed, device)
    ref_inputs, peer_inputs = checks.snapshot(inputs), checks.snapshot(inputs)
    ref = task.reference(*ref_inputs)
    try:
        out = fn(*peer_inputs)
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception as err:  # noqa: BLE001 - any failure: the peer cannot run this shape
        first = (str(err).strip().splitlines() or [""])[0]
        return f"cannot run: {type(err).__name__}: {first[:200]}"
    stats = checks.compare_outputs(out, ref, tol.atol, tol.rtol)
    if isinstance(stats, str):
        return f"wrong output: {stats}"
    verdict = checks.shape_verdict(stats, tol.max_bias)
    if verdict:
        return "wrong output " + checks.describe_failure(verdict, task.shape_label(shape), stats,
                                                         tol.max_bias)
    # inputs: as for candidates, the ones the op writes (a KV cache) must end as the
    # reference left them, the others untouched (unless writing them is the peer's contract)
    expected = {i: ref_inputs[i] for i in task.mutated_inputs}
    changed = checks.modified_inputs(peer_inputs, inputs, expected)
    wrong = [i for i in changed if i in expected]
    if wrong:
        return f"wrong input(s) {wrong} written by the op: not what the reference wrote"
    stray = [i for i in changed if i not in expected]
    if stray and not in_place:
        return f"writes into input(s) {stray}, which the op only reads"
    return None


# -- timing -------------------------------------------------------------------------------
def time_call(fn: Callable, sets: Sequence[Sequence[Any]]) -> tuple[float, float | None]:
    """(do_bench median ms, CUDA-graph replay ms) of ``fn`` over rotating input sets."""
    return measure(rotating(fn, sets))[0], graph_ms(rotating(fn, sets))


def time_peers(task: Task, dtype: str, shapes: list[Shape],
               peers: dict[str, Peer] | None = None, device: str = "cuda") -> PeerTimes:
    """Check each peer on each shape, then time (on the GPU) the ones that passed."""
    torch_dtype = DTYPES[dtype]
    torch._dynamo.config.cache_size_limit = 64  # one compiled graph per sweep shape
    peers = peers_for(task) if peers is None else peers
    out = PeerTimes(how={name: p.how for name, p in peers.items()})
    for shape in shapes:
        label = task.shape_label(shape)
        out.eager[label], out.graph[label], out.dropped[label] = {}, {}, {}
        shared: list | None = None  # input sets, fresh ones for a peer that writes them
        for name, peer in peers.items():
            reason = check_peer(task, peer, dtype, shape, device)
            if reason:
                log.warning("%s %s %s dropped: %s", task.name, label, name, reason)
                out.dropped[label][name] = reason
                continue
            if peer.in_place or shared is None:
                sets = [task.make_inputs(shape, torch_dtype, 100 + k, device)
                        for k in range(INPUT_SETS)]
                shared = shared if peer.in_place else sets
            else:
                sets = shared
            try:
                out.eager[label][name], out.graph[label][name] = time_call(peer.fn, sets)
            except Exception as err:  # noqa: BLE001 - ran in the check, failed timed: say so
                out.dropped[label][name] = f"failed while timed: {repr(err)[:200]}"
    return out


# -- the best peer ------------------------------------------------------------------------
def shape_floor(task: Task, dtype: str, shape: Shape, peaks: dict[str, Any]) -> float | None:
    torch_dtype = DTYPES[dtype]
    return floor_ms(task.bytes_moved(shape, torch_dtype), task.flops(shape, torch_dtype), peaks)


def trustworthy(times: dict[str, float | None], floor: float | None) -> dict[str, float]:
    """The times that are possible at the GPU's peak."""
    return {name: ms for name, ms in times.items()
            if ms is not None and (floor is None or ms >= FLOOR_SLACK * floor)}


def below_floor(times: dict[str, float | None], floor: float | None) -> dict[str, float]:
    """The times faster than the GPU's peak allows: failures to explain."""
    possible = trustworthy(times, floor)
    return {name: ms for name, ms in times.items() if ms is not None and name not in possible}


def possible_peers(task: Task, dtype: str, shape: Shape, times: dict[str, float | None],
                   peaks: dict[str, Any]) -> dict[str, float]:
    """The peers' times on ``shape`` that the GPU's measured peaks allow."""
    return trustworthy(times, shape_floor(task, dtype, shape, peaks))


def best_peer(task: Task, dtype: str, shape: Shape, times: dict[str, float | None],
              peaks: dict[str, Any]) -> tuple[str, float] | None:
    """(name, ms) of the fastest checked peer whose time is possible, or None."""
    ok = possible_peers(task, dtype, shape, times, peaks)
    return min(ok.items(), key=lambda kv: kv[1]) if ok else None
