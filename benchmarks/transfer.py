"""Transfer benchmark: does retrieval over OTHER tasks' experiences speed up a new task?

For each task with a measured space (benchmarks/space/<task>_<dtype>.json), held out in
turn, the real optimizer loop runs with the offline agent against a replay of the space
(benchmarks/replay): (a) cold, retrieval off; (b) transfer, retrieval over a real store
holding the other tasks' experiences only; (c) same-task prior, the task's own space
experiences (NOT cross-task, an upper bound). Same budget, seeds 0..N-1. No GPU needed.

    python -m benchmarks.transfer                    # replay: results/transfer.{md,json,png}
    python -m benchmarks.transfer --confirm          # on the H200: re-time the winners

--confirm re-measures each task's naive config and the replay's winners with the real
sandbox on the GPU and writes results/transfer_confirm.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("transfer")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def run_benchmark(*, space_dir: Path, seeds_dir: Path, out_dir: Path, repeats: int = 5,
                  budget: int = 20, dtype: str = "float16", tasks: Sequence[str] | None = None,
                  arms: Sequence[str] = ("cold", "transfer", "same_task_prior"),
                  epsilon: float = 0.1, command: str = "") -> dict[str, Any]:
    """Replay every arm on every measured task; write transfer.{json,md,png} to out_dir."""
    from benchmarks.replay import report
    from benchmarks.replay.knowledge import ARMS, seed_records
    from benchmarks.replay.space import find_spaces, load_space
    from kernelkb.kernels.discovery import all_tasks

    unknown = sorted(set(arms) - set(ARMS))
    if unknown or repeats < 1:
        raise ValueError(f"arms must be among {ARMS} (got {unknown}) and repeats >= 1")
    notes: list[str] = []
    shown = _shown(space_dir)
    spaces = [load_space(p) for p in find_spaces(space_dir, dtype)]
    measured = {s.task.name for s in spaces}
    wanted = list(tasks) if tasks else sorted(all_tasks())
    for name in wanted:
        if name not in measured:
            notes.append(f"{name}: skipped, no space file {name}_{dtype}.json in "
                         f"{shown} (not measured on the GPU yet)")
    seeds = seed_records(seeds_dir) if set(arms) - {"cold"} else []
    payload: dict[str, Any] = {
        "command": command, "host": f"{platform.node()} ({platform.machine()}, CPU replay)",
        "config": {"repeats": repeats, "budget": budget, "dtype": dtype, "epsilon": epsilon,
                   "arms": list(arms), "seeds_dir": _shown(seeds_dir),
                   "space_dir": shown},
        "tasks": {}, "notes": notes,
    }
    embedder = None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernelkb_transfer_") as tmp:
        for space in spaces:
            name = space.task.name
            if name not in wanted:
                continue
            if space.default_ms is None:
                notes.append(f"{name}: skipped, its naive default config is not timed in "
                             f"{space.path.name}: no speedup can be stated")
                continue
            if embedder is None and set(arms) - {"cold"}:
                from kernelkb.kb.embedder import Embedder

                embedder = Embedder()
            payload["tasks"][name] = _task(space, spaces, seeds, arms, repeats, budget,
                                           epsilon, Path(tmp), embedder)
    payload["wall_s"] = round(time.monotonic() - started, 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    report.write_json(payload, out_dir / "transfer.json")
    report.write_plot(payload, out_dir / "transfer.png")
    report.write_markdown(payload, out_dir / "transfer.md", "transfer.png")
    log.info("wrote %s (%.1f s)", out_dir / "transfer.md", payload["wall_s"])
    return payload


def _shown(path: Path) -> str:
    """A path as the report shows it: relative to the repository when inside it."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _task(space: Any, spaces: list, seeds: list, arms: Sequence[str], repeats: int,
          budget: int, epsilon: float, tmp: Path, embedder: Any) -> dict[str, Any]:
    from benchmarks.replay import aggregate
    from benchmarks.replay.knowledge import HeldOutKnowledge, arm_records, build_store
    from benchmarks.replay.runs import replay_run

    name = space.task.name
    counts = space.counts()
    entry: dict[str, Any] = {
        "space": f"{space.path.name}: {space.env.get('gpu_name')} ({space.env.get('arch')}), "
                 f"Triton {space.env.get('triton_version')}, measured {space.date}; "
                 f"{'complete' if space.complete else 'PARTIAL'}: {counts['timed']} of "
                 f"{counts['grid']} configs timed, {counts['failed']} failed, "
                 f"{counts['untimed']} correct but untimed, {counts['absent']} absent",
        "brute_force": aggregate.brute_force(space), "arms": {}, "curves": {},
        "store_sizes": {}, "runs": {}, "notes": [],
    }
    if not space.complete:
        entry["notes"].append("partial space: 'best known' is the best of the timed configs "
                              "only; an untimed config may be faster")
    traces = {}
    for arm in arms:
        records = arm_records(arm, name, spaces, seeds)
        entry["store_sizes"][arm] = len(records)
        store = None
        if arm != "cold":
            store = build_store(tmp / f"{name}-{arm}", records, embedder)
            if not records:
                entry["notes"].append(
                    f"arm {arm}: NO experiences available (no other task has seeds or a "
                    "measured space yet), so it ran retrieval on an empty store")
        exclude = [name] if arm == "transfer" else []
        traces[arm] = [replay_run(space, arm, seed, budget,
                                  HeldOutKnowledge(store, exclude) if store else None, epsilon)
                       for seed in range(repeats)]
        if store is not None:
            store.close()
        entry["arms"][arm] = aggregate.arm_summary(traces[arm])
        entry["curves"][arm] = aggregate.curve(traces[arm], space.best_ms, budget)
        entry["runs"][arm] = [{"seed": t.seed, "stop_reason": t.stop_reason,
                               "retrieved": t.retrieved, **vars(t.metrics),
                               "trace": [[c.key, c.status, c.time_ms] for c in t.calls]}
                              for t in traces[arm]]
    if "cold" in traces and "transfer" in traces and not entry["store_sizes"]["transfer"]:
        same = aggregate.same_traces(traces["cold"], traces["transfer"])
        entry["notes"].append(
            "transfer arm had no cross-task data, so it must equal cold: the runs evaluated "
            + ("exactly the same candidates in the same order (checked)." if same else
               "DIFFERENT candidates — a bug: retrieval on an empty store changed the run."))
    for arm, summary in entry["arms"].items():
        if summary["unmeasured"]:
            entry["notes"].append(
                f"arm {arm}: {summary['unmeasured']} of {summary['total_evaluations']} "
                "evaluations hit configs the space could not score (counted, scored unknown)")
    return entry


def confirm(results: Path, out_dir: Path, dtype: str) -> dict[str, Any]:
    """Re-time on the GPU each task's naive config and the replay's winners (H200 only)."""
    import torch

    from kernelkb.kernels.discovery import get_task
    from kernelkb.optimizer.sandbox import evaluate, measure_baseline

    if not torch.cuda.is_available():
        raise SystemExit("--confirm needs a CUDA GPU (run it on the H200 through the device "
                         "tool); the replay itself runs anywhere")
    payload = json.loads(results.read_text())
    rows = []
    for name, entry in payload["tasks"].items():
        task = get_task(name)
        from benchmarks.replay.space import load_space

        # the replay's keys: configurations completed with variants added since (load_space)
        space = load_space(ROOT / payload["config"]["space_dir"] / f"{name}_{dtype}.json")
        by_key = space.rows
        keys = [space.default_key]
        for summary in entry["arms"].values():
            keys += [k for k in summary["winners"] if k not in keys]
        baseline = measure_baseline(name, dtype, "representative")
        for key in keys:
            cfg = by_key[key]["config"]
            res = evaluate(name, task.render(cfg), dtype=dtype, shapes="representative",
                           baseline=baseline, timing=True, timeout_s=300)
            rows.append({"task": name, "key": key, "default": key == space.default_key,
                         "replay_ms": by_key[key].get("time_ms"), "gpu_ms": res.time_ms,
                         "ok": res.ok, "error_kind": res.error_kind,
                         "gpu": res.env.get("gpu_name")})
            log.info("%s %s: replay %s ms, now %s ms", name, key, rows[-1]["replay_ms"],
                     res.time_ms)
            _write_confirm(out_dir, results, rows)  # after every row: a cut run keeps its part
    return {"source": str(results), "rows": rows}


def _write_confirm(out_dir: Path, results: Path, rows: list[dict[str, Any]]) -> None:
    out = {"source": str(results), "rows": rows}
    (out_dir / "transfer_confirm.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = ["# Replay winners re-timed on the GPU", "",
             "| task | config | replay (ms) | re-timed (ms) | ratio |", "|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['gpu_ms'] / r['replay_ms']:.3f}" if r["gpu_ms"] and r["replay_ms"] else "-"
        lines.append(f"| {r['task']} | `{r['key']}`{' (naive)' if r['default'] else ''} "
                     f"| {r['replay_ms'] or '-'} | {r['gpu_ms'] or r['error_kind']} | {ratio} |")
    (out_dir / "transfer_confirm.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space-dir", type=Path, default=HERE / "space")
    parser.add_argument("--seeds-dir", type=Path, default=ROOT / "seeds")
    parser.add_argument("--out-dir", type=Path, default=HERE / "results")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=int, default=20, help="evaluations per run")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--arms", nargs="*", default=["cold", "transfer", "same_task_prior"])
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--confirm", action="store_true",
                        help="re-time the winners of the last replay on the GPU")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("optimizer").setLevel(logging.WARNING)
    if args.confirm:
        confirm(args.out_dir / "transfer.json", args.out_dir, args.dtype)
        return
    command = "python -m benchmarks.transfer " + " ".join(sys.argv[1:])
    payload = run_benchmark(space_dir=args.space_dir, seeds_dir=args.seeds_dir,
                            out_dir=args.out_dir, repeats=args.repeats, budget=args.budget,
                            dtype=args.dtype, tasks=args.tasks, arms=args.arms,
                            epsilon=args.epsilon, command=command.strip())
    print((args.out_dir / "transfer.md").read_text())
    for note in payload["notes"]:
        print("note:", note)


if __name__ == "__main__":
    main()
