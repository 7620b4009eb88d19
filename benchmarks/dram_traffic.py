"""DRAM traffic per kernel, ours against the checked peers: hardware counters through
torch.profiler (CUPTI), the NCU-style figures that say why a kernel misses the copy
bandwidth.

For each case (task, shape, one of our configurations) every implementation is checked
against the task's reference on the shape, run once to compile and warm, then run once
under the profiler with per-kernel counters: DRAM bytes read and written, L2 hit rate,
duration. Printed per implementation: bytes read / the op's input bytes and bytes
written / its output bytes (1.00 = each byte once), and the achieved bandwidth.

    python benchmarks/dram_traffic.py                      # the built-in cases below
    python benchmarks/dram_traffic.py --case 'rmsnorm|rows=4096,hidden=8192|{"NUM_WARPS": 8}'

Needs a CUDA GPU and counters the driver lets this user read (containers often refuse
them: the script then says so and exits 3). Writes dram_traffic_<gpu>.{json,md} to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels.base import DTYPES, get_task, load_candidate  # noqa: E402
from kernels.peers import Peer, peers_for  # noqa: E402
from optimizer.peers import check_peer  # noqa: E402

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sector_hit_rate.pct",
           "gpu__time_duration.sum")
# the misses the README explains: long-row softmax through the table and at its best
# shape configuration, and RMSNorm on many rows against torch.compile
CASES = (
    'softmax|rows=1024,cols=128256|{"LONG_ROW_BLOCK": 16384, "NUM_WARPS": 16, "L2_HINTS": true}',
    'softmax|rows=1024,cols=128256|{"LONG_ROW_BLOCK": 16384, "NUM_WARPS": 16}',
    'softmax|rows=4096,cols=32768|{"LONG_ROW_BLOCK": 16384, "NUM_WARPS": 16, "L2_HINTS": true}',
    'softmax|rows=4096,cols=32768|{"LONG_ROW_BLOCK": 16384, "NUM_WARPS": 8, "L2_HINTS": true}',
    'rmsnorm|rows=65536,hidden=8192|{}',
)


def parse_case(text: str) -> tuple[str, str, dict[str, Any]]:
    name, shape, config = text.split("|", 2)
    return name, shape, json.loads(config)


def implementations(task: Any, config: dict[str, Any]) -> dict[str, Any]:
    ours = load_candidate(task.render({**task.default_config, **config}), "dram_ours")
    impls: dict[str, Any] = {"ours": Peer("ours", ours.run, "ours")}
    impls.update(peers_for(task))
    return impls


def counters(call: Any) -> list[dict[str, Any]]:
    """Per-kernel counter values of one call, from the profiler's trace."""
    from torch.profiler import ProfilerActivity, profile

    config = torch._C._profiler._ExperimentalConfig(profiler_metrics=list(METRICS),
                                                     profiler_measure_per_kernel=True)
    with profile(activities=[ProfilerActivity.CUDA], experimental_config=config) as prof:
        call()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        events = json.loads(Path(path).read_text()).get("traceEvents", [])
    kernels = []
    for event in events:
        args = event.get("args") or {}
        values = {m: args[m] for m in METRICS if m in args}
        if values:
            kernels.append({"kernel": event.get("name", "?")[:80], **values})
    return kernels


def measure(text: str) -> list[dict[str, Any]]:
    name, label, config = parse_case(text)
    task = get_task(name)
    shape = task.parse_shape(label)
    dtype = DTYPES["float16"]
    inputs = task.make_inputs(shape, dtype, 0, "cuda")
    in_bytes = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
    out_bytes = task.bytes_moved(shape, dtype) - in_bytes
    rows = []
    for impl_name, impl in implementations(task, config).items():
        row: dict[str, Any] = {"task": name, "shape": label, "config": config,
                               "impl": impl_name}
        reason = check_peer(task, impl, "float16", shape)
        if reason:
            rows.append({**row, "error": f"dropped: {reason}"})
            continue
        for _ in range(3):
            impl.fn(*inputs)
        torch.cuda.synchronize()
        try:
            kernels = counters(lambda fn=impl.fn, args=inputs: fn(*args))
        except Exception as err:  # noqa: BLE001 - counters refused or unsupported here
            kernels, why = [], f"{type(err).__name__}: {err}"[:200]
        else:
            why = "the trace carried none (the driver refused them?)"
        if not kernels:
            rows.append({**row, "error": f"no counters: {why}"})
            print(json.dumps(rows[-1]), flush=True)
            continue
        read = sum(k.get("dram__bytes_read.sum", 0) for k in kernels)
        write = sum(k.get("dram__bytes_write.sum", 0) for k in kernels)
        ns = sum(k.get("gpu__time_duration.sum", 0) for k in kernels)
        rows.append({**row, "kernels": kernels, "dram_read": read, "dram_write": write,
                     "read_over_input": read / in_bytes, "write_over_output": write / out_bytes,
                     "gpu_us": ns / 1e3, "achieved_gbps": (read + write) / ns if ns else None})
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "kernels"}), flush=True)
    return rows


def markdown(rows: list[dict[str, Any]], gpu: str, command: str) -> str:
    lines = [f"# DRAM traffic per kernel on {gpu}", "",
             f"`{command}`: counters from torch.profiler (CUPTI), one call each, after the "
             "reference check and a warm-up. read / input and write / output: 1.00 = every "
             "byte once.", "",
             "| task | shape | our config | implementation | DRAM read / input | DRAM write / "
             "output | L2 hit % | GPU µs | GB/s |", "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        config = json.dumps(r["config"]) if r["impl"] == "ours" else ""
        if "error" in r:
            lines.append(f"| {r['task']} | {r['shape']} | {config} | {r['impl']} | "
                         f"{r['error'][:120]} | | | | |")
            continue
        hits = [k["lts__t_sector_hit_rate.pct"] for k in r["kernels"]
                if "lts__t_sector_hit_rate.pct" in k]
        hit = f"{sum(hits) / len(hits):.1f}" if hits else "–"
        lines.append(f"| {r['task']} | {r['shape']} | {config} | {r['impl']} | "
                     f"{r['read_over_input']:.2f} | {r['write_over_output']:.2f} | {hit} | "
                     f"{r['gpu_us']:.1f} | {r['achieved_gbps'] or 0:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", default=None,
                        help="task|shape label|our config as JSON (repeatable)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or
                                                         Path(__file__).parent / "results"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("dram_traffic: needs a CUDA GPU (hardware counters)", file=sys.stderr)
        return 2
    rows = []
    for case in args.case or CASES:
        rows += measure(case)
    gpu = torch.cuda.get_device_name()
    command = "python benchmarks/dram_traffic.py " + " ".join(sys.argv[1:])
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"dram_traffic_{gpu.split()[-1].lower()}"
    stem.with_suffix(".json").write_text(json.dumps(
        {"gpu": gpu, "command": command, "rows": rows,
         "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}, indent=1))
    text = markdown(rows, gpu, command)
    stem.with_suffix(".md").write_text(text)
    print(text)
    return 0 if any("error" not in r for r in rows) else 3


if __name__ == "__main__":
    sys.exit(main())
