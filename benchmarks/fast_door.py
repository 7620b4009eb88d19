"""The fast door's verdicts on the H200: A/A (the naive kernel against itself) and a
kernel doing twice the work, per task, spread over its regimes, with the GPU alone and
beside a neighbour process running matmuls on it. Every comparison is the sweep's
(optimizer/sweep.py: the judge's interleaved comparison, the sweep's settings).

    python benchmarks/fast_door.py --aa 30 --slower 10 --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkb.kernels.base import get_task  # noqa: E402
from kernelkb.optimizer import sweep  # noqa: E402
from kernelkb.optimizer.sandbox.compare import compare  # noqa: E402

NEIGHBOUR = ("import torch, time\na = torch.randn(8192, 8192, device='cuda', "
             "dtype=torch.float16)\nend = time.time() + 900\nwhile time.time() < end:\n"
             "    a @ a\n    torch.cuda.synchronize()\n")


def run_task(name: str, aa: int, slower: int) -> dict:
    task = get_task(name)
    plan = sweep.SweepPlan.of(name, "float16")
    timer = sweep._Timer(task, "float16")
    default = task.default_config
    regimes = list(plan.regimes.items())
    rows: dict = {"aa": [], "slower": []}
    for i in range(aa + slower):
        regime, shapes = regimes[i % len(regimes)]
        began = time.perf_counter()
        if i < aa:
            c = timer.compare(default, default, shapes)
            kind = "aa"
        else:
            calls = timer.calls(default, shapes)
            twice = {k: (lambda f=f: (f(), f())) for k, f in calls.items()}
            weights = {task.shape_label(s): task.objective_weight(s) for s in shapes}
            c = compare(twice, timer.calls(default, shapes), weights, timer.clock,
                        calls=sweep.CALLS_PER_ROUND, min_rounds=sweep.MIN_ROUNDS,
                        max_rounds=sweep.MAX_ROUNDS, time_cap_s=sweep.TIME_CAP_S).to_dict()
            kind = "slower"
        rows[kind].append({"regime": regime, "outcome": c["outcome"], "ratio": c["ratio"],
                           "low": c["low"], "high": c["high"], "rounds": c["rounds"],
                           "seconds": round(time.perf_counter() - began, 3)})
    return rows


def summary(rows: dict) -> dict:
    aa, slow = rows["aa"], rows["slower"]
    width = [r["high"] / r["low"] for r in aa]
    return {"aa": len(aa), "aa_false": sum(r["outcome"] != "neutral" for r in aa),
            "slower": len(slow), "slower_caught": sum(r["outcome"] == "regressed" for r in slow),
            "median_interval_width": statistics.median(width) if width else None,
            "median_seconds": statistics.median(r["seconds"] for r in aa + slow)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=["softmax", "rmsnorm", "swiglu", "rope",
                                                        "matmul", "attention"])
    parser.add_argument("--aa", type=int, default=30)
    parser.add_argument("--slower", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("fast_door.py needs a CUDA GPU")
    results: dict = {"command": "python benchmarks/fast_door.py " + " ".join(sys.argv[1:]),
                     "gpu": torch.cuda.get_device_name(), "runs": {}}
    for condition in ("alone", "neighbour"):
        neighbour = None
        if condition == "neighbour":
            neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOUR])
            time.sleep(10)
        try:
            for name in args.tasks:
                rows = run_task(name, args.aa, args.slower)
                results["runs"][f"{name}/{condition}"] = {"summary": summary(rows), **rows}
                s = summary(rows)
                args.out.mkdir(parents=True, exist_ok=True)  # kept as it goes
                (args.out / "fast_door_h200.json").write_text(json.dumps(results, indent=1))
                print(f"{name:10s} {condition:9s} A/A {s['aa_false']}/{s['aa']} false · "
                      f"2x work {s['slower_caught']}/{s['slower']} caught · interval width "
                      f"{s['median_interval_width']:.3f} · {s['median_seconds']:.2f} s each",
                      flush=True)
        finally:
            if neighbour is not None:
                neighbour.kill()
                neighbour.wait()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fast_door_h200.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
