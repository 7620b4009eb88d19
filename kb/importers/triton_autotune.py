"""Triton autotuner disk caches (``@triton.autotune(..., cache_results=True)``) -> measurements.

Triton writes one ``<kernel>.autotune.json`` per tuning key into a folder of its cache
(TRITON_CACHE_DIR, default ~/.triton/cache/<hash>/; triton/runtime/autotuner.py,
``check_disk_cache``): ``{"key": [the values of the autotune key's arguments..., then the
dtype of each tensor argument, "torch.float16"], "configs_timings": [[{"kwargs": {...},
"num_warps", "num_stages", "num_ctas", "maxnreg", ...}, [median, p20, p80] in ms], ...]}``.
A config that did not compile or ran out of resources is timed [inf, inf, inf].

The file names neither the GPU (``--gpu``), nor the key's argument names, nor the Triton
version (read from the compiled kernel's metadata beside it in the cache, when there).
A GEMM (a name that says so, BLOCK_M / BLOCK_N / BLOCK_K knobs, a key of three integers,
read as M, N, K) maps onto the matmul task; any other kernel is imported under its own
name with its parameters as they are, as Kernel Tuner data is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kernelkb.kb.importers import files, tasks
from kernelkb.kb.importers.importer import Event, FileHead, Importer, Source, top_level
from kernelkb.kb.importers.records import (
    FileContext,
    ImportNote,
    ImportRejection,
    Measurement,
    json_number,
)

FORMAT = "triton-autotune"
TOOL = "Triton autotuner"
AGENT = "triton_autotune"
SUFFIX = ".autotune.json"
FAILED = "compilation failed or out of resources (the autotuner timed it as inf)"
# benchmarks/tuner_files.py copies <cache folder>/<kernel>.autotune.json to a flat
# "<first 12 characters of the folder>_<kernel>.autotune.json"; Triton's folders are
# base32 (3.x) or hex digests
_FLAT_PREFIX = re.compile(r"^(?:[A-Z2-7]{12}|[0-9a-f]{12})_(?=.)")
_LAUNCH = ("num_warps", "num_stages")


def matches(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("configs_timings"), list) \
        and "key" in data


# keys of the metadata Triton writes beside each compiled kernel (<hash>/<kernel>.json)
_COMPILED_KEYS = frozenset({"hash", "target", "num_warps", "num_stages", "num_ctas", "shared",
                            "triton_version", "backend_name", "arch", "cluster_dims"})


def is_compiled_metadata(file_name: str, data: Any) -> bool:
    """Whether a JSON file is what Triton's cache holds for a compiled kernel, not tuning
    data: the kernel's metadata (its name, launch and target keys) or the group file
    ``__grp__<kernel>.json`` listing the kernel's files. A cache of 400 kernels holds 800."""
    if not isinstance(data, dict):
        return False
    if file_name.startswith("__grp__"):
        return isinstance(data.get("child_paths"), dict)
    return isinstance(data.get("name"), str) and len(_COMPILED_KEYS & data.keys()) >= 3


def kernel_name_of(file_name: str) -> str | None:
    """"matmul_kernel.autotune.json" -> "matmul_kernel" (a flat copy's prefix dropped)."""
    name = file_name.removesuffix(".gz")
    if not name.endswith(SUFFIX):
        return None
    return _FLAT_PREFIX.sub("", name[: -len(SUFFIX)]) or None


@dataclass(frozen=True)
class Header:
    kernel_name: str
    task: str | None  # "matmul" when the configurations are points of that task
    values: tuple[Any, ...]  # the key's argument values
    dtype: str | None  # of the first tensor argument
    shape: str  # the task's shape label, else "problem_size=AxB" of the integer values
    mnk: tuple[int, int, int] | None
    notes: list[str] = field(default_factory=list)


def header(data: dict[str, Any], kernel_name: str) -> Header:
    """What every configuration of the file shares; ValueError("field: reason") for a key
    that is not a list, or a kernel named matmul whose configurations are not the task's
    (they would stand beside the task's own under its name)."""
    key = data["key"]
    if not isinstance(key, list):
        raise ValueError(f"key: expected the list of key values, got {type(key).__name__}")
    dtypes = [d for v in key if isinstance(v, str) and (d := tasks.dtype_name(v))]
    values = tuple(v for v in key if not (isinstance(v, str) and tasks.dtype_name(v)))
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    dtype = dtypes[0] if dtypes else None
    notes = []
    if len(set(dtypes)) > 1:
        notes.append(f"the key's tensors are {', '.join(dtypes)}: recorded as {dtype}")
    entries = [e for e in data["configs_timings"] if _entry(e)]  # the others: rejections
    tiled = bool(entries) and all(_tiled(e) for e in entries)
    gemm = len(values) == len(ints) == 3 and tiled
    if gemm and tasks.is_matmul_name(kernel_name):
        m, n, k = ints
        notes.append(f"mapped onto the matmul task: the key {values} read as M, N, K (the "
                     "file keeps the values, not the names)")
        return Header(kernel_name, tasks.MATMUL, values, dtype, tasks.shape_label(m, n, k),
                      (m, n, k), notes)
    if entries and (kernel_name.removesuffix("_kernel") or kernel_name) == tasks.MATMUL:
        raise ValueError("edit.config: the kernel is named like the matmul task, but its "
                         "configurations are not the task's (BLOCK_M, BLOCK_N, BLOCK_K "
                         f"knobs and a key of M, N, K; the key is {key}); pass --kernel "
                         "NAME to import them under another name")
    if gemm:
        notes.append(f"{kernel_name} has GEMM tiles and a key of three integers, but its "
                     "name does not say matmul: imported under its own name; --kernel "
                     "matmul maps it onto the matmul task")
    size = "x".join(str(v) for v in ints) or "unspecified"
    return Header(kernel_name, None, values, dtype, f"problem_size={size}", None, notes)


def _entry(entry: Any) -> bool:
    return isinstance(entry, list | tuple) and len(entry) == 2 and isinstance(entry[0], dict) \
        and isinstance(entry[0].get("kwargs"), dict)


def _tiled(entry: list[Any]) -> bool:
    return all(k in entry[0]["kwargs"] for k in tasks.TILE)


def measurements(data: dict[str, Any], head: Header
                 ) -> Iterator[Measurement | tuple[str, int, str, str]]:
    """Each config and its timing as a Measurement, or (position, iteration, field, reason)."""
    for index, entry in enumerate(data["configs_timings"]):
        position = str(index)
        if not _entry(entry):
            yield position, index, "<record>", \
                "expected [config with kwargs, timings], got " + repr(entry)[:120]
            continue
        config, timing = entry
        time, spread = _timing(timing)
        if time is None:
            yield position, index, "feedback.time_ms", \
                f"not a number or a list of quantiles: {timing!r}"[:300]
            continue
        try:
            params, detail = _params(config, head)
        except ValueError as exc:
            yield position, index, "edit.config", f"not a matmul configuration: {exc}"
            continue
        if spread:
            detail.append(f"p20 / p80 {spread[0]:.4g} / {spread[1]:.4g} ms")
        rate = tasks.gflops(*head.mnk, time) if head.mnk and isinstance(time, float) else None
        yield Measurement(position=position, iteration=index, config=params, time=time,
                          gflops=rate, shape=head.shape, dtype=head.dtype,
                          detail="; ".join(detail), gpu_time=True)


def _timing(value: Any) -> tuple[float | str | None, tuple[float, float] | None]:
    """(median ms or the failure label, (p20, p80) when given): do_bench's quantiles
    (0.5, 0.2, 0.8), or one number from a custom do_bench."""
    numbers = [json_number(v) for v in value] if isinstance(value, list) else \
        [json_number(value)]
    if not numbers or any(n is None for n in numbers):
        return None, None
    if any(math.isinf(n) for n in numbers if n is not None):
        return FAILED, None
    median = numbers[0]
    assert median is not None
    spread = (numbers[1], numbers[2]) if len(numbers) == 3 else None
    return median, spread  # type: ignore[return-value]


def _params(config: dict[str, Any], head: Header) -> tuple[dict[str, Any], list[str]]:
    """(the record's config, lines for the feedback text). The launch options beside the
    kwargs: num_warps and num_stages always, the others only when set (num_ctas > 1,
    maxnreg, ...), as Triton leaves them at their defaults otherwise."""
    kwargs = config["kwargs"]
    extra = {k: v for k, v in config.items()
             if k not in ("kwargs", *_LAUNCH, "pre_hook") and v is not None
             and not (k == "num_ctas" and v == 1)}
    launch = {k: config.get(k) for k in _LAUNCH}
    text = [f"{head.kernel_name} key {list(head.values)}"
            + (f" {head.dtype}" if head.dtype else "")]
    if head.task != tasks.MATMUL:
        return {**kwargs, **launch, **extra}, text
    mapped, left_out, filled = tasks.matmul_config(kwargs, launch["num_warps"],
                                                   launch["num_stages"])
    left_out |= extra
    if left_out:
        text.append(f"not a knob of the matmul task, left out: {tasks.describe(left_out)}")
    if filled:
        text.append(f"not in the config, the task's default taken: {', '.join(filled)}")
    return mapped, text


def _head(source: Source) -> FileHead:
    """The kernel from the file name (or --kernel), the task it maps onto, the Triton
    version from the compiled kernels beside it in the cache."""
    kernel_name = source.kernel or kernel_name_of(source.path.name)
    if not kernel_name:
        raise ValueError(f"kernel_name: the file name does not end in {SUFFIX} "
                         f"(<kernel>{SUFFIX}); pass --kernel NAME")
    head = header(source.data, kernel_name)
    notes = list(head.notes)
    versions = files.triton_versions(source.path.parent.parent, kernel_name)
    if len(versions) > 1:
        notes.append(f"the cache holds {kernel_name} compiled by Triton {', '.join(versions)}:"
                     " the version is recorded as unknown")
    return FileHead(
        kernel_name=kernel_name, problem_size=head.shape.removeprefix("problem_size="),
        task_id=head.task, triton_version=versions[0] if len(versions) == 1 else "unknown",
        torch_version="unknown",
        options=f"--kernel {source.kernel!r}" if source.kernel else "", notes=tuple(notes))


def _read(source: Source, ctx: FileContext) -> Iterator[Event]:
    return measurements(source.data, header(source.data, ctx.kernel_name))


def _unmatched(name: str, file_name: str, data: Any) -> ImportRejection | ImportNote | None:
    """A file named as a cache but damaged; a compiled kernel's files in the cache."""
    if kernel_name_of(file_name):
        return ImportRejection(name, (("<file>", "named as a Triton autotune cache, but it "
                                       "holds no 'key' and 'configs_timings' list "
                                       f"(top level: {top_level(data)})"),))
    if is_compiled_metadata(file_name, data):
        return ImportNote(name, "skipped: Triton compile metadata, not tuning data",
                          skip="triton-compiled")
    return None


IMPORTER = Importer(
    name=FORMAT, tool=TOOL, agent=AGENT, noun=f"a {FORMAT} file", form="json",
    matches=lambda source: matches(source.data), head=_head, read=_read, needs_gpu=True,
    unmatched=_unmatched)
