"""Kernel Tuner cache files (JSON, often gzipped) -> measurements.

A cache holds ``device_name``, ``kernel_name``, ``problem_size``, ``tune_params_keys``
and ``cache``: a map from the comma-joined parameter values to one entry per
configuration with every parameter, ``time`` (mean ms, or a failure label such as
"CompilationFailedConfig" / "RuntimeFailedConfig"), ``times`` (the repeats),
``GB/s`` or ``GFLOP/s`` and ``timestamp``.

Kernel Tuner writes the cache as it tunes (kernel_tuner/util.py): the header up to
``"cache": {``, then one ``\n"key": {...},`` per configuration, and closes the brackets
only when ``tune_kernel`` returns. A run killed, crashed or still going leaves the file
open; Kernel Tuner and KTdashboard read it by dropping the trailing comma and closing it.
``close_open_cache`` does the same, so such a file keeps every complete measurement.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kernelkb.kb.importers.importer import Event, FileHead, Importer, Source
from kernelkb.kb.importers.records import FileContext, Measurement, json_number

FORMAT = "kernel-tuner"
TOOL = "Kernel Tuner"
AGENT = "kernel_tuner"

# what an entry holds besides the parameters (used when tune_params_keys is missing)
_NOT_PARAMS = frozenset({"time", "times", "compile_time", "verification_time", "benchmark_time",
                         "strategy_time", "framework_time", "timestamp", "GB/s", "GFLOP/s",
                         "TFLOP/s", "energy", "power"})


_OPENED = re.compile(r'"cache"\s*:\s*\{')


def close_open_cache(text: str) -> tuple[dict[str, Any], str] | None:
    """The data of a cache left open, closed as Kernel Tuner closes it, and a note saying
    how many measurements it kept; None when ``text`` is not an open cache. A last entry
    cut off mid-write (no comma after it: Kernel Tuner writes the comma with the entry)
    is dropped, never read as a shorter number."""
    text = text.rstrip().rstrip("\x00").rstrip()
    if not text.startswith("{") or not _OPENED.search(text):
        return None
    cut = not text.endswith((",", "{"))
    if cut:
        text = text[:text.rfind("\n")].rstrip() if "\n" in text else ""
        if not text.endswith((",", "{")):
            return None
    try:
        data = json.loads(text.removesuffix(",") + "}\n}")
    except (ValueError, RecursionError):
        return None
    if not matches(data):
        return None
    count = len(data["cache"])
    note = (f"an open Kernel Tuner cache (never closed: its tuning run was killed, crashed "
            f"or is still going): closed as Kernel Tuner reads it, {count} complete "
            f"measurement{'s' if count != 1 else ''} recovered"
            + ("; the last entry, cut off mid-write, dropped" if cut else ""))
    return data, note


def matches(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("cache"), dict) and (
        "kernel_name" in data or "device_name" in data or "tune_params_keys" in data)


@dataclass(frozen=True)
class Header:
    kernel_name: str | None
    problem_size: str
    device: str


def problem_size_text(value: Any) -> str:
    """[4096, 4096] -> "4096x4096"; a scalar or string as it is."""
    if isinstance(value, list | tuple):
        return "x".join(str(v) for v in value) or "unspecified"
    return str(value) if value not in (None, "") else "unspecified"


def header(data: dict[str, Any]) -> Header:
    kernel = data.get("kernel_name")
    return Header(
        kernel_name=kernel if isinstance(kernel, str) and kernel.strip() else None,
        problem_size=problem_size_text(data.get("problem_size")),
        device=str(data.get("device_name") or ""),
    )


def measurements(data: dict[str, Any]) -> Iterator[Measurement | tuple[str, int, str, str]]:
    """Each cache entry as a Measurement, or (position, iteration, field, reason)."""
    keys = data.get("tune_params_keys")
    for iteration, (position, entry) in enumerate(data["cache"].items()):
        if not isinstance(entry, dict):
            yield position, iteration, "<record>", \
                f"expected an object, got {type(entry).__name__}"
            continue
        if isinstance(keys, list):
            missing = [k for k in keys if k not in entry]
            if missing:
                yield position, iteration, "edit.config", f"parameters missing: {missing}"
                continue
            config = {k: entry[k] for k in keys}
        else:
            config = {k: v for k, v in entry.items() if k not in _NOT_PARAMS}
        time = entry.get("time")
        if not isinstance(time, str):
            time = json_number(time) if time is not None else None
            if time is None and entry.get("time") is not None:
                yield position, iteration, "feedback.time_ms", \
                    f"not a number or failure label: {entry['time']!r}"
                continue
        raw_times = entry.get("times")
        times = [n for t in raw_times if (n := json_number(t)) is not None] \
            if isinstance(raw_times, list) else []
        stamp = entry.get("timestamp")
        yield Measurement(
            position=position, iteration=iteration, config=config, time=time, times=times,
            gbps=json_number(entry.get("GB/s")), gflops=json_number(entry.get("GFLOP/s")),
            timestamp=stamp if isinstance(stamp, str) and stamp else None,
        )


def _head(source: Source) -> FileHead:
    head = header(source.data)
    kernel_name = source.kernel or head.kernel_name
    if not kernel_name:
        raise ValueError("kernel_name: the file names no kernel; pass --kernel NAME")
    return FileHead(kernel_name=kernel_name, problem_size=head.problem_size,
                    device=head.device)


def _read(source: Source, ctx: FileContext) -> Iterator[Event]:
    return measurements(source.data)


IMPORTER = Importer(
    name=FORMAT, tool=TOOL, agent=AGENT, noun=f"a {FORMAT} file", form="json",
    matches=lambda source: matches(source.data), head=_head, read=_read,
    recover=close_open_cache)
