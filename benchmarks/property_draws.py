"""The judge's property-based draw (optimizer/sandbox/properties.py) over honest kernels:
each task's naive kernel and the shipped runs' best kernels, with many drawn cases each.
A failure here is a kernel bug real callers would meet, or a draw the op does not admit.

    TRITON_INTERPRET=1 python benchmarks/property_draws.py [--examples 12] [--runs benchmarks/runs]
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import time
from pathlib import Path

from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.optimizer.sandbox.runner import run_worker


def one(task_name: str, source: str, examples: int, shapes: list | None = None) -> dict:
    task = get_task(task_name)
    request = {"mode": "evaluate", "task": task_name, "source": source, "dtype": "float16",
               "shapes": [list(s) for s in (shapes or task.cpu_shapes)], "seeds": 1,
               "timing": False, "seed_base": secrets.randbelow(2**30), "conditions": True,
               "refuse_introspection": True, "refuse_surroundings": True,
               "parent_timings": {}, "parent_source": None, "settle_s": 0.0,
               "gpu_timestamps": "none", "peaks": {}, "property_examples": examples}
    began = time.monotonic()
    data = run_worker(request, timeout_s=1200, use_gpu=False, mem_limit_mb=None).data
    return {"ok": data.get("error_kind") is None, "kind": data.get("error_kind"),
            "message": (data.get("error_message") or "")[:400],
            "property": (data.get("judge") or {}).get("property"),
            "s": round(time.monotonic() - began, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=12)
    parser.add_argument("--runs", type=Path, default=Path("benchmarks/runs"))
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--best", action="store_true", help="the runs' best kernels too")
    args = parser.parse_args()
    names = args.tasks or list(all_tasks())
    kernels = [(n, "naive", get_task(n).template) for n in names]
    if args.best:
        for path in sorted(args.runs.glob("*/best_*.py")):
            name = re.fullmatch(r"best_(\w+)\.py", path.name).group(1)
            if name in names:
                kernels.append((name, path.parent.name, path.read_text()))
    for name, where, source in kernels:
        print(json.dumps({"task": name, "kernel": where, **one(name, source, args.examples)}),
              flush=True)


if __name__ == "__main__":
    main()
