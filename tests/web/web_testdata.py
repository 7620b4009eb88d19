"""What the web tests' store holds beside the seeds: the planted record (markup in every
free-text field, which the pages must show as text and never run), an imported hub
folder (Kernel Tuner caches of one kernel on two GPUs: measurements, not edits) and a
CPU-interpreter round (not a GPU). All fabricated, never shipped as seeds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kb_testdata import record_dict

PLANT = "<script>window.__planted = 1</script><img src=x onerror='window.__planted=2'>"
PLANTED_RUN = "planted-run-1"


def planted_record() -> dict:
    """A record whose every free-text field carries markup that must be shown, not run."""
    rec = record_dict(op="softmax", hw="H200", triton="3.6.0", run=PLANTED_RUN,
                      summary=f"planted {PLANT}", diff=f"--- a\n+++ b\n-x = 1\n+{PLANT}\n")
    rec["edit"]["rationale"] = f"because {PLANT}"
    rec["feedback"]["text"] = f"feedback {PLANT}"
    rec["feedback"]["bottleneck_hint"] = f"hint {PLANT}"
    rec["env"]["gpu_name"] = "NVIDIA H200"
    return rec


# -- an imported hub folder: Kernel Tuner caches of one kernel on two GPUs ---------------
HUB_GPUS = {"A100.json": "NVIDIA A100-PCIE-40GB", "A6000.json": "NVIDIA RTX A6000"}
HUB_OP = "convolution"
FAILED_CONFIG = (128, 4)  # fails to compile on every GPU


def _hub_time(gpu: str, bx: int, tx: int) -> float:
    """Fabricated ms: the A100 likes wide blocks, the A6000 narrow ones with more tiling."""
    if "A100" in gpu:
        return round(1.0 + abs(bx - 64) / 64 + abs(tx - 2) * 0.3, 4)
    return round(1.4 + abs(bx - 32) / 40 + abs(tx - 4) * 0.2, 4)


def write_hub(root: Path) -> Path:
    """A data set folder as Kernel Tuner writes caches (one file per GPU, one problem
    size) with an MIT LICENSE; each time is the median of four repeats."""
    hub = root / "hub"
    (hub / "conv").mkdir(parents=True)
    (hub / "LICENSE").write_text("MIT License\n\nCopyright (c) 2025 Someone\n")
    for name, device in HUB_GPUS.items():
        cache = {}
        for bx in (16, 32, 64, 128):
            for tx in (1, 2, 4):
                entry: dict = {"block_size_x": bx, "tile_size_x": tx,
                               "timestamp": "2024-01-02 03:04:05.000001+00:00"}
                if (bx, tx) == FAILED_CONFIG:
                    entry["time"] = "CompilationFailedConfig"
                else:
                    t = _hub_time(device, bx, tx)
                    entry |= {"time": t, "times": [t * 0.98, t, t, t * 1.05]}
                cache[f"{bx},{tx}"] = entry
        (hub / "conv" / name).write_text(json.dumps({
            "device_name": device, "kernel_name": f"{HUB_OP}_kernel",
            "problem_size": [4096, 4096], "tune_params_keys": ["block_size_x", "tile_size_x"],
            "tune_params": {"block_size_x": [16, 32, 64, 128], "tile_size_x": [1, 2, 4]},
            "objective": "time", "cache": cache}))
    return hub


def import_hub(kb: Any, hub: Path) -> int:
    """Import the folder as `kernelkb import` does; returns the records accepted."""
    from kernelkb.kb.importers import iter_files
    from kernelkb.kb.importers.load import load_file

    return sum(load_file(source, items, kb.ingest).accepted
               for source, items in iter_files(hub))


def hub_fastest(device: str) -> tuple[dict, float]:
    """The fastest configuration of the fabricated hub on ``device`` and its time."""
    times = {(bx, tx): _hub_time(device, bx, tx) for bx in (16, 32, 64, 128)
             for tx in (1, 2, 4) if (bx, tx) != FAILED_CONFIG}
    (bx, tx), t = min(times.items(), key=lambda kv: kv[1])
    return {"block_size_x": bx, "tile_size_x": tx}, t


def interpreter_record() -> dict:
    """A CPU-interpreter round (checked, never timed), as `optimize` on a CPU writes it."""
    rec = record_dict(op="softmax", run="cpu-run-1", summary="checked on the interpreter",
                      evidence="verified", verdict="neutral", speedup=None)
    rec["env"].update(gpu_name="cpu-interpreter", arch="cpu", sm_count=None,
                      mem_bandwidth_gbps=None, smem_per_sm_kib=None, peak_tflops=None)
    return rec
