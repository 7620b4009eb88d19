"""Turn sweep journals (``kernelkb sweep``, benchmarks/sweeps*/*.jsonl) into seed
experiences.

Every point becomes one experience: the configuration against its parent (one knob
closer to the naive kernel) on one shape regime, with the diff, each shape's GPU time and
the interleaved comparison's 95% interval; its verdict is that comparison's outcome (the
judge's rule, optimizer/sandbox/compare.py). A point that failed its checks becomes a
failure record. No other seed file ships a timed record without its comparison
(tests/kb/test_shipped_seeds.py).

    python benchmarks/sweep_to_seeds.py   # seeds/sweep_<task>_<dtype>[_<card>].jsonl
"""

from __future__ import annotations

import difflib
from pathlib import Path

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.shared.comparison import failure_verdict
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.kernels.shared.stats import geomean
from kernelkb.optimizer.sweep import Point, read_journal

ROOT = Path(__file__).resolve().parents[1]


def record_of(point: Point, header: dict, n: int) -> ExperienceRecord | None:
    task = get_task(point.task)
    if point.parent is None or point.changed is None:
        return None  # the naive kernel: every other point's last resort, no edit
    param = next(p for p in task.params if p.name == point.changed)
    parent_src, child_src = task.render(point.parent), task.render(point.config)
    diff = "".join(difflib.unified_diff(parent_src.splitlines(True), child_src.splitlines(True),
                                        "parent.py", "child.py"))
    summary = f"set {point.changed} {point.parent[point.changed]!r} -> " \
              f"{point.config[point.changed]!r}"
    others = sorted(k for k in point.config if point.config[k] != point.parent[k]
                    and k != point.changed)
    if others:  # its own parent failed: compared with the naive kernel instead
        summary += f" (and {', '.join(others)}, against the naive kernel)"
    if param.help:
        summary += f": {param.help}"
    return ExperienceRecord(
        run_id=f"sweep-{point.task}-{point.dtype}-{header['started_at'][:10]}",
        created_at=point.measured_at, iteration=n,
        task={"op_type": task.op_type, "task_id": task.name, "dtype": point.dtype,
              "shape_set": f"sweep:{';'.join(point.shapes or [])}", "regime": point.regime},
        env=header["env"],
        edit={"summary": summary, "categories": [param.category], "diff": diff,
              "config": point.config, "parent_hash": source_hash(parent_src),
              "child_hash": source_hash(child_src)},
        feedback=feedback_of(point),
        verdict=verdict_of(point),
        provenance={"agent": "sweep", "round_kind": "sweep",
                    "command": f"kernelkb sweep {point.task} --dtype {point.dtype}",
                    "source": f"{header['env']['gpu_name']} sweep {header['started_at']}"})


def verdict_of(point: Point) -> str:
    if not point.ok:
        return failure_verdict(point.error_kind, "correctness").value
    return point.comparison.outcome.value if point.comparison else "neutral"


def feedback_of(point: Point) -> dict:
    if not point.ok:
        return {"stage": "correctness" if point.error_kind in ("wrong_result", "bias")
                else "run", "error_kind": point.error_kind,
                "error_message": (point.error_message or "")[:400],
                "failing_shapes": point.failing_shapes or [],
                "text": f"failed: {point.error_kind}: {(point.error_message or '')[:200]}"}
    c = point.comparison
    if not c:
        return {"stage": "correctness", "max_rel_err": point.max_rel_err,
                "text": "correctness: pass (untimed)"}
    shapes = c.shapes
    timings = [{"shape": label, "median_ms": s.candidate_ms, "iqr_ms": s.candidate_iqr_ms,
                "gpu_ms": s.candidate_ms, "gpu_iqr_ms": s.candidate_iqr_ms,
                "ratio": s.ratio, "ratio_low": s.low, "ratio_high": s.high}
               for label, s in shapes.items()]
    time_ms = geomean([s.candidate_ms for s in shapes.values()])
    parent_ms = geomean([s.incumbent_ms for s in shapes.values()])
    text = (f"correctness: pass (max rel err {point.max_rel_err:.1e}) · GPU time "
            f"{time_ms:.4f} ms · parent {parent_ms:.4f} ms → {c.ratio:.3f}x "
            f"[{c.low:.3f}, {c.high:.3f}] (95%, {c.rounds} rounds): {c.outcome.value}")
    if point.gpu_shared:
        text += f"\n{point.gpu_shared}"
    return {"stage": "performance", "timing_available": True, "timings": timings,
            "time_ms": time_ms, "parent_ms": parent_ms, "speedup_vs_parent": c.ratio,
            "max_rel_err": point.max_rel_err, "time_basis": "gpu",
            "comparison": {"ratio": c.ratio, "low": c.low, "high": c.high,
                           "rounds": c.rounds, "calls_per_round": c.calls_per_round,
                           "noise_floor": c.noise_floor, "outcome": c.outcome.value},
            "text": text}


def main() -> None:
    seeds = ROOT / "seeds"
    # benchmarks/sweeps is the H200's; benchmarks/sweeps_<model> another card's
    for path in sorted((ROOT / "benchmarks").glob("sweeps*/*.jsonl")):
        header, points = read_journal(path)
        task = get_task(header["task"])
        stale = [p for p in points.values() if p.stale(task)]  # measured on other code
        records = [r for n, p in enumerate(points.values())
                   if not p.stale(task) and (r := record_of(p, header, n)) is not None]
        card = path.parent.name.removeprefix("sweeps")
        target = seeds / f"sweep_{header['task']}_{header['dtype']}{card}.jsonl"
        target.write_text("".join(r.model_dump_json(exclude_none=True) + "\n" for r in records))
        print(f"{target.relative_to(ROOT)}: {len(records)} records "
              f"({sum(r.feedback.comparison is not None for r in records)} with an interval)"
              + (f", {len(stale)} stale points left out (the template renders other code "
                 "now: kernelkb sweep measures them again)" if stale else ""))


if __name__ == "__main__":
    main()
