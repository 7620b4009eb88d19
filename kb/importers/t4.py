"""T4 results files (the auto-tuning community's shared format) -> measurements.

``{"results": [{"configuration": {...}, "times": {"runtimes": [...]}, "invalidity":
"correct" | "compile" | "runtime" | "timeout" | "correctness" | "constraints",
"measurements": [{"name": "time", "value": ..., "unit": ...}], "timestamp"?}],
"metadata": {"timeunit": ...}, "schema_version": ...}``. The file names neither the
kernel nor the GPU: the kernel comes from --kernel or the T1 search-space file beside
it, the GPU from --gpu or the file name (the dispatcher's job).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kernelkb.kb.importers import files
from kernelkb.kb.importers.importer import Event, FileHead, Importer, Source
from kernelkb.kb.importers.kernel_tuner import problem_size_text
from kernelkb.kb.importers.records import FileContext, Measurement, json_number

FORMAT = "t4"
TOOL = "T4"
AGENT = "t4"

# time units as T4 writers spell them (the reference files say "miliseconds") -> ms
_UNIT_MS = {"": 1.0, "ms": 1.0, "millisecond": 1.0, "milliseconds": 1.0, "miliseconds": 1.0,
            "s": 1e3, "second": 1e3, "seconds": 1e3, "us": 1e-3, "microseconds": 1e-3,
            "ns": 1e-6, "nanoseconds": 1e-6}


def matches(data: Any) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        return False
    first = data["results"][0] if data["results"] else {}
    return "schema_version" in data or (isinstance(first, dict) and "configuration" in first)


def time_unit(data: dict[str, Any]) -> float:
    """ms per unit of the file's times; ValueError for a unit it does not know."""
    metadata = data.get("metadata")
    unit = str(metadata.get("timeunit", "")) if isinstance(metadata, dict) else ""
    if unit.strip().lower() not in _UNIT_MS:
        raise ValueError(f"metadata.timeunit: unknown time unit {unit!r}")
    return _UNIT_MS[unit.strip().lower()]


def _measurement(result: dict[str, Any], name: str) -> dict[str, Any] | None:
    items = result.get("measurements")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and str(item.get("name", "")).lower() == name.lower():
            return item
    return None


def measurements(data: dict[str, Any], scale: float
                 ) -> Iterator[Measurement | tuple[str, int, str, str]]:
    """Each result as a Measurement (times in ms), or (position, iteration, field, reason)."""
    for index, result in enumerate(data["results"]):
        position = str(index)
        if not isinstance(result, dict) or not isinstance(result.get("configuration"), dict):
            yield position, index, "configuration", "missing or not an object"
            continue
        measured = _measurement(result, "time")
        invalidity = result.get("invalidity")
        if invalidity is None:  # not stated: the time measurement decides
            invalidity = "correct"
        elif not isinstance(invalidity, str) or not invalidity.strip():
            yield position, index, "invalidity", f"expected a label, got {invalidity!r}"
            continue
        value = measured.get("value") if measured else None
        time: float | str | None
        if invalidity != "correct":
            time = value if isinstance(value, str) else invalidity
        elif measured is None:
            yield position, index, "measurements", "no 'time' measurement"
            continue
        else:
            unit = str(measured.get("unit") or "").strip().lower()
            if unit not in _UNIT_MS:
                yield position, index, "measurements.time.unit", f"unknown unit {unit!r}"
                continue
            number = json_number(value)
            if number is None:
                yield position, index, "feedback.time_ms", f"not a number: {value!r}"
                continue
            time = number * (_UNIT_MS[unit] if unit else scale)
        runtimes = (result.get("times") or {}).get("runtimes") \
            if isinstance(result.get("times"), dict) else None
        times = [n * scale for t in runtimes if (n := json_number(t)) is not None] \
            if isinstance(runtimes, list) else []
        gbps = _measurement(result, "GB/s")
        gflops = _measurement(result, "GFLOP/s")
        stamp = result.get("timestamp")
        yield Measurement(
            position=position, iteration=index, config=dict(result["configuration"]),
            time=time, times=times,
            gbps=json_number(gbps.get("value")) if gbps else None,
            gflops=json_number(gflops.get("value")) if gflops else None,
            timestamp=stamp if isinstance(stamp, str) and stamp else None,
        )


def _head(source: Source) -> FileHead:
    """The kernel and problem size from --kernel or the T1 search-space file beside it."""
    time_unit(source.data)  # an unknown unit rejects the file before any record
    spec = files.sibling_spec(source.path.parent) or {}
    kernel_name = source.kernel or spec.get("KernelName")
    if not kernel_name:
        raise ValueError("KernelName: the file names no kernel; pass --kernel NAME or keep "
                         "its T1 search-space file beside it")
    return FileHead(kernel_name=str(kernel_name),
                    problem_size=problem_size_text(spec.get("ProblemSize")))


def _read(source: Source, ctx: FileContext) -> Iterator[Event]:
    return measurements(source.data, time_unit(source.data))


IMPORTER = Importer(
    name=FORMAT, tool=TOOL, agent=AGENT, noun=f"a {FORMAT} file", form="json",
    matches=lambda source: matches(source.data), head=_head, read=_read)
