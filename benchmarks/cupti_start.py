"""What reading the GPU's own timestamps costs in a fresh process: the first session
against the ones after it, for each reader (kernel_clock.py: the CUPTI bindings, or
torch.profiler). Why: the evaluator reads them in the candidate's worker, a fresh process
every evaluation, so the first session's start is paid on every evaluation that reads
them. Each reader runs in a process of its own, the readers alternating. Run on a GPU
host:

    python benchmarks/cupti_start.py [--sessions 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

ONE = """
import json, sys, time
import torch
from kernelkb.optimizer.sandbox import kernel_clock
x = torch.randn(4096, 4096, device="cuda")
call = lambda: torch.softmax(x, -1)
call(); torch.cuda.synchronize()
for _ in range(int(sys.argv[2])):
    began = time.perf_counter()
    reading = kernel_clock.read(call, reader=sys.argv[1])
    print(json.dumps({"session_s": time.perf_counter() - began,
                      "reader": reading and reading.reader,
                      "busy_ms": reading and reading.busy_ms,
                      "kernels": sorted(reading.kernels) if reading else None}), flush=True)
"""


def fresh_process(reader: str, sessions: int) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", ONE, reader, str(sessions)],
                          capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not rows:
        raise SystemExit(f"{reader}: rc {done.returncode}\n{done.stderr[-2000:]}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=4, help="per process")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per reader")
    parser.add_argument("--readers", nargs="+", default=["cupti", "profiler"])
    args = parser.parse_args()
    import torch

    print(f"# GPU-timestamp sessions, fresh process each, on {torch.cuda.get_device_name()}")
    first: dict[str, list[float]] = {r: [] for r in args.readers}
    later: dict[str, list[float]] = {r: [] for r in args.readers}
    t0 = time.monotonic()
    for rnd in range(args.rounds):
        order = args.readers if rnd % 2 == 0 else args.readers[::-1]
        for reader in order:
            rows = fresh_process(reader, args.sessions)
            first[reader].append(rows[0]["session_s"])
            later[reader] += [r["session_s"] for r in rows[1:]]
            print(f"[{time.monotonic() - t0:5.0f} s] round {rnd} {reader}: read by "
                  f"{rows[0]['reader']}, sessions (s) "
                  f"{[round(r['session_s'], 4) for r in rows]}, busy ms "
                  f"{[round(r['busy_ms'] or 0, 4) for r in rows]}, kernels "
                  f"{rows[0]['kernels']}", flush=True)
    for reader in args.readers:
        f, rest = first[reader], later[reader] or [float("nan")]
        print(f"{reader}: first session median {statistics.median(f):.3f} s "
              f"[{min(f):.3f}, {max(f):.3f}] over {len(f)} processes; later sessions "
              f"median {statistics.median(rest) * 1e3:.1f} ms "
              f"[{min(rest) * 1e3:.1f}, {max(rest) * 1e3:.1f}]")

if __name__ == "__main__":
    main()
