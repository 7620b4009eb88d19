"""The structural variants of issue 13 (long-row softmax, persistent TMA matmul with
split-K, flash-style attention prefill) on the GPU, side by side with the checked peers.

Two stages, each one process on one GPU:

- ``explore``: every candidate configuration below on every sweep shape of its task
  (checked against the reference first, then timed: eager call and CUDA-graph replay),
  with the cheap peers (cuBLAS, PyTorch eager); writes ``variants_explore_<gpu>.json``.
- ``final``: per sweep shape, the configuration ``explore`` found fastest in GPU time
  (from ``--choice``, an explore JSON) and every candidate it did not time on that shape
  (added since, or not reached), beside every peer ``kernels/peers.py`` names
  (torch.compile, Liger, cuBLAS, the compiled unfused attention), all checked first;
  writes ``variants_final_<gpu>.{json,md}``.

Each configuration also reports the shared memory its compiled kernels use against the
task's prediction (``Task.smem_need``): the model must never predict less.

    python benchmarks/variants.py explore [--tasks softmax matmul attention]
    python benchmarks/variants.py final --choice benchmarks/results/variants_explore_h200.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from kernelkb.kernels.base import Task
from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.config import set_header_constants
from kernelkb.kernels.discovery import all_tasks
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, peers_for
from kernelkb.kernels.shared.stats import geomean
from kernelkb.optimizer.peers import time_peers

log = logging.getLogger("variants")
RESULTS = Path(__file__).resolve().parent / "results"

# (label, overrides of the task's default config, shapes it applies to (None: all))
LONG = lambda shape: shape[1] >= 32768  # noqa: E731 - the long-row path's rows
SHORT = lambda shape: shape[1] < 32768  # noqa: E731 - few warps spill on long rows
NARROW = lambda shape: shape[1] <= 2048  # noqa: E731 - 2-warp rows
UP_TO_32K = lambda shape: shape[1] <= 32768  # noqa: E731 - a whole 131072 tile spills
SMALL_M = lambda shape: shape[0] <= 256  # noqa: E731 - split-K's shapes
BIG_M = lambda shape: shape[0] >= 1024  # noqa: E731 - many tiles: overlap across tiles
CANDIDATES: dict[str, list[tuple[str, dict, object]]] = {
    "softmax": [
        ("whole w8 r2 (run best)", {"NUM_WARPS": 8, "ROWS_PER_PROGRAM": 2}, SHORT),
        ("whole w2 r4", {"NUM_WARPS": 2, "ROWS_PER_PROGRAM": 4}, NARROW),
        ("whole w2 r1", {"NUM_WARPS": 2}, NARROW),
        ("whole w4 r4", {"NUM_WARPS": 4, "ROWS_PER_PROGRAM": 4}, SHORT),
        ("whole w4 r1", {"NUM_WARPS": 4}, SHORT),
        ("whole w8 r1", {"NUM_WARPS": 8}, SHORT),
        ("whole w16 r1", {"NUM_WARPS": 16}, UP_TO_32K),
        ("whole w16 r2", {"NUM_WARPS": 16, "ROWS_PER_PROGRAM": 2}, UP_TO_32K),
        ("long 4096 w8", {"NUM_WARPS": 8, "LONG_ROW_BLOCK": 4096}, LONG),
        ("long 8192 w8", {"NUM_WARPS": 8, "LONG_ROW_BLOCK": 8192}, LONG),
        ("long 8192 w16", {"NUM_WARPS": 16, "LONG_ROW_BLOCK": 8192}, LONG),
        ("long 16384 w16", {"NUM_WARPS": 16, "LONG_ROW_BLOCK": 16384}, LONG),
        ("long 16384 w8 hints", {"NUM_WARPS": 8, "LONG_ROW_BLOCK": 16384, "L2_HINTS": True},
         LONG),
        ("long 16384 w16 hints", {"NUM_WARPS": 16, "LONG_ROW_BLOCK": 16384, "L2_HINTS": True},
         LONG),
        ("long 8192 w16 hints", {"NUM_WARPS": 16, "LONG_ROW_BLOCK": 8192, "L2_HINTS": True},
         LONG),
        ("online 4096 w16 (old chunked)", {"NUM_WARPS": 16, "BLOCK_SIZE": 4096,
                                           "ONLINE": True}, LONG),
    ],
    "matmul": [
        ("tiled 128x128 w8 s4 (run best)", {"BLOCK_M": 128, "BLOCK_N": 128, "NUM_WARPS": 8,
                                            "NUM_STAGES": 4}, None),
        ("tiled 128x256 g8 w8 s4", {"BLOCK_M": 128, "BLOCK_N": 256, "GROUP_M": 8,
                                    "NUM_WARPS": 8, "NUM_STAGES": 4}, None),
        ("tiled 16x64 split4 s4", {"BLOCK_M": 16, "BLOCK_N": 64, "SPLIT_K": 4,
                                   "NUM_STAGES": 4}, SMALL_M),
        ("tiled 64x64 k128 s4", {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 128,
                                 "NUM_STAGES": 4}, SMALL_M),
        ("tiled 64x64 g8 s6", {"BLOCK_M": 64, "BLOCK_N": 64, "GROUP_M": 8,
                               "NUM_STAGES": 6}, SMALL_M),
        ("tma 128x256 w8 s3", {"PERSISTENT_TMA": True, "BLOCK_M": 128, "BLOCK_N": 256,
                               "GROUP_M": 8, "NUM_WARPS": 8, "NUM_STAGES": 3}, None),
        ("tma 128x128 w8 s4", {"PERSISTENT_TMA": True, "BLOCK_M": 128, "BLOCK_N": 128,
                               "GROUP_M": 8, "NUM_WARPS": 8, "NUM_STAGES": 4}, None),
        ("tma 128x128 w4 s4", {"PERSISTENT_TMA": True, "BLOCK_M": 128, "BLOCK_N": 128,
                               "GROUP_M": 8, "NUM_WARPS": 4, "NUM_STAGES": 4}, None),
        ("tma 64x128 w4 s4", {"PERSISTENT_TMA": True, "BLOCK_M": 64, "BLOCK_N": 128,
                              "GROUP_M": 8, "NUM_WARPS": 4, "NUM_STAGES": 4}, None),
        ("tma 64x128 split4 s4", {"PERSISTENT_TMA": True, "BLOCK_M": 64, "BLOCK_N": 128,
                                  "SPLIT_K": 4, "NUM_WARPS": 4, "NUM_STAGES": 4}, SMALL_M),
        ("tma 128x128 split4 w8 s4", {"PERSISTENT_TMA": True, "BLOCK_M": 128,
                                      "BLOCK_N": 128, "SPLIT_K": 4, "NUM_WARPS": 8,
                                      "NUM_STAGES": 4}, SMALL_M),
        ("tma 128x64 split4 w4 s4", {"PERSISTENT_TMA": True, "BLOCK_M": 128, "BLOCK_N": 64,
                                     "SPLIT_K": 4, "NUM_WARPS": 4, "NUM_STAGES": 4}, SMALL_M),
        ("tma 64x64 split4 w4 s4", {"PERSISTENT_TMA": True, "BLOCK_M": 64, "BLOCK_N": 64,
                                    "SPLIT_K": 4, "NUM_WARPS": 4, "NUM_STAGES": 4}, SMALL_M),
        ("tma flat 128x256 w8 s3", {"PERSISTENT_TMA": True, "FLATTEN": True, "BLOCK_M": 128,
                                    "BLOCK_N": 256, "GROUP_M": 8, "NUM_WARPS": 8,
                                    "NUM_STAGES": 3}, BIG_M),
        ("tma flat 128x128 w8 s4", {"PERSISTENT_TMA": True, "FLATTEN": True, "BLOCK_M": 128,
                                    "BLOCK_N": 128, "GROUP_M": 8, "NUM_WARPS": 8,
                                    "NUM_STAGES": 4}, BIG_M),
    ],
    "attention": [
        ("run best 64x32 table skip even", {"ROPE_TABLE": True, "CAUSAL_SKIP": True,
                                           "EVEN_SEQ": True}, None),
        ("skip 128x64 w8 s3 table", {"ROPE_TABLE": True, "CAUSAL_SKIP": True,
                                     "EVEN_SEQ": True, "BLOCK_M": 128, "BLOCK_N": 64,
                                     "NUM_WARPS": 8, "NUM_STAGES": 3}, None),
        ("flash 128x64 w8 s3", {"FLASH": True, "CAUSAL_SKIP": True, "EVEN_SEQ": True,
                                "ROPE_TABLE": True, "BLOCK_M": 128, "BLOCK_N": 64,
                                "NUM_WARPS": 8, "NUM_STAGES": 3}, None),
        ("flash 128x64 w8 s2", {"FLASH": True, "CAUSAL_SKIP": True, "EVEN_SEQ": True,
                                "ROPE_TABLE": True, "BLOCK_M": 128, "BLOCK_N": 64,
                                "NUM_WARPS": 8, "NUM_STAGES": 2}, None),
        ("flash 128x128 w8 s2", {"FLASH": True, "CAUSAL_SKIP": True, "EVEN_SEQ": True,
                                 "ROPE_TABLE": True, "BLOCK_M": 128, "BLOCK_N": 128,
                                 "NUM_WARPS": 8, "NUM_STAGES": 2}, None),
        ("flash 64x64 w4 s2", {"FLASH": True, "CAUSAL_SKIP": True, "EVEN_SEQ": True,
                               "ROPE_TABLE": True, "BLOCK_M": 64, "BLOCK_N": 64,
                               "NUM_WARPS": 4, "NUM_STAGES": 2}, None),
        ("flash 64x64 w4 s2 computed rope", {"FLASH": True, "CAUSAL_SKIP": True,
                                             "EVEN_SEQ": True, "BLOCK_M": 64,
                                             "BLOCK_N": 64, "NUM_WARPS": 4,
                                             "NUM_STAGES": 2}, None),
    ],
}
CHEAP_PEERS = ("cuBLAS", "eager", "liger", "unfused eager")


def _tma(bm: int, bn: int, split: int, warps: int, stages: int) -> dict:
    return {"PERSISTENT_TMA": True, "BLOCK_M": bm, "BLOCK_N": bn, "SPLIT_K": split,
            "NUM_WARPS": warps, "NUM_STAGES": stages}


def _grouped_tiles(*points: tuple[int, ...]) -> list[tuple[str, dict, object]]:
    """Tiled small-M candidates from (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages)."""
    return [(f"wide tiled {bm}x{bn}x{bk} g{g} w{w} s{st}",
             {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g, "NUM_WARPS": w,
              "NUM_STAGES": st}, SMALL_M) for bm, bn, bk, g, w, st in points]


def _long_rows() -> list[tuple[str, dict, object]]:
    """Long-row softmax (32768+ columns): the two-pass path at 67-83% of the copy
    bandwidth re-reads rows from DRAM; a persistent grid (N programs an SM, fewer rows in
    flight, so pass 2's re-read finds them in L2) and eviction hints (keep pass 1's reads,
    stream the output), against a whole 32768-column row in 32 warps' registers."""
    found = [(f"wide long {block} w{w} p{p}{' hints' if hints else ''}",
              {"LONG_ROW_BLOCK": block, "NUM_WARPS": w, "LONG_ROW_PERSISTENT": p,
               "L2_HINTS": hints}, LONG)
             for block in (8192, 16384) for w in (8, 16) for p in (0, 1, 2)
             for hints in (False, True)]
    return [*found, ("wide long 32768 w16 p1 hints", {"LONG_ROW_BLOCK": 32768, "NUM_WARPS": 16,
                                                      "LONG_ROW_PERSISTENT": 1,
                                                      "L2_HINTS": True}, LONG),
            ("wide whole w32", {"NUM_WARPS": 32}, lambda shape: shape[1] == 32768)]


# ``--wide N``: small-M matmul candidates outside the task's space (other split counts,
# tiles, stages), rendered without its constraints, to decide whether to widen the space.
# Round 1 found the 128-deep K step on 64x64 tiles (now in the space); round 2 tries the
# grouped order (the two 64-row tiles of M=128 read each B slab together) and thinner tiles;
# round 3, the stage count of grouped 64x64 tiles; round 4, long-row softmax (above) and
# deeper or transposed tiles on the large matmul shapes (0.98-0.99x cuBLAS); round 5,
# the long-row chunk and warps with the L2 hints (round 4's finding), and warp-specialised
# (producer / consumer warps) persistent TMA matmuls.
WIDE: dict[int, dict[str, list[tuple[str, dict, object]]]] = {1: {"matmul": [
    *[(f"wide tma {bm}x{bn} split{sp} w{w} s{st}", _tma(bm, bn, sp, w, st), SMALL_M)
      for bm, bn, sp, w, st in (
          (128, 128, 2, 8, 4), (128, 128, 4, 8, 6), (128, 128, 8, 8, 4),
          (128, 64, 2, 4, 4), (128, 64, 2, 4, 6), (128, 64, 4, 4, 6), (128, 64, 1, 4, 6),
          (64, 128, 2, 4, 4), (64, 128, 2, 4, 6), (64, 64, 1, 4, 6), (64, 64, 2, 4, 6),
          (128, 256, 4, 8, 3), (128, 256, 8, 8, 3), (128, 32, 1, 4, 8), (64, 32, 1, 4, 8),
          (16, 64, 4, 4, 6), (16, 128, 2, 4, 6))],
    *[(f"wide tiled {bm}x{bn}x{bk} split{sp} s{st}",
       {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sp, "NUM_WARPS": 4,
        "NUM_STAGES": st}, SMALL_M)
      for bm, bn, bk, sp, st in ((64, 64, 128, 1, 4), (16, 64, 128, 4, 4),
                                 (16, 32, 128, 4, 4), (16, 64, 64, 8, 6))],
]}, 2: {"matmul": [
    *_grouped_tiles(
          (64, 64, 128, 8, 4, 4), (64, 64, 128, 8, 4, 3), (64, 64, 128, 8, 4, 5),
          (64, 64, 128, 1, 4, 3), (64, 64, 128, 1, 4, 5), (64, 64, 64, 8, 4, 6),
          (128, 32, 128, 1, 4, 4), (64, 32, 128, 8, 4, 4), (64, 32, 128, 8, 2, 4),
          (32, 64, 128, 8, 4, 4), (64, 64, 256, 8, 4, 3), (128, 64, 128, 1, 4, 3),
          (64, 128, 128, 8, 4, 3)),
]}, 3: {"matmul": [
    *_grouped_tiles(
          (64, 64, 64, 8, 4, 3), (64, 64, 64, 8, 4, 4), (64, 64, 64, 8, 4, 5),
          (64, 64, 64, 8, 4, 6), (64, 64, 64, 8, 4, 7), (64, 64, 64, 1, 4, 6),
          (64, 64, 64, 8, 2, 6), (64, 64, 128, 8, 4, 4), (64, 64, 32, 8, 4, 8)),
]}, 4: {"softmax": _long_rows(), "matmul": [
    ("wide tma flat 128x256 w8 s4", {**_tma(128, 256, 1, 8, 4), "FLATTEN": True,
                                     "GROUP_M": 8}, BIG_M),
    ("wide tma 256x128 w8 s3", {**_tma(256, 128, 1, 8, 3), "GROUP_M": 8}, BIG_M),
    ("wide tiled 128x256 g8 w8 s3", {"BLOCK_M": 128, "BLOCK_N": 256, "GROUP_M": 8,
                                     "NUM_WARPS": 8, "NUM_STAGES": 3}, BIG_M),
]}, 5: {"softmax": [
    (f"wide long {block} w{w} p{p} hints", {"LONG_ROW_BLOCK": block, "NUM_WARPS": w,
                                            "LONG_ROW_PERSISTENT": p, "L2_HINTS": True}, LONG)
    for block, w, p in ((16384, 8, 0), (16384, 16, 0), (16384, 32, 1), (32768, 16, 0),
                        (32768, 32, 0), (32768, 16, 2), (32768, 32, 1), (65536, 32, 1))
], "matmul": [
    (f"wide tma ws {bm}x{bn} w{w} s{st}", {**_tma(bm, bn, 1, w, st), "GROUP_M": 8,
                                           "WARP_SPECIALIZE": True}, BIG_M)
    for bm, bn, w, st in ((128, 256, 8, 3), (128, 128, 8, 4), (128, 128, 4, 4), (128, 256, 4, 3))
]}}


def ours(task: Task, shape: tuple, labels: list[str] | None,
         wide: int = 0) -> dict[str, tuple[dict, object]]:
    """{label: (config, module)} of the candidates that apply to ``shape`` (and are named);
    ``wide``: also that round's WIDE candidates, which may lie outside the task's space."""
    found = {}
    extra = WIDE[wide].get(task.name, []) if wide else []
    for label, overrides, applies in [*CANDIDATES[task.name], *extra]:
        if labels is not None and label not in labels:
            continue
        if applies is not None and not applies(shape):
            continue
        config = {**task.default_config, **overrides}
        reason = None if label.startswith("wide ") else task.why_illegal(config)
        if reason:
            raise ValueError(f"{task.name} {label}: {reason}")
        found[label] = config
    return found


_MODULES: dict[tuple[str, str], object] = {}


def module_of(task: Task, label: str, config: dict):
    key = (task.name, label)
    if key not in _MODULES:
        safe = "".join(ch if ch.isalnum() else "_" for ch in label)
        source = set_header_constants(task.template, config) if label.startswith("wide ") \
            else task.render(config)  # a wide candidate skips the space's constraints
        _MODULES[key] = load_candidate(source, f"v_{task.name}_{safe}")
    return _MODULES[key]


def smem_report(task: Task, label: str, config: dict, shape: tuple) -> dict:
    """Shared memory the compiled kernels of a module use vs the task's prediction."""
    from kernelkb.optimizer.sandbox.compiled_info import kernel_resources

    used = kernel_resources(module_of(task, label, config))
    need = task.smem_need(config, (shape,), ("float16",))
    return {"used": used.get("smem_bytes"), "predicted": need,
            "registers": used.get("registers"), "spills": used.get("spills"),
            "ok": used.get("smem_bytes") is None or used["smem_bytes"] <= need}


def bench(task: Task, stage: str, choice: dict, explored: dict,
          deadline: float, wide: int = 0) -> list[dict]:
    rows = []
    for shape in task.sweep_shapes:
        if wide and not any(applies(shape) for _, _, applies in WIDE[wide].get(task.name, [])):
            continue
        if time.time() > deadline:
            log.warning("%s: out of time before %s", task.name, shape)
            break
        label = task.shape_label(shape)
        chosen = None
        if stage == "final":
            # the explore run's fastest here, and every candidate it did not time here
            seen = explored.get((task.name, label), set())
            chosen = [name for name, _, _ in CANDIDATES[task.name] if name not in seen]
            chosen += [choice[task.name][label]] if label in choice.get(task.name, {}) else []
        configs = ours(task, shape, chosen, wide)
        impls = {f"ours: {name}": Peer(f"ours: {name}", module_of(task, name, cfg).run, "ours")
                 for name, cfg in configs.items()}
        peers = peers_for(task)
        if stage == "explore":
            peers = {k: v for k, v in peers.items() if k in CHEAP_PEERS}
        impls.update(peers)
        started = time.time()
        times = time_peers(task, "float16", [shape], peers=impls)
        row = {"task": task.name, "shape": label,
               "times": {name: {"call": ms, "graph": times.graph[label].get(name)}
                         for name, ms in times.eager[label].items()},
               "dropped": times.dropped[label],
               "configs": {name: {k: v for k, v in cfg.items()
                                  if v != task.default_config.get(k)}
                           for name, cfg in configs.items()},
               "smem": {name: smem_report(task, name, cfg, shape)
                        for name, cfg in configs.items()},
               "wall_s": round(time.time() - started, 1)}
        summarise(row, task, shape)
        rows.append(row)
        log.info("%s %s (%.0fs): ours %s vs peer %s; dropped %s", task.name, label,
                 row["wall_s"], row.get("best ours"), row.get("best peer"), row["dropped"])
    return rows


def summarise(row: dict, task: Task, shape: tuple) -> None:
    """Best of ours and best peer, by GPU time and by eager call; ratios peer / ours."""
    for kind in ("graph", "call"):
        ours_t = {k: v[kind] for k, v in row["times"].items()
                  if k.startswith("ours: ") and v[kind] is not None}
        peer_t = {k: v[kind] for k, v in row["times"].items()
                  if not k.startswith("ours: ") and v[kind] is not None}
        suffix = "" if kind == "graph" else " (eager)"
        best_o = min(ours_t.items(), key=lambda kv: kv[1]) if ours_t else None
        best_p = min(peer_t.items(), key=lambda kv: kv[1]) if peer_t else None
        row["best ours" + suffix] = best_o
        row["best peer" + suffix] = best_p
        row["ratio" + suffix] = best_p[1] / best_o[1] if best_o and best_p else None
    nbytes = task.bytes_moved(shape, DTYPES["float16"])
    nflops = task.flops(shape, DTYPES["float16"])
    if row["best ours"]:
        ms = row["best ours"][1]
        row["ours TB/s"] = nbytes / ms / 1e9
        row["ours TFLOP/s"] = nflops / ms / 1e9


def markdown(data: dict) -> str:
    env = data["env"]
    lines = [f"# Structural variants vs peers on {env.get('gpu_name')} (float16, {data['stage']})",
             "", f"`{data['command']}`; triton {env.get('triton')}, torch {env.get('torch')}; "
             f"copy bandwidth measured in the run: {data.get('copy_gbps', 0):.0f} GB/s.", "",
             "Each figure: GPU time (CUDA-graph replay, median ms) / eager call (do_bench "
             "median ms, L2 flushed). Ratio = best peer / best of ours (> 1: ours faster). "
             "Every implementation was checked against the task's reference on the shape "
             "before it was timed.", ""]
    for task in dict.fromkeys(r["task"] for r in data["rows"]):
        trows = [r for r in data["rows"] if r["task"] == task]
        lines += [f"## {task}", "", "| shape | ours (config) | ours GPU / eager | best peer "
                  "GPU / eager | ratio GPU | ratio eager | ours TB/s | ours TFLOP/s |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        ratios = []
        for r in trows:
            bo, bp = r.get("best ours"), r.get("best peer")
            if not bo:
                lines.append(f"| {r['shape']} | none passed | | | | | | |")
                continue
            name = bo[0]
            eager = r["times"][name]["call"]
            peer_cell = "–"
            if bp:
                peer_cell = f"{bp[0]} {bp[1]:.4f} / {r['best peer (eager)'][1]:.4f}"
                ratios.append(r["ratio"])
            lines.append(
                f"| {r['shape']} | {name[6:]} | {bo[1]:.4f} / {eager:.4f} | {peer_cell} | "
                f"{_f(r['ratio'])} | {_f(r['ratio (eager)'])} | {_f(r.get('ours TB/s'))} | "
                f"{_f(r.get('ours TFLOP/s'))} |")
        if ratios:
            gm = geomean(ratios)
            lines += ["", f"geomean ratio (GPU time): {gm:.3f} over {len(ratios)} shapes"]
        bad = [f"{r['shape']} {n}: used {s['used']} > predicted {s['predicted']}"
               for r in trows for n, s in r["smem"].items() if not s["ok"]]
        lines += ["", "Shared memory vs the model: " + ("; ".join(bad) if bad else
                                                        "every compiled kernel within it"), ""]
        dropped = [f"{r['shape']} {n}: {why}" for r in trows for n, why in r["dropped"].items()]
        if dropped:
            lines += ["Dropped:", ""] + [f"- {d[:300]}" for d in dropped] + [""]
    return "\n".join(lines) + "\n"


def _f(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def pick(explore: dict) -> dict:
    """{task: {shape: label}}: the fastest of ours in GPU time on each shape."""
    chosen: dict[str, dict[str, str]] = {}
    for row in explore["rows"]:
        if row.get("best ours"):
            chosen.setdefault(row["task"], {})[row["shape"]] = row["best ours"][0][6:]
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=("explore", "final"))
    parser.add_argument("--tasks", nargs="*", default=list(CANDIDATES))
    parser.add_argument("--choice", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", RESULTS)))
    parser.add_argument("--budget-s", type=float, default=250.0)
    parser.add_argument("--tag", default="", help="suffix of the results files, so a "
                        "run of some tasks does not replace the all-task files")
    parser.add_argument("--wide", type=int, default=0, choices=(0, *WIDE),
                        help="explore: only the shapes round N's WIDE candidates (outside the "
                             "task's space) apply to, with them")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if not torch.cuda.is_available():
        sys.exit("variants.py needs a CUDA GPU (run it on the H200 through the device tool)")
    import triton

    deadline = time.time() + args.budget_s
    explore = json.loads(args.choice.read_text()) if args.choice else {"rows": []}
    choice = pick(explore)
    explored = {(r["task"], r["shape"]): {k[6:] for k in (*r["times"], *r["dropped"])
                                          if k.startswith("ours: ")} for r in explore["rows"]}
    torch._dynamo.config.cache_size_limit = 64
    from kernelkb.optimizer.sandbox.hardware import measure_peaks

    peaks = measure_peaks(copy_mib=512, matmul_n=4096)
    env = {"gpu_name": torch.cuda.get_device_name(), "triton": triton.__version__,
           "torch": torch.__version__}
    gpu = env["gpu_name"].split()[-1].lower()
    wide = f"_wide{args.wide}" if args.wide else ""
    stem = args.out / f"variants_{args.stage}{wide}{args.tag}_{gpu}"
    args.out.mkdir(parents=True, exist_ok=True)
    data = {"stage": args.stage, "env": env, "copy_gbps": peaks["mem_bandwidth_gbps"],
            "peaks": peaks, "command": "python benchmarks/variants.py " + " ".join(sys.argv[1:]),
            "choice": choice, "rows": []}
    tasks = all_tasks()
    for name in args.tasks:
        try:
            data["rows"] += bench(tasks[name], args.stage, choice, explored, deadline,
                                  args.wide)
        except Exception as err:  # noqa: BLE001 - keep the other tasks' figures
            log.exception("%s failed", name)
            data.setdefault("failed", {})[name] = repr(err)[:2000]
        data["date"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        stem.with_suffix(".json").write_text(json.dumps(data, indent=1))
        stem.with_suffix(".md").write_text(markdown(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
