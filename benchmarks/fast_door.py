"""The fast door's verdicts on the H200: A/A (the naive kernel against itself) and a
kernel doing twice the work, per task, spread over its regimes, with the GPU alone and
beside a neighbour process running matmuls on it. Every comparison is the sweep's: shared
rounds over the regime (optimizer/space_timing.py) with the sweep's settings, ``--space``
configurations of the task's space timed in the same rounds as a sweep would.

    python benchmarks/fast_door.py --aa 30 --slower 10 --space 8 --out benchmarks/results
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

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer import space_timing, sweep

NEIGHBOUR = ("import torch, time\na = torch.randn(8192, 8192, device='cuda', "
             "dtype=torch.float16)\nend = time.time() + 900\nwhile time.time() < end:\n"
             "    a @ a\n    torch.cuda.synchronize()\n")


def run_task(name: str, aa: int, slower: int, space: int) -> dict:
    """Per regime, in one set of shared rounds: copies of the naive kernel paired with each
    other (A/A), the naive kernel doing its work twice paired with a copy (known slower),
    and ``space`` configurations of the task's space beside them, as a sweep times them."""
    task = get_task(name)
    plan = sweep.SweepPlan.of(name, "float16")
    timer = sweep._Timer(task, "float16")
    default = task.default_config
    extra = [c for c in task.space() if c != default][:space]
    regimes = list(plan.regimes.items())
    rows: dict = {"aa": [], "slower": [], "rounds": []}
    for i, (regime, shapes) in enumerate(regimes):
        n_aa = aa // len(regimes) + (i < aa % len(regimes))
        n_slow = slower // len(regimes) + (i < slower % len(regimes))
        arms = {f"naive{j}": timer.calls(default, shapes) for j in range(2 * n_aa + n_slow)}
        for j in range(n_slow):
            calls = timer.calls(default, shapes)
            arms[f"twice{j}"] = {k: (lambda f=f: (f(), f())) for k, f in calls.items()}
        arms.update({sweep.key(c): timer.calls(c, shapes) for c in extra})
        pairs = [(f"naive{2 * j + 1}", f"naive{2 * j}") for j in range(n_aa)]
        pairs += [(f"twice{j}", f"naive{2 * n_aa + j}") for j in range(n_slow)]
        pairs += [(sweep.key(c), "naive0") for c in extra]
        began = time.perf_counter()
        timed = space_timing.measure(arms, pairs, timer.weights(shapes), timer.clock,
                                     calls=sweep.CALLS_PER_ROUND, min_rounds=sweep.MIN_ROUNDS,
                                     max_rounds=sweep.MAX_ROUNDS,
                                     time_cap_s=sweep.TIME_CAP_S * len(pairs))
        rows["rounds"].append({"regime": regime, "arms": len(arms), "pairs": len(pairs),
                               "rounds": timed.rounds, "calls": timed.calls,
                               "seconds": round(time.perf_counter() - began, 3)})
        for (cand, _), c in timed.comparisons.items():
            kind = "aa" if cand.startswith("naive") else "slower" if cand.startswith(
                "twice") else None
            if kind:
                rows[kind].append({"regime": regime, "outcome": c.outcome.value,
                                   "ratio": c.ratio, "low": c.low, "high": c.high,
                                   "rounds": c.rounds, "seconds": c.seconds})
    return rows


def summary(rows: dict) -> dict:
    aa, slow = rows["aa"], rows["slower"]
    width = [r["high"] / r["low"] for r in aa]
    return {"aa": len(aa), "aa_false": sum(r["outcome"] != "neutral" for r in aa),
            "slower": len(slow), "slower_caught": sum(r["outcome"] == "regressed" for r in slow),
            "median_interval_width": statistics.median(width) if width else None,
            "pairs_per_second": sum(r["pairs"] for r in rows["rounds"]) /
            max(1e-9, sum(r["seconds"] for r in rows["rounds"]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=["softmax", "rmsnorm", "swiglu", "rope",
                                                        "matmul", "attention"])
    parser.add_argument("--aa", type=int, default=30)
    parser.add_argument("--slower", type=int, default=10)
    parser.add_argument("--space", type=int, default=8,
                        help="configurations of the space timed in the same rounds (each "
                             "compiles first: at 30, softmax alone ran past a 190 s window "
                             "on the H200)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("fast_door.py needs a CUDA GPU")
    results: dict = {"command": "python benchmarks/fast_door.py " + " ".join(sys.argv[1:]),
                     "gpu": torch.cuda.get_device_name(), "runs": {}}
    # per task alone, then beside the neighbour: a run the budget cuts short still holds
    # both conditions for the tasks it reached
    for name in args.tasks:
        for condition in ("alone", "neighbour"):
            neighbour = None
            if condition == "neighbour":
                neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOUR])
                time.sleep(10)
            try:
                rows = run_task(name, args.aa, args.slower, args.space)
            finally:
                if neighbour is not None:
                    neighbour.kill()
                    neighbour.wait()
            s = summary(rows)
            results["runs"][f"{name}/{condition}"] = {"summary": s, **rows}
            args.out.mkdir(parents=True, exist_ok=True)  # kept as it goes
            (args.out / "fast_door_h200.json").write_text(json.dumps(results, indent=1))
            print(f"{name:10s} {condition:9s} A/A {s['aa_false']}/{s['aa']} false · "
                  f"2x work {s['slower_caught']}/{s['slower']} caught · interval width "
                  f"{s['median_interval_width']:.3f} · {s['pairs_per_second']:.1f} pairs/s",
                  flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fast_door_h200.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
