"""What starting the next worker ahead saves an evaluation: the same small evaluation
repeated in a fresh process per arm, with KERNELKB_PRESTART=0 and =1 alternating, a pause
between evaluations standing for the agent writing its next candidate.

    python benchmarks/prestart_cost.py [--repeats 6] [--pause-s 8] [--rounds 2]

Prints every wall time and, per arm, the median and range of all but each process's
first evaluation (the first has nothing started ahead in either arm).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ONE = """
import json, sys, time
from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import evaluate
source, walls = get_task("softmax").template, []
for _ in range(int(sys.argv[1])):
    began = time.perf_counter()
    result = evaluate("softmax", source, shapes=[(1, 7)], seeds=1, conditions=False)
    walls.append(round(time.perf_counter() - began, 3))
    assert result.ok, result.text
    time.sleep(float(sys.argv[2]))
print(json.dumps(walls))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--pause-s", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {"0": [], "1": []}
    for r in range(args.rounds):
        for arm in ("0", "1") if r % 2 == 0 else ("1", "0"):
            env = {**os.environ, "KERNELKB_PRESTART": arm}
            done = subprocess.run([sys.executable, "-c", ONE, str(args.repeats),
                                   str(args.pause_s)], env=env, capture_output=True,
                                  text=True, check=True)
            got = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"round {r} KERNELKB_PRESTART={arm}: {got}", flush=True)
            walls[arm] += got[1:]
    for arm, name in (("0", "fresh worker"), ("1", "started ahead")):
        w = walls[arm]
        print(f"{name:14s} median {statistics.median(w):.2f} s, range {min(w):.2f}-"
              f"{max(w):.2f} s over {len(w)} evaluations")
    print(f"ratio of medians: {statistics.median(walls['1']) / statistics.median(walls['0']):.2f}")


if __name__ == "__main__":
    main()
