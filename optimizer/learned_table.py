"""A run's dispatch table with buckets learned from what the run measured.

Why: the run tunes per fixed regime, but what it exports should split where its own
timings say the best configuration changes (learned_buckets.py). The measurements are
the final sweeps: each regime's best kernel on that regime's shapes and the starting
kernel on every regime's shapes, beside the fastest checked peer per shape (call times,
do_bench medians, as the report's peer table). Untimed runs (the CPU interpreter) keep
the task's fixed regimes: there is nothing to learn from.
"""

from __future__ import annotations

import json
from typing import Any

from kernelkb.kernels.dispatch_runtime import dispatch_check
from kernelkb.optimizer.learned_buckets import Learned, Measured, learn


def config_id(item: dict[str, Any]) -> str:
    return json.dumps([item["config"], item.get("source")], sort_keys=True)


def run_measurements(result: Any, entries: dict[str, dict[str, Any]],
                     start_entry: dict[str, Any] | None) -> list[Measured]:
    """(shape, configuration, call ms, best peer) rows from the run's sweeps: each
    regime's best (its table entry) and the starting kernel (``start_entry``)."""
    from kernelkb.optimizer.peers import best_peer

    task, peers = result.task, result.peer_timings
    peaks = {"mem_bandwidth_gbps": result.env.mem_bandwidth_gbps,
             "peak_tflops": result.env.peak_tflops}
    rows: list[Measured] = []
    subs = result.by_regime or {result.regime or task.regimes.names[0]: result}
    for regime, sub in subs.items():
        timed = [(entries.get(regime), sub.best_sweep), (start_entry, sub.start_sweep)]
        for item, sweep in timed:
            if item is None or sweep is None or not sweep.timing_available or not sweep.ok:
                continue
            for label, (ms, _) in sweep.timings.items():
                shape = tuple(task.parse_shape(label))
                top = None
                if peers is not None and label in peers.eager:
                    top = best_peer(task, result.dtype, shape, peers.eager[label], peaks)
                rows.append(Measured(shape, config_id(item), float(ms),
                                     top[0] if top else None, top[1] if top else None))
    return rows


def learned_table(table: dict[str, Any], result: Any,
                  start_entry: dict[str, Any] | None = None) -> dict[str, Any]:
    """``table`` (one GPU, the task's regimes) with its buckets learned from the run's
    timings; the table as it was when nothing was timed."""
    task = result.task
    (gpu, slot), = table["gpus"].items()
    entries = slot["regimes"]
    found = learn(task.shape_names, table["rule"],
                  run_measurements(result, entries, start_entry))
    if found is None:
        return table
    return with_buckets(table, gpu, found, [*entries.values(), start_entry])


def with_buckets(table: dict[str, Any], gpu: str, found: Learned,
                 items: list[dict[str, Any] | None]) -> dict[str, Any]:
    """The table whose rule and entries are ``found``'s buckets (each bucket's entry is
    its configuration's entry, with the bucket's shapes, span and figures)."""
    by_id = {config_id(item): item for item in items if item is not None}
    regimes = {}
    for bucket in found.buckets:
        rows = bucket.measured
        regimes[bucket.name] = {
            **by_id[bucket.config], "shapes": [r["shape"] for r in rows],
            "span": list(bucket.span), "measured": rows,
            "time_ms": min(r["time_ms"] for r in rows)}
    spans = ", ".join(f"{b.name} {b.span[0]}..{b.span[1]}" for b in found.buckets)
    reason = (f"learned: buckets of {found.dim} split where the measured best configuration "
              f"changes ({spans}); was: {table['rule'].get('reason', '')}")
    return dispatch_check({**table, "rule": found.rule(reason),
                           "gpus": {gpu: {**table["gpus"][gpu], "regimes": regimes}}})


def start_entry(result: Any, sources: dict[str, str]) -> dict[str, Any] | None:
    """The starting kernel's table entry (its own source carried in ``sources`` when its
    code, not only its header, differs from the module's body); None without a start."""
    from kernelkb.kernels.dispatch_runtime import dispatch_render
    from kernelkb.kernels.shared.hashing import source_hash
    from kernelkb.optimizer.dispatch import entry
    from kernelkb.optimizer.experience import task_config

    if not result.start_source or result.start_sweep is None:
        return None
    task, source = result.task, result.start_source
    config = task_config(task, source)
    try:
        own = source_hash(source) if dispatch_render(result.best_source, config) != \
            dispatch_render(source, config) else None
    except KeyError:
        own = source_hash(source)
    if own:
        sources[own] = source
    return entry(config, shapes=[], timed=True, time_ms=None, start_ms=None,
                 run_id=result.run_id, env=result.env, source=own)
