"""Where the worker spends an evaluation's time: one task's naive kernel checked (and, on
a GPU, timed) in this process, with the evaluator's rules off and then on, then once
more with the rules on under cProfile.

    python benchmarks/profile_worker.py softmax [--shapes representative] [--repeats 3]

In-process, without the jail or the judge. The rules are the introspection hook and the
surroundings readers (introspection.py, surroundings.py); once installed they stay for
the process's life, so every "off" run comes before every "on" run, after one run that
compiles the kernel. Prints each run's laps, the median per lap for each arm, and the
functions by own and by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import tempfile
import time
from pathlib import Path

import torch

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import kernel_clock
from kernelkb.optimizer.sandbox.worker import Worker


def check_once(task: str, shapes: list[list[int]], result: Path, rules: bool) -> dict:
    request = {"task": task, "dtype": "float16", "shapes": shapes, "seeds": 1,
               "source": get_task(task).template, "result_path": str(result),
               "timing": torch.cuda.is_available(), "settle_s": 0.5,
               "gpu_timestamps": kernel_clock.preference(),
               "refuse_introspection": rules, "refuse_surroundings": rules}
    Worker(request).evaluate()
    out = json.loads(result.read_text())
    if out.get("error_kind"):
        raise SystemExit(f"the naive kernel failed: {out['error_kind']}: "
                         f"{out.get('error_message')}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task")
    parser.add_argument("--shapes", default="representative",
                        choices=["representative", "cpu", "edge", "tune"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    shapes = [list(s) for s in get_task(args.task).shapes(args.shapes)]
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        check_once(args.task, shapes, result, rules=False)  # compiles
        laps: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
        for arm in ("off", "on"):
            for i in range(args.repeats):
                began = time.perf_counter()
                out = check_once(args.task, shapes, result, rules=arm == "on")
                laps[arm].append({**out["wall_s"], "total": time.perf_counter() - began})
                print(f"rules {arm} #{i}: {json.dumps(laps[arm][-1])}", flush=True)
        print("\nmedian seconds per lap (rules off | on):")
        for name in laps["on"][0]:
            off = statistics.median(run.get(name, 0.0) for run in laps["off"])
            on = statistics.median(run.get(name, 0.0) for run in laps["on"])
            print(f"  {name:45s} {off:7.3f} | {on:7.3f}")
        profile = cProfile.Profile()
        profile.runcall(check_once, args.task, shapes, result, True)
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
