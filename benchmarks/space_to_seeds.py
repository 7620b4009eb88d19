"""Turn measured candidate spaces (benchmarks/space/*.json) into seed experiences.

Every measured configuration becomes one single-change experience against its neighbour
one step closer to the naive kernel (the parameters are reset in catalog order), so each
record reads as "changed X from a to b on this GPU: 1.31x vs parent" — with the real
diff, the per-shape times and the verdict. Failed configurations become failure records.
The replay benchmark reads these records (benchmarks/replay/knowledge.py); the seeds ship
only the failures, since a timed point here is one figure against another with no interval
(``kernelkb sweep`` measures the same points with theirs: benchmarks/sweep_to_seeds.py).

    python benchmarks/space_to_seeds.py            # writes seeds/space_<task>_<dtype>.jsonl
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.base import Task
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.shared.comparison import failure_verdict, outcome
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.kernels.shared.stats import geomean

ROOT = Path(__file__).resolve().parents[1]
NOISE = 0.03  # speedups within 3% of 1.0 are neutral: the timing spread on the H200


def key(cfg: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(cfg.items()))


def parent_of(task: Task, cfg: dict) -> tuple[dict, str] | None:
    """The neighbour one step closer to the naive config, and the parameter changed."""
    default = task.default_config
    for param in (*task.variants, *task.knobs):
        if cfg[param.name] != default[param.name]:
            parent = {**cfg, param.name: default[param.name]}
            if task.constraint(parent) is None:
                return parent, param.name
    for param in (*task.variants, *task.knobs):  # no legal single reset: go to the default
        if cfg[param.name] != default[param.name]:
            return dict(default), param.name
    return None


def verdict(row: dict, speedup: float | None) -> str:
    """The one verdict rule (kernels/shared/comparison.py) on one figure each: a space
    point has no interval, so only a failure or a change past ``NOISE`` says anything."""
    if not row.get("ok"):
        return failure_verdict(row.get("error_kind"), row.get("stage")).value
    if speedup is None:
        return "neutral"
    return outcome(speedup, speedup, NOISE).value


def build_records(space: dict) -> list[ExperienceRecord]:
    task = get_task(space["task"])
    rows = {r["key"]: r for r in space["configs"]}
    base = space["baseline_ms"]
    records = []
    for i, row in enumerate(space["configs"]):
        step = parent_of(task, row["config"])
        if step is None:
            continue  # the naive kernel itself: it is every record's baseline
        parent_cfg, changed = step
        parent = rows.get(key(parent_cfg))
        if row.get("ok") and not (row.get("time_ms") and parent and parent.get("time_ms")):
            continue  # a partial space: keep only records with both sides measured
        param = next(p for p in (*task.variants, *task.knobs) if p.name == changed)
        old, new = parent_cfg[changed], row["config"][changed]
        parent_src, child_src = task.render(parent_cfg), task.render(row["config"])
        diff = "".join(difflib.unified_diff(parent_src.splitlines(True),
                                            child_src.splitlines(True), "parent.py", "child.py"))
        feedback = feedback_of(task, space, row, parent, base)
        # the parent's other settings are in the record's config (the few-shot block shows
        # it): the summary says only what changed and why, which is what gets embedded
        summary = f"set {changed} {old!r} -> {new!r}"
        if param.help:
            summary += f": {param.help}"
        records.append(ExperienceRecord(
            run_id=f"space-{task.name}-{space['dtype']}-{space['date'][:10]}",
            created_at=space["date"],  # when it was measured: reruns write the same file
            iteration=i,
            task={"op_type": task.op_type, "task_id": task.name, "dtype": space["dtype"],
                  "shape_set": "space:" + ";".join(space["shapes"])},
            env={k: v for k, v in space["env"].items()},
            edit={"summary": summary, "categories": [param.category], "diff": diff,
                  "config": row["config"], "parent_hash": source_hash(parent_src),
                  "child_hash": source_hash(child_src)},
            feedback=feedback,
            verdict=verdict(row, feedback.get("speedup_vs_parent")),
            provenance={"agent": "sweep", "round_kind": "sweep", "command": space["command"],
                        "source": f"{space['env']['gpu_name']} space measurement "
                                  f"{space['date']}"},
        ))
    return records


def feedback_of(task: Task, space: dict, row: dict, parent: dict | None, base: dict) -> dict:
    if not row.get("ok") or not row.get("times_ms"):
        message = (row.get("error_message") or "")[:200]
        return {"stage": "correctness" if row.get("error_kind") in ("wrong_result", "bias")
                else (row.get("stage") or "run"),
                "error_kind": row.get("error_kind") or "untimed",
                "error_message": (row.get("error_message") or "")[:400],
                "failing_shapes": row.get("failing_shapes") or [],
                "text": f"failed: {row.get('error_kind')}: {message}"}
    times = row["times_ms"]
    time_ms = geomean([t[0] for t in times.values()])
    base_ms = geomean([base[s][0] for s in times])
    parent_ms = parent.get("time_ms") if parent and parent.get("ok") else None
    dtype = DTYPES[space["dtype"]]
    shapes = {task.shape_label(s): s for s in task.sweep_shapes}
    gbps = geomean([task.bytes_moved(shapes[s], dtype) / t[0] / 1e6
                    for s, t in times.items() if s in shapes])
    peak = space["peaks"]["mem_bandwidth_gbps"]
    res = row.get("resources") or {}
    fb = {
        "stage": "performance", "timing_available": True,
        "timings": [{"shape": s, "median_ms": t[0], "iqr_ms": t[1], "baseline_ms": base[s][0]}
                    for s, t in times.items()],
        "time_ms": time_ms, "baseline_ms": base_ms, "parent_ms": parent_ms,
        "speedup_vs_baseline": base_ms / time_ms,
        "speedup_vs_parent": parent_ms / time_ms if parent_ms else None,
        "achieved_gbps": gbps, "peak_share": gbps / peak if peak else None,
        "registers": res.get("registers"), "spills": res.get("spills"),
        "smem_bytes": res.get("smem_bytes"),
        "max_rel_err": row.get("max_rel_err"),
    }
    text = (f"correctness: pass · time {time_ms:.4f} ms geomean · baseline {base_ms:.4f} ms"
            + (f" · parent {parent_ms:.4f} ms → {parent_ms / time_ms:.2f}x" if parent_ms else "")
            + f" · {gbps:.0f} GB/s")
    fb["text"] = text
    return fb


def main() -> None:
    out_dir = ROOT / "seeds"
    out_dir.mkdir(exist_ok=True)
    for path in sorted((ROOT / "benchmarks" / "space").glob("*.json")):
        space = json.loads(path.read_text())
        if not space.get("complete"):
            print(f"{path.name}: incomplete space, only measured pairs are kept")
        # a space point's verdict is one figure against its parent's, with no interval: it
        # is not shipped (the sweep's points are); its failures are
        records = [r for r in build_records(space) if not r.single_figure]
        target = out_dir / f"space_{space['task']}_{space['dtype']}.jsonl"
        with target.open("w") as handle:
            for rec in records:
                handle.write(rec.model_dump_json(exclude_none=True) + "\n")
        if records:
            print(f"{target.relative_to(ROOT)}: {len(records)} records (failures)")
        else:
            target.unlink()


if __name__ == "__main__":
    main()
