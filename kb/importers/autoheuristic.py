"""PyTorch AutoHeuristic data sets (the files Inductor collects to learn its kernel
choices: ``TORCHINDUCTOR_AUTOHEURISTIC_COLLECT``) -> measurements of the matmul task.

The form, as Inductor writes it: the first line is a JSON object naming the GPU by its
compute capability and shared memory and the heuristic by its name, and listing the
numerical and categorical features; the second line is a CSV header (the features, then
``choice`` and ``feedback``); every further line is one choice timed on one input::

    {"shared_memory": 232448, "device_capa": [9, 0], "name": "mm", ...}
    m,k,n,mat1_dtype,mat2_dtype,...,choice,feedback
    64,4096,14336,torch.float16,torch.float16,...,type=triton_BLOCK-M=64_BLOCK-K=64_BLOCK-N=128_numstages=3_numwarps=4,0.0312

A ``type=triton_...`` choice of a GEMM heuristic (``mm``, ``mixed_mm``, ``addmm``) at
features ``m``, ``k``, ``n`` becomes a matmul measurement (its feedback is the benchmark's
milliseconds); ``extern_...`` choices (cuBLAS) are written beside each record of their
input as a peer; other heuristics (pad_mm's "pad or not", flex attention's) are skipped
with a note. The file names no GPU by name: ``--gpu`` does, and its compute capability
must be the file's.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from kernelkb.kb.importers import inductor, tasks
from kernelkb.kb.importers.importer import Event, FileHead, Importer, Source
from kernelkb.kb.importers.records import FileContext, Measurement
from kernelkb.kernels.shared.gpus import GpuFacts

FORMAT = "autoheuristic"
TOOL = "PyTorch AutoHeuristic"
AGENT = "autoheuristic"
GEMMS = ("mm", "mixed_mm", "addmm")
_CHOICE = re.compile(r"^type=triton_BLOCK-M=(\d+)_BLOCK-K=(\d+)_BLOCK-N=(\d+)"
                     r"_numstages=(\d+)_numwarps=(\d+)$")


def metadata(first_line: str) -> dict[str, Any] | None:
    """The file's metadata when its first line is AutoHeuristic's, else None."""
    try:
        data = json.loads(first_line)
    except ValueError:
        return None
    if isinstance(data, dict) and {"device_capa", "name"} <= set(data) \
            and isinstance(data["device_capa"], list) and len(data["device_capa"]) == 2:
        return data
    return None


def arch(meta: dict[str, Any]) -> str:
    """"sm_90" for a device capability of [9, 0]."""
    major, minor = (int(v) for v in meta["device_capa"])
    return f"sm_{major}{minor}"


def measurements(lines: Iterable[str]) -> Iterator[Event]:
    """The file's events: measurements, per-line rejections, notes."""
    rows = iter(lines)
    meta = metadata(next(rows, ""))
    if meta is None:
        yield "not an AutoHeuristic data set: its first line is no metadata object"
        return
    if meta["name"] not in GEMMS:
        yield (f"the {meta['name']!r} heuristic: skipped (only {', '.join(GEMMS)} choices are "
               "GEMM configurations that map onto a task: matmul)")
        return
    reader = csv.DictReader(rows)
    missing = [c for c in ("m", "k", "n", "choice", "feedback")
               if c not in (reader.fieldnames or [])]
    if missing:
        yield f"the header names no {', '.join(missing)}: not a GEMM data set"
        return
    by_input: dict[tuple[int, int, int, str], list[tuple[int, str, float]]] = {}
    serial = iter(range(1 << 62))
    for number, row in enumerate(reader, start=3):  # line numbers of the file
        try:
            m, k, n = int(row["m"]), int(row["k"]), int(row["n"])
            time = float(row["feedback"])
        except (TypeError, ValueError):
            yield str(number), next(serial), "<line>", \
                f"not m, k, n integers and a feedback time: {dict(row)!r}"[:300]
            continue
        dtype = tasks.dtype_name(row.get("mat1_dtype") or "") or ""
        by_input.setdefault((m, n, k, dtype), []).append((number, row["choice"] or "", time))
    imported = 0
    for (m, n, k, dtype), choices in by_input.items():
        externs = {c: t for _, c, t in choices if c.startswith("extern_")}
        peer = "; ".join(f"{c[len('extern_'):]} (ATen) took {t:.4f} ms"
                         for c, t in externs.items())
        for number, choice, time in choices:
            if choice.startswith("extern_"):
                continue
            found = _CHOICE.match(choice)
            if found is None:
                yield str(number), next(serial), "edit.config", \
                    f"not a Triton GEMM choice: {choice[:120]!r}"
                continue
            bm, bk, bn, stages, warps = (int(v) for v in found.groups())
            config, detail = inductor.config_of(
                "triton_mm", {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                              "num_stages": stages, "num_warps": warps})
            detail.insert(0, f"AutoHeuristic {meta['name']} choice {choice}"
                          + (f" {dtype}" if dtype else ""))
            if peer:
                detail.append(f"on this input {peer}")
            imported += 1
            yield Measurement(
                position=str(number), iteration=next(serial), config=config, time=time,
                gflops=tasks.gflops(m, n, k, time), shape=tasks.shape_label(m, n, k),
                dtype=dtype or None, detail="; ".join(detail), gpu_time=True)
    yield (f"AutoHeuristic {meta['name']} data set ({arch(meta)}): {imported} Triton choices "
           f"on {len(by_input)} inputs")


def _metadata(source: Source) -> dict[str, Any] | None:
    return metadata(next(iter(source.lines()), ""))


def _head(source: Source) -> FileHead:
    """The matmul task on the GPU named by --gpu, which must be of the file's capability."""
    meta = _metadata(source)
    if meta is None:
        raise ValueError("<file>: its first line is no AutoHeuristic metadata object")
    gpu = source.gpu
    if isinstance(gpu, GpuFacts):
        try:
            measured = arch(meta)
        except (TypeError, ValueError):
            raise ValueError(f"device_capa: not a (major, minor) pair of integers: "
                             f"{meta['device_capa']!r}") from None
        if gpu.arch != measured:
            raise ValueError(f"env.arch: the data set was measured on a {measured} GPU "
                             f"(device_capa {meta['device_capa']}), and --gpu {gpu.name!r} "
                             f"is {gpu.arch}")
    return FileHead(kernel_name=inductor.KERNEL, task_id=tasks.MATMUL,
                    triton_version="unknown", torch_version="unknown")


def _read(source: Source, ctx: FileContext) -> Iterator[Event]:
    return measurements(source.lines())


IMPORTER = Importer(
    name=FORMAT, tool=TOOL, agent=AGENT, noun="an AutoHeuristic data set", form="text",
    matches=lambda source: _metadata(source) is not None, head=_head, read=_read,
    needs_gpu=True)
