"""Measure every point of each task's candidate space on the GPU, once.

Kernel Tuner's simulation mode, for KernelKB: the whole grid of structural variants x
knob values is measured here on the H200 and kept as data under benchmarks/space/, so the
transfer benchmark (benchmarks/transfer.py) can replay an optimizer's choices against it
many times at no GPU cost.

Two phases per task:
1. correctness of every configuration on the edge shapes and the task's representative
   shapes (smallest, median and largest sweep shape by bytes moved), each configuration
   in its own sandboxed subprocess (optimizer.sandbox.evaluate, timing off), many at
   once: compile errors, hangs and edge-shape bugs end there, and every kernel
   specialisation phase 2 needs lands in Triton's on-disk cache, compiled in parallel;
2. in this process, one configuration at a time on an otherwise idle GPU: the output on
   each representative shape checked against the reference computed once per shape,
   then timed with rotated inputs; then a second timing pass in reverse order, keeping
   each shape's lower median: the first pass of the lease measured its early configs
   slow (the naive softmax 0.070 ms there, 0.054 ms re-timed alone), and two passes in
   opposite orders leave no position favoured.

Resumable: the JSON file of a task is rewritten after every timed configuration and a
finished task is skipped, so an interrupted lease continues where it stopped.

    python benchmarks/measure_space.py --tasks softmax rmsnorm --dtype float16 --workers 12
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import torch

from kernelkb.kb.terminal import configure_logging, tracked
from kernelkb.kernels.base import Task
from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import all_tasks
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.shared.atomic import replaced
from kernelkb.kernels.shared.stats import geomean
from kernelkb.optimizer.sandbox import checks, detect_environment, evaluate
from kernelkb.optimizer.sandbox.compiled_info import kernel_resources
from kernelkb.optimizer.sandbox.hardware import measure_peaks
from kernelkb.optimizer.sandbox.timing import measure, rotating

log = logging.getLogger("measure_space")
SPACE_DIR = Path(__file__).resolve().parent / "space"


def check_all(task: Task, dtype: str, configs: list[dict], shapes: list, workers: int,
              done: dict[str, dict]) -> None:
    """Phase 1: every configuration through the sandbox (correctness only), in parallel."""
    todo = [c for c in configs if key(c) not in done
            or done[key(c)].get("error_kind") == "out_of_memory"]

    def one(cfg: dict) -> tuple[dict, dict]:
        res = evaluate(task.name, task.render(cfg), dtype=dtype,
                       shapes=[*task.edge_shapes, *shapes], seeds=1, timing=False,
                       timeout_s=240)
        return cfg, {"config": cfg, "ok": res.ok, "stage": res.stage,
                     "error_kind": res.error_kind, "error_message": res.error_message,
                     "failing_shapes": res.failing_shapes, "max_rel_err": res.max_rel_err,
                     "check_wall_s": round(res.wall_s or 0.0, 1)}

    for attempt, pool_size in enumerate((workers, max(1, workers // 4))):
        with ThreadPoolExecutor(max_workers=pool_size) as pool:
            checked = tracked(pool.map(one, todo), f"{task.name}: check", total=len(todo))
            for i, (cfg, row) in enumerate(checked, 1):
                done[key(cfg)] = row
                log.info("[%s %d/%d] check %s: %s (%.0f s)", task.name, i, len(todo),
                         key(cfg), "ok" if row["ok"] else row["error_kind"],
                         row["check_wall_s"])
        # GPU memory is shared by the parallel sandboxes: an out-of-memory there is the
        # crowd's fault, not the candidate's, so those are checked again with fewer at once
        todo = [c for c in configs if done[key(c)].get("error_kind") == "out_of_memory"]
        if not todo or attempt:
            break
        log.info("%s: %d out-of-memory checks again, %d at a time", task.name, len(todo),
                 max(1, workers // 4))


def time_all(task: Task, dtype: str, shapes: list, rows: dict[str, dict], save) -> None:
    """Phase 2: check and time every configuration that passed phase 1, in this process."""
    tol = task.tolerances[dtype]
    torch_dtype = DTYPES[dtype]
    inputs = {s: [task.make_inputs(s, torch_dtype, seed, "cuda") for seed in range(3)]
              for s in shapes}
    refs = {s: task.reference(*_fresh(task, inputs[s][0])) for s in shapes}
    pending = [r for r in rows.values() if r["ok"] and "times_ms" not in r]
    modules: dict[str, object] = {}  # timed configs, for the reverse pass
    for i, row in enumerate(tracked(pending, f"{task.name}: time"), 1):
        began = time.perf_counter()
        try:
            module = load_candidate(task.render(row["config"]), f"space_{i}")
            times = {}
            for shape in shapes:
                label = task.shape_label(shape)
                stats = checks.compare_outputs(module.run(*_fresh(task, inputs[shape][0])),
                                               refs[shape], tol.atol, tol.rtol)
                problem = stats if isinstance(stats, str) else checks.shape_verdict(
                    stats, tol.max_bias)
                if problem:
                    raise ValueError(f"wrong on ({label}): {problem}")
                median, iqr = measure(rotating(module.run, inputs[shape]))
                times[label] = [median, iqr]
            row["times_ms"] = times
            row["time_ms"] = geomean([t[0] for t in times.values()])
            row["resources"] = kernel_resources(module)
        except Exception as err:  # wrong on a large shape, or failed there
            kind = "wrong_result" if isinstance(err, ValueError) else "runtime_error"
            row.update(ok=False, error_kind=kind, error_message=str(err)[:300])
        log.info("[%s %d/%d] time %s: %s (%.1f s)", task.name, i, len(pending),
                 key(row["config"]),
                 f"{row['time_ms']:.4f} ms" if row.get("time_ms") else row.get("error_kind"),
                 time.perf_counter() - began)
        save()
        if row.get("time_ms"):
            modules[key(row["config"])] = module
    for i, row in enumerate(reversed([r for r in pending if key(r["config"]) in modules]), 1):
        module, first = modules[key(row["config"])], row["time_ms"]
        again = []
        for shape in shapes:
            label = task.shape_label(shape)
            median, iqr = measure(rotating(module.run, inputs[shape]))
            again.append(median)
            if median < row["times_ms"][label][0]:
                row["times_ms"][label] = [median, iqr]
        row["time_ms"] = geomean([t[0] for t in row["times_ms"].values()])
        row["passes_ms"] = [first, geomean(again)]  # forward pass, reverse pass
        log.info("[%s %d/%d] again %s: %.4f, %.4f -> %.4f ms", task.name, i, len(modules),
                 key(row["config"]), first, geomean(again), row["time_ms"])
    save()


def _fresh(task: Task, inputs: tuple) -> tuple:
    """Clones of the inputs the op writes (a KV cache), so every call starts alike."""
    return tuple(x.clone() if i in task.mutated_inputs else x for i, x in enumerate(inputs))


def baseline_times(task: Task, dtype: str, shapes: list) -> dict[str, list[float]]:
    torch_dtype = DTYPES[dtype]
    out = {}
    for shape in shapes:
        sets = [task.make_inputs(shape, torch_dtype, seed, "cuda") for seed in range(3)]
        out[task.shape_label(shape)] = list(measure(rotating(task.reference, sets)))
    return out


def _fit_workers(task: Task, dtype: str, shapes: list, workers: int) -> int:
    """As many sandboxes as the GPU's memory holds: each keeps inputs, output, reference
    and snapshots of the largest shape alive, about five times its bytes moved."""
    need = 5 * max(task.bytes_moved(s, DTYPES[dtype]) for s in shapes)
    free, _ = torch.cuda.mem_get_info()
    fit = max(1, min(workers, int(0.8 * free / need)))
    if fit < workers:
        log.info("%s: %d parallel checks (%.1f GB each at most)", task.name, fit, need / 1e9)
    return fit


def key(cfg: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(cfg.items()))


def measure_task(task: Task, dtype: str, workers: int, peaks: dict, command: str) -> Path:
    path = SPACE_DIR / f"{task.name}_{dtype}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    if data.get("complete") and not any(r.get("error_kind") == "out_of_memory"
                                        for r in data.get("configs", [])):
        log.info("%s: already complete, skipped", path.name)
        return path
    shapes = list(task.shapes("representative"))
    configs = list(task.space())
    rows: dict[str, dict] = {r["key"]: r for r in data.get("configs", [])}
    default_key = key(task.default_config)

    def save(complete: bool = False) -> None:
        payload = {
            "task": task.name, "op_type": task.op_type, "dtype": dtype,
            "shapes": [task.shape_label(s) for s in shapes], "default": default_key,
            "env": detect_environment(peaks), "peaks": peaks,
            "baseline_ms": data.get("baseline_ms"), "command": command,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "space_size": len(configs), "complete": complete,
            "configs": [{"key": k, **r} for k, r in rows.items()],
        }
        with replaced(path) as tmp:
            tmp.write_text(json.dumps(payload, indent=1))

    started = time.time()
    check_all(task, dtype, configs, shapes, _fit_workers(task, dtype, shapes, workers), rows)
    save()
    if not data.get("baseline_ms"):
        data["baseline_ms"] = baseline_times(task, dtype, shapes)
    time_all(task, dtype, shapes, rows, save)
    save(complete=True)
    ok = [r for r in rows.values() if r.get("time_ms")]
    best = min(ok, key=lambda r: r["time_ms"]) if ok else None
    log.info("%s: %d configs, %d timed, best %s (%.4f ms) in %.0f s", task.name, len(configs),
             len(ok), best and key(best["config"]), best["time_ms"] if best else float("nan"),
             time.time() - started)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--workers", type=int, default=12)
    args = parser.parse_args()
    # per-configuration lines always; a bar on a terminal only (kb/terminal.py)
    configure_logging(fmt="%(asctime)s %(message)s", own=("measure_space",))
    if not torch.cuda.is_available():
        sys.exit("measure_space needs a CUDA GPU (run it on the H200 through the device tool)")
    SPACE_DIR.mkdir(exist_ok=True)
    peaks = measure_peaks()
    command = "python benchmarks/measure_space.py " + " ".join(sys.argv[1:])
    tasks = all_tasks()
    for name in args.tasks or sorted(tasks):
        measure_task(tasks[name], args.dtype, args.workers, peaks, command)


if __name__ == "__main__":
    main()
