"""What one evaluation costs, this checkout against an earlier one, side by side.

    git worktree add .out/base b41f618^      # the evaluator before the judge's process
    python benchmarks/eval_cost.py --base .out/base [--tasks softmax ...] [--repeats 3]

Per task and repeat, each checkout evaluates the task's naive kernel against itself the
way the loop judges a candidate (``evaluate(..., parent=, parent_source=)`` on the
representative shapes, one seed), each in a fresh Python process, the two checkouts
alternating and the order flipped every repeat so that drift reaches both. The figure is
the wall time of the judged evaluation alone (the parent's own evaluation, made first in
the same process, is not counted). Prints every figure, the medians and the ratio; writes
``eval_cost_<gpu>.json`` and ``.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE = """
import json, sys, time
try:
    from kernelkb.kernels.base import get_task
    from kernelkb.optimizer.sandbox import evaluate
except ImportError:  # a checkout from before the kernelkb package folder
    from kernels.base import get_task
    from optimizer.sandbox import evaluate
task = sys.argv[1]
naive = get_task(task).template
parent = evaluate(task, naive, shapes="representative", seeds=1)
began = time.perf_counter()
result = evaluate(task, naive, shapes="representative", seeds=1, parent=parent,
                  parent_source=naive)
print(json.dumps({"wall_s": time.perf_counter() - began, "ok": result.ok,
                  "error": None if result.ok else f"{result.error_kind}: {result.error_message}",
                  "worker_laps_s": json.loads(result.artifacts.get("wall_s") or "{}"),
                  "worker_process_s": result.wall_s,
                  "interpreter_wait_s": result.artifacts.get("interpreter_wait_s"),
                  "judge": getattr(result, "judge", None)}))
"""


def one(tree: Path, task: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (os.environ.get("PYTHONPATH", "").replace(str(ROOT), str(tree)), str(tree))
        if p)}
    done = subprocess.run([sys.executable, "-c", ONE, task], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"wall_s": None, "ok": False, "error": done.stderr[-600:]}
    return json.loads(lines[-1])


def markdown(report: dict) -> str:
    """The table: per task, each checkout's median and range of wall seconds."""
    commands = " then ".join(f"`{c}`" for c in report["commands"])
    lines = [f"# Cost per evaluation on {report['gpu']}: this checkout vs {report['base']}", "",
             f"{commands}: the naive kernel judged against itself, wall seconds of the judged "
             "evaluation, fresh process each, the two checkouts alternating.", "",
             "| task | base median [range] | this median [range] | ratio of medians | runs |",
             "|---|---|---|---|---|"]
    for task, by_arm in report["rows"].items():
        meds, cells = {}, []
        for arm in ("base", "this"):
            walls = [e["wall_s"] for e in by_arm[arm] if e["ok"] and e["wall_s"]]
            meds[arm] = statistics.median(walls) if walls else None
            cells.append(f"{meds[arm]:.2f} s [{min(walls):.2f}, {max(walls):.2f}]" if walls
                         else "failed")
        ratio = f"{meds['this'] / meds['base']:.2f}x" if meds["base"] and meds["this"] else "-"
        lines.append(f"| {task} | {cells[0]} | {cells[1]} | {ratio} | "
                     f"{len(by_arm['base'])} + {len(by_arm['this'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="the earlier checkout")
    parser.add_argument("--tasks", nargs="+", default=["softmax", "rmsnorm", "matmul"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    base = args.base.resolve()
    if not (base / "optimizer" / "sandbox").is_dir():
        raise SystemExit(f"--base {base}: not a checkout of this project")
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    named = base / "REVISION"  # written beside the archive (see above)
    revision = named.read_text().strip() if named.is_file() else base.name
    arms = {"base": base, "this": ROOT}
    rows: dict[str, dict[str, list]] = {t: {a: [] for a in arms} for t in args.tasks}
    t0 = time.monotonic()
    for task in args.tasks:
        for r in range(args.repeats):
            order = list(arms) if r % 2 == 0 else list(arms)[::-1]
            for arm in order:
                entry = one(arms[arm], task)
                rows[task][arm].append(entry)
                laps = entry.get("worker_laps_s") or {}
                print(f"    worker steps (s): {laps}", flush=True)
                print(f"    worker process {entry.get('worker_process_s')} s, then waited "
                      f"{entry.get('interpreter_wait_s') or '-'} s for the interpreter pass; "
                      f"judge (s): {(entry.get('judge') or {}).get('laps_s')}", flush=True)
                print(f"[{time.monotonic() - t0:6.0f} s] {task} repeat {r} {arm}: "
                      f"{entry['wall_s'] if entry['wall_s'] is None else round(entry['wall_s'], 2)}"
                      f" s{'' if entry['ok'] else ' FAILED ' + str(entry['error'])[:300]}",
                      flush=True)
    report = {"gpu": gpu, "base": revision, "commands": ["python benchmarks/eval_cost.py "
              + " ".join(sys.argv[1:] if argv is None else argv)], "rows": rows}
    text = markdown(report)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    slug = gpu.lower().replace("nvidia ", "").replace(" ", "_")
    (args.out / f"eval_cost_{slug}.json").write_text(json.dumps(report, indent=1))
    (args.out / f"eval_cost_{slug}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
