"""DRAM traffic per kernel, ours against the checked peers: hardware counters from
Nsight Compute (``ncu``), the figures that say why a kernel misses the copy bandwidth.

For each case (task, shape, one of our configurations) every implementation is checked
against the task's reference on the shape, run to compile and warm, then once more with
ncu collecting per-kernel counters (this script runs itself under ncu, which profiles only
that call): DRAM bytes read and written, L2 hit rate, duration. Printed per
implementation: bytes read / the op's input bytes and bytes written / its output bytes
(1.00 = each byte once), and the achieved bandwidth.

    python benchmarks/dram_traffic.py                      # the built-in cases below
    python benchmarks/dram_traffic.py --case 'rmsnorm|rows=4096,hidden=8192|{"NUM_WARPS": 8}'

Needs a CUDA GPU, ``ncu`` and counters the driver lets this user read (the script says
what ncu said and exits 3 when none came back; torch.profiler's CUPTI metrics gave none on
the lent H200). Writes dram_traffic_<gpu>.{json,md} to --out.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, peers_for
from kernelkb.optimizer.peers import check_peer

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


def run_child(cases: list[str]) -> None:
    """Under ncu: each checked implementation's one measured call inside an NVTX range
    named ``case|impl`` and between profiler start and stop (ncu profiles only those
    kernels and names them by the range). What it says goes to stderr, as ``KKB {json}``."""
    for index, text in enumerate(cases):
        name, label, config = parse_case(text)
        task = get_task(name)
        shape = task.parse_shape(label)
        inputs = task.make_inputs(shape, DTYPES["float16"], 0, "cuda")
        for impl_name, impl in implementations(task, config).items():
            reason = check_peer(task, impl, "float16", shape)
            if reason:
                print("KKB " + json.dumps({"case": index, "impl": impl_name,
                                           "error": f"dropped: {reason}"}), file=sys.stderr)
                continue
            for _ in range(3):
                impl.fn(*inputs)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(f"{index}|{impl_name}")
            torch.cuda.profiler.start()
            impl.fn(*inputs)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            torch.cuda.nvtx.range_pop()
            print("KKB " + json.dumps({"case": index, "impl": impl_name}), file=sys.stderr,
                  flush=True)


def run_ncu(ncu: str, cases: list[str], raw: Path) -> None:
    """Runs this script's child under ncu; its page (CSV) and log go to ``raw`` and
    ``raw``.log, which ``read_ncu`` reads (also later, without a GPU: ``--reparse``)."""
    cmd = [ncu, "--profile-from-start", "off", "--nvtx", "--print-nvtx-rename", "kernel",
           "--csv", "--page", "raw", "--print-units", "base", "--metrics", ",".join(METRICS),
           sys.executable, __file__, "--child", *[a for c in cases for a in ("--case", c)]]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    raw.write_text(done.stdout)
    raw.with_suffix(".log").write_text(done.stderr)


def read_ncu(raw: Path) -> tuple[dict, dict, str]:
    """(case, impl) -> metrics summed over its kernels, (case, impl) -> why it has none,
    and ncu's last words. ncu names a kernel ``case|impl/kernel`` (the NVTX range)."""
    log = raw.with_suffix(".log").read_text() if raw.with_suffix(".log").exists() else ""
    errors = {}
    for line in log.splitlines():
        if line.startswith("KKB "):
            item = json.loads(line[4:])
            if "error" in item:
                errors[(item["case"], item["impl"])] = item["error"]
    lines = [ln for ln in raw.read_text().splitlines() if ln.startswith('"')]
    found: dict[tuple[int, str], dict[str, Any]] = {}
    if lines:
        rows = list(csv.reader(lines))
        head = rows[0]
        for row in rows[2:]:  # the second line gives the units
            item = dict(zip(head, row, strict=False))
            case, _, rest = item.get("Kernel Name", "").partition("|")
            if not case.isdigit():
                continue
            entry = found.setdefault((int(case), rest.split("/", 1)[0]), {"kernels": 0})
            entry["kernels"] += 1
            for metric in METRICS:
                value = item.get(metric, "").replace(",", "")
                if value:
                    if metric.endswith(".pct"):
                        entry.setdefault("hit_rates", []).append(float(value))
                    else:
                        entry[metric] = entry.get(metric, 0.0) + float(value)
    tail = " / ".join([ln for ln in log.splitlines() if not ln.startswith("KKB ")][-3:])
    return found, errors, tail


def measure(cases: list[str], raw: Path) -> list[dict[str, Any]]:
    """Rows of the table from ncu's page: per implementation, its DRAM bytes against the
    op's input and output bytes."""
    found, errors, tail = read_ncu(raw)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    for index, text in enumerate(cases):
        name, label, config = parse_case(text)
        task = get_task(name)
        shape = task.parse_shape(label)
        dtype = DTYPES["float16"]
        in_bytes = sum(t.numel() * t.element_size()
                       for t in task.make_inputs(shape, dtype, 0, device)
                       if isinstance(t, torch.Tensor))
        out_bytes = task.bytes_moved(shape, dtype) - in_bytes
        # the implementations that run had (ours first), in the order it ran them
        names = [i for c, i in (*found, *errors) if c == index]
        for impl_name in dict.fromkeys(["ours", *names]):
            row: dict[str, Any] = {"task": name, "shape": label, "config": config,
                                   "impl": impl_name}
            got = found.get((index, impl_name))
            if got is None:
                row["error"] = errors.get((index, impl_name)) or f"no counters ({tail})"
                rows.append(row)
                continue
            read = got.get("dram__bytes_read.sum", 0.0)
            write = got.get("dram__bytes_write.sum", 0.0)
            ns = got.get("gpu__time_duration.sum", 0.0)
            hits = got.get("hit_rates", [])
            rows.append({**row, "kernels": got["kernels"], "dram_read": read, "dram_write": write,
                         "read_over_input": read / in_bytes, "write_over_output": write / out_bytes,
                         "l2_hit_pct": sum(hits) / len(hits) if hits else None,
                         "gpu_us": ns / 1e3, "achieved_gbps": (read + write) / ns if ns else None})
    return rows


def markdown(rows: list[dict[str, Any]], gpu: str, command: str) -> str:
    lines = [f"# DRAM traffic per kernel on {gpu}", "",
             f"`{command}`: hardware counters from Nsight Compute (`ncu`), one call each, "
             "after the reference check and a warm-up; several kernels of one call are "
             "summed (L2 hit rate: their mean). read / input and write / output: 1.00 = "
             "every byte once. ncu runs with its defaults (caches flushed, clocks locked to "
             "base), so its durations are longer than those of the timing runs; the page "
             "it wrote is kept beside this file (`_ncu.csv`, `_ncu.log`; `--reparse` "
             "rebuilds this table from it).", "",
             "| task | shape | our config | implementation | DRAM read / input | DRAM write / "
             "output | L2 hit % | GPU µs | GB/s |", "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        config = json.dumps(r["config"]) if r["impl"] == "ours" else ""
        if "error" in r:
            lines.append(f"| {r['task']} | {r['shape']} | {config} | {r['impl']} | "
                         f"{r['error'][:120]} | | | | |")
            continue
        hit = f"{r['l2_hit_pct']:.1f}" if r.get("l2_hit_pct") is not None else "–"
        lines.append(f"| {r['task']} | {r['shape']} | {config} | {r['impl']} | "
                     f"{r['read_over_input']:.2f} | {r['write_over_output']:.2f} | {hit} | "
                     f"{r['gpu_us']:.1f} | {r['achieved_gbps'] or 0:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", default=None,
                        help="task|shape label|our config as JSON (repeatable)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reparse", type=Path, default=None, metavar="CSV",
                        help="build the table from a saved ncu page (no GPU needed); "
                             "--case must name the cases of that run, in order")
    parser.add_argument("--gpu", default=None, help="with --reparse: the GPU's name")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or
                                                         Path(__file__).parent / "results"))
    args = parser.parse_args()
    cases = args.case or list(CASES)
    if args.child:
        run_child(cases)
        return 0
    if args.reparse is not None:
        gpu, raw = args.gpu or "the GPU of the saved run", args.reparse
    else:
        ncu = shutil.which("ncu") or ("/usr/local/cuda/bin/ncu"
                                      if Path("/usr/local/cuda/bin/ncu").exists() else None)
        if not torch.cuda.is_available() or ncu is None:
            print("dram_traffic: needs a CUDA GPU and Nsight Compute (ncu)", file=sys.stderr)
            return 2
        gpu = torch.cuda.get_device_name()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"dram_traffic_{gpu.split()[-1].lower()}"
    if args.reparse is None:
        raw = stem.with_name(stem.name + "_ncu.csv")
        run_ncu(ncu, cases, raw)
    rows = measure(cases, raw)
    command = "python benchmarks/dram_traffic.py " + " ".join(sys.argv[1:])
    stem.with_suffix(".json").write_text(json.dumps(
        {"gpu": gpu, "command": command, "rows": rows,
         "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}, indent=1))
    text = markdown(rows, gpu, command)
    stem.with_suffix(".md").write_text(text)
    print(text)
    return 0 if any("error" not in r for r in rows) else 3


if __name__ == "__main__":
    sys.exit(main())
