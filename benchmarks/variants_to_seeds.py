"""Turn the structural-variant measurements (benchmarks/results/variants_*.json) into seed
experiences, so the store knows what the wide rounds found, per shape and GPU.

Why: ``benchmarks/variants.py`` times candidate configurations of the space (the long-row
softmax path with L2 hints, the persistent TMA matmul, flash attention) on every sweep
shape beside the checked peers, but an optimizer run only learns from experiences. As
records, those times let the bootstrap plan offer each regime the configuration measured
fastest on its shapes (retrieval.hardware), and the cost model learn from them.

One record per configuration of the task's space (candidates that set template constants
outside the space away from their template value, such as the persistent long-row grid,
are left out: the loop cannot render them). Its timings are its eager call (``median_ms``)
and CUDA-graph replay (``graph_ms``) per shape; where several files timed it on a shape,
the newest counts. A shape where the reference check dropped it is left out. Its parent is
the candidate nearest in configuration (fewest settings changed, then most shapes in
common) that was timed on shapes it shares; the speedup over the parent is the geometric
mean over those shapes of their GPU times. The environment is the H200's of the task's
space measurement (benchmarks/space), with the Triton and torch versions the variant runs
report.

    python benchmarks/variants_to_seeds.py     # writes seeds/variants_h200.jsonl
"""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.space_to_seeds import NOISE  # noqa: E402
from kernelkb.kb.record import ExperienceRecord  # noqa: E402
from kernelkb.kernels.base import Task, get_task, header_constants  # noqa: E402
from kernelkb.kernels.shared.hashing import source_hash  # noqa: E402
from kernelkb.kernels.shared.stats import geomean  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def measured(files: list[Path]) -> dict[str, dict[str, dict[str, Any]]]:
    """task -> config key -> {"config", "times": {shape: (call, graph)}, "labels",
    "commands", "date"}; files in date order, so a newer time of a shape replaces an older."""
    loaded = sorted((json.loads(p.read_text()) | {"_file": p.name} for p in files),
                    key=lambda d: d["date"])
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for data in loaded:
        for row in data["rows"]:
            task = get_task(row["task"])
            for label, overrides in (row.get("configs") or {}).items():
                config = full_config(task, overrides)
                timed = row["times"].get(f"ours: {label}")
                if config is None or not timed or f"ours: {label}" in row.get("dropped", {}):
                    continue
                if not (timed.get("call") and timed.get("graph")):
                    continue
                entry = out.setdefault(task.name, {}).setdefault(key(config), {
                    "config": config, "times": {}, "labels": set(), "commands": set()})
                entry["times"][row["shape"]] = (timed["call"], timed["graph"])
                entry["labels"].add(label)
                entry["commands"].add(data["command"])
                entry["date"] = data["date"]
    return out


def full_config(task: Task, overrides: dict[str, Any]) -> dict[str, Any] | None:
    """The task's full configuration for a candidate, or None when it sets something the
    space does not have (a template constant away from its value in the template, a value
    outside a knob's) or forbids. A template constant at its own value changes nothing."""
    template = header_constants(task.render(task.default_config))
    outside = {k: v for k, v in overrides.items() if k not in task.default_config}
    if any(k not in template or template[k] != v for k, v in outside.items()):
        return None
    config = {**task.default_config,
              **{k: v for k, v in overrides.items() if k in task.default_config}}
    try:
        task.render(config)  # ValueError: a value outside the knob's
    except ValueError:
        return None
    return config if task.constraint(config) is None else None


def key(config: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(config.items()))


def nearest(entry: dict[str, Any], others: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The other candidate with the fewest settings changed, then the most shapes shared."""
    shared = [(sum(entry["config"][k] != o["config"][k] for k in entry["config"]),
               -len(set(entry["times"]) & set(o["times"])), key(o["config"]), o)
              for o in others if o is not entry and set(entry["times"]) & set(o["times"])]
    return min(shared, key=lambda x: x[:3])[3] if shared else None


def build_records(task_name: str, entries: dict[str, dict[str, Any]],
                  env: dict[str, Any]) -> list[ExperienceRecord]:
    task = get_task(task_name)
    params = {p.name: p for p in (*task.variants, *task.knobs)}
    records = []
    for n, entry in enumerate(sorted(entries.values(), key=lambda e: key(e["config"]))):
        parent = nearest(entry, list(entries.values()))
        if parent is None:
            continue
        common = sorted(set(entry["times"]) & set(parent["times"]))
        speedup = geomean([parent["times"][s][1] / entry["times"][s][1] for s in common])
        changed = [k for k in entry["config"] if entry["config"][k] != parent["config"][k]]
        parent_src, child_src = task.render(parent["config"]), task.render(entry["config"])
        diff = "".join(difflib.unified_diff(parent_src.splitlines(True),
                                            child_src.splitlines(True), "parent.py", "child.py"))
        summary = "set " + ", ".join(f"{k} {parent['config'][k]!r} -> {entry['config'][k]!r}"
                                     for k in changed)
        first = params.get(changed[0])
        if first is not None and first.help:
            summary += f": {first.help}"
        times = entry["times"]
        time_ms = geomean([c for c, _ in times.values()])
        graph_ms = geomean([g for _, g in times.values()])
        text = (f"correctness: pass (checked against the reference on every shape) · GPU time "
                f"{graph_ms:.4f} ms geomean over {len(times)} shapes · vs the nearest "
                f"candidate on {len(common)} shared shapes: {speedup:.2f}x")
        records.append(ExperienceRecord(
            run_id=f"variants-{task.name}-h200", created_at=entry["date"], iteration=n,
            task={"op_type": task.op_type, "task_id": task.name, "dtype": "float16",
                  "shape_set": "variants:" + ";".join(times)},
            env=env,
            edit={"summary": summary,
                  "categories": sorted({params[k].category for k in changed if k in params}),
                  "diff": diff, "config": entry["config"], "parent_hash": source_hash(parent_src),
                  "child_hash": source_hash(child_src)},
            feedback={"stage": "performance", "timing_available": True,
                      "timings": [{"shape": s, "median_ms": c, "graph_ms": g}
                                  for s, (c, g) in times.items()],
                      "time_ms": time_ms, "speedup_vs_parent": speedup, "text": text},
            verdict="improved" if speedup > 1 + NOISE else
                    "regressed" if speedup < 1 / (1 + NOISE) else "neutral",
            provenance={"agent": "sweep", "round_kind": "sweep",
                        "command": "; ".join(sorted(entry["commands"]))[:1000],
                        "source": "NVIDIA H200 structural-variant measurement "
                                  f"(candidates {', '.join(sorted(entry['labels']))})"[:400]},
        ))
    return records


def main() -> None:
    files = sorted(RESULTS.glob("variants_*_h200.json"))
    by_task = measured(files)
    out = ROOT / "seeds" / "variants_h200.jsonl"
    lines = []
    for task_name, entries in sorted(by_task.items()):
        space = json.loads((ROOT / "benchmarks" / "space" / f"{task_name}_float16.json")
                           .read_text())
        versions = json.loads(files[-1].read_text())["env"]
        env = {**space["env"], "triton_version": versions["triton"],
               "torch_version": versions["torch"]}
        records = build_records(task_name, entries, env)
        lines += [r.model_dump_json(exclude_none=True) for r in records]
        print(f"{task_name}: {len(records)} records from {len(entries)} configurations")
    out.write_text("\n".join(lines) + "\n")
    print(f"{out.relative_to(ROOT)}: {len(lines)} records from {len(files)} files")


if __name__ == "__main__":
    main()
