"""What a torch.profiler (CUPTI) session costs in a fresh process: the first one against
the ones after it. Why: the evaluator reads the GPU's own timestamps (kernel_clock.py) in
the candidate's worker, a fresh process every evaluation, so the first session's start is
paid on every evaluation that reads them. Run on a GPU host:

    python benchmarks/cupti_start.py [--sessions 4]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile


def one_session(call, calls: int = 10) -> dict[str, float]:
    """Seconds to enter, run, leave and read one session, and the kernels it saw."""
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t1 = time.perf_counter()
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
    t3 = time.perf_counter()
    kernels = sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)
    return {"enter_s": t1 - t0, "calls_s": t2 - t1, "exit_s": t3 - t2,
            "read_s": time.perf_counter() - t3, "kernels": kernels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=4)
    args = parser.parse_args()
    x = torch.randn(4096, 4096, device="cuda")

    def call() -> torch.Tensor:
        return torch.softmax(x, -1)

    call()
    torch.cuda.synchronize()
    print(f"# CUPTI sessions in one fresh process on {torch.cuda.get_device_name()}")
    for i in range(args.sessions):
        s = one_session(call)
        print(f"session {i}: enter {s['enter_s']:.3f} s, calls {s['calls_s']:.3f} s, "
              f"exit {s['exit_s']:.3f} s, read {s['read_s']:.3f} s, {s['kernels']} kernels",
              flush=True)


if __name__ == "__main__":
    main()
