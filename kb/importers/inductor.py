"""PyTorch Inductor max-autotune logs (the "AUTOTUNE mm(...)" tables it writes to stderr)
-> measurements of the matmul task.

With ``mode="max-autotune"`` (or TORCHINDUCTOR_MAX_AUTOTUNE=1) Inductor benchmarks the
choices for each GEMM and prints the fastest ten (TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_
DISPLAYED=all prints all; torch/_inductor/select_algorithm.py, ``log_results``)::

    AUTOTUNE mm(16x4096, 4096x4096)
    strides: [4096, 1], [4096, 1]
    dtypes: torch.float16, torch.float16
      triton_mm_8 0.0260 ms 100.0% ACC_TYPE='tl.float32', ..., BLOCK_K=128, BLOCK_M=16,
        BLOCK_N=64, EVEN_K=True, GROUP_M=8, USE_FAST_ACCUM=False, num_stages=5, num_warps=4
      mm 0.0310 ms 61.5%
    SingleProcess AUTOTUNE benchmarking takes 0.5117 seconds and ... for 29 choices

(one line per choice). Each Triton choice of an ``mm`` or ``addmm`` table becomes a
matmul measurement at the header's M, N, K (A is M x K, B is K x N; addmm's bias comes
first); ATen's choices (``mm``, ``bias_addmm``: cuBLAS) are not Triton configurations:
their time is written beside each record of the table and in the table's note. Warnings,
tracebacks and the "Autotune Choices Stats" JSON around the tables are skipped; tables of
other ops (bmm, convolution, ...) are skipped with a note. The log names no GPU (--gpu).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kernelkb.kb.importers import tasks
from kernelkb.kb.importers.importer import Event, FileHead, Importer, Source
from kernelkb.kb.importers.records import FileContext, Measurement

FORMAT = "inductor"
TOOL = "PyTorch Inductor max-autotune"
AGENT = "inductor"
KERNEL = "triton_mm"  # Inductor's GEMM template, the kernel its configurations are of
FAILED = "runtime error during autotuning (Inductor timed it as inf)"
MAPPED_OPS = ("mm", "addmm")  # GEMMs whose last two inputs are A [M, K] and B [K, N]

_RANK = r"(?:\[rank\d+\]:)?"  # torch.distributed's prefix on every rank's stderr line
_HEADER = re.compile(rf"^{_RANK}AUTOTUNE (\w+)\((.*)\)\s*$")
_CHOICE = re.compile(rf"^{_RANK}\s+(\S+) (\S+) ms (\S+%|<DIVIDED BY ZERO ERROR>)(?: (.*))?$")
_FIELD = re.compile(rf"^{_RANK}(strides|dtypes): (.*)$")
_END = re.compile(r"AUTOTUNE benchmarking takes .* for (\d+) choices")
# glog-style log records (E1201 17:36:26.725000 542 file.py:3541] ...), which other
# threads may write in the middle of a table
_LOG_RECORD = re.compile(rf"^{_RANK}[EWIDF]\d{{4}} \d\d:\d\d:\d\d")
_PARAM = re.compile(r"\s*(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,]*)\s*(?:,|$)")
_TMA = ("NUM_SMS", "TMA_SIZE", "TMA_EXPERIMENTAL_API")  # keys of the persistent TMA template
_NEEDED = (*tasks.TILE, "num_stages", "num_warps")  # what a GEMM template config prints


def is_header(line: str) -> bool:
    return _HEADER.match(line) is not None


@dataclass
class _Table:
    line: int
    op: str
    sizes: str
    dtypes: list[str] = field(default_factory=list)
    strides: str = ""
    # (line, name, time ms, config: None where the line prints none)
    choices: list[tuple[int, str, str, str | None]] = field(default_factory=list)
    bad: list[tuple[int, str]] = field(default_factory=list)  # (line, text) not a choice
    benchmarked: int | None = None

    @property
    def title(self) -> str:
        return f"{self.op}({self.sizes})"


def measurements(lines: Iterable[str]) -> Iterator[Event]:
    """The log's tables, line by line (a log can be a whole training run's stderr)."""
    table: _Table | None = None
    serial = iter(range(10**9))
    tables = 0
    for number, line in enumerate(lines, 1):
        head = _HEADER.match(line)
        if head:
            if table is not None:
                yield from _table_events(table, serial)
            table, tables = _Table(number, head.group(1), head.group(2)), tables + 1
            continue
        if table is None:
            continue
        choice = _CHOICE.match(line)
        found = _FIELD.match(line)
        end = _END.search(line)
        if choice:
            name, time_text, desc = choice.group(1, 2, 4)
            table.choices.append((number, name, time_text, desc))
        elif found and found.group(1) == "dtypes":
            table.dtypes = [d.strip() for d in found.group(2).split(",")]
        elif found:
            table.strides = found.group(2).strip()
        elif _LOG_RECORD.match(line):
            continue
        elif line[:1].isspace() and line.strip():  # indented, as a choice, but not one
            table.bad.append((number, line.strip()))
        else:
            if end:
                table.benchmarked = int(end.group(1))
            yield from _table_events(table, serial)
            table = None
    if table is not None:
        yield from _table_events(table, serial)
    if not tables:
        yield "no 'AUTOTUNE op(...)' table: not an Inductor max-autotune log"


def _table_events(table: _Table, serial: Iterator[int]) -> Iterator[Event]:
    for number, text in table.bad:
        yield str(number), next(serial), "<line>", \
            f"in the {table.title} table, not a choice (name, time ms, share %, config): " \
            f"{text[:200]!r}"
    if table.op not in MAPPED_OPS:
        yield (f"{table.title} at line {table.line}: skipped, {len(table.choices)} choices "
               f"(only {' and '.join(MAPPED_OPS)} map onto a task: matmul)")
        return
    try:
        m, n, k = _mnk(table.sizes)
    except ValueError as exc:
        for number in [c[0] for c in table.choices] or [table.line]:
            yield str(number), next(serial), "task.shape_set", \
                f"the table's header {table.title!r} at line {table.line}: {exc}"
        return
    externs: dict[str, float] = {}
    triton: list[tuple[int, str, float, dict[str, Any]]] = []
    other: list[str] = []
    for number, name, time_text, desc in table.choices:
        try:
            time = float(time_text)
        except ValueError:
            yield str(number), next(serial), "feedback.time_ms", f"not a number: {time_text!r}"
            continue
        if not desc or "=" not in desc:
            externs[name] = time
            continue
        try:
            params = _params(desc)
        except ValueError as exc:
            yield str(number), next(serial), "edit.config", str(exc)
            continue
        missing = [k for k in _NEEDED if k not in params]
        if len(missing) == len(_NEEDED):  # another template's config (decompose-k, ...)
            other.append(name)
            continue
        if missing:  # Inductor prints them all, num_warps last: a line cut short
            yield str(number), next(serial), "edit.config", \
                f"the config has no {', '.join(missing)} (is the line cut short?)"
            continue
        triton.append((number, name, time, params))
    dtype = _dtype(table)
    shape = tasks.shape_label(m, n, k)
    peer = "; ".join(f"ATen {e} (cuBLAS) took {t:.4f} ms" for e, t in externs.items())
    for number, name, time, params in triton:
        try:
            config, detail = config_of(name, params)
        except ValueError as exc:
            yield str(number), next(serial), "edit.config", f"not a matmul configuration: {exc}"
            continue
        detail.insert(0, f"Inductor choice {name} of {table.title}"
                      + (f" {dtype}" if dtype else "")
                      + (f", strides {table.strides}" if table.strides else ""))
        if peer:
            detail.append(f"on this shape {peer}")
        failed = math.isinf(time) and time > 0
        yield Measurement(
            position=str(number), iteration=next(serial), config=config,
            time=FAILED if failed else time,
            gflops=None if failed else tasks.gflops(m, n, k, time),
            shape=shape, dtype=dtype, detail="; ".join(detail), gpu_time=True)
    yield _note(table, len(triton), externs, other)


def _note(table: _Table, imported: int, externs: dict[str, float], other: list[str]) -> str:
    total = f" of {table.benchmarked} benchmarked" if table.benchmarked else ""
    text = (f"{table.title} at line {table.line}: {imported} Triton choices{total} read "
            f"as matmul configurations")
    if table.benchmarked and table.benchmarked > len(table.choices):
        text += (f" (Inductor printed the fastest {len(table.choices)}; "
                 "TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_DISPLAYED=all prints every one)")
    if externs:
        text += "; ATen " + ", ".join(f"{e} {t:.4f} ms" for e, t in externs.items()) + \
            " kept as the peer's time in the records' text, not as a configuration"
    if other:
        text += f"; not GEMM tile configurations, not imported: {', '.join(other)}"
    return text


def _mnk(sizes: str) -> tuple[int, int, int]:
    """"16x4096, 4096x4096" (or addmm's "4096, 16x4096, 4096x4096") -> (M, N, K)."""
    try:
        dims = [tuple(int(d) for d in part.strip().split("x")) for part in sizes.split(",")]
    except ValueError:
        raise ValueError(f"sizes {sizes!r} are not AxB integers") from None
    if len(dims) < 2 or len(dims[-2]) != 2 or len(dims[-1]) != 2:
        raise ValueError(f"sizes {sizes!r}: expected A (M x K) and B (K x N) last")
    (m, k), (k2, n) = dims[-2], dims[-1]
    if k != k2:
        raise ValueError(f"A is {m}x{k} but B is {k2}x{n}: K differs")
    return m, n, k


def _dtype(table: _Table) -> str | None:
    """A's dtype (the second-last input; the same as B's in the logs seen)."""
    names = [tasks.dtype_name(d) for d in table.dtypes[-2:]]
    return names[0] if names and names[0] else None


def _params(desc: str) -> dict[str, Any]:
    """"ACC_TYPE='tl.float32', BLOCK_K=128, EVEN_K=True" -> {...}: Python literals where
    they are ones, the text otherwise; ValueError for text that is not NAME=value, ..."""
    params: dict[str, Any] = {}
    at = 0
    text = desc.strip()
    while at < len(text):
        found = _PARAM.match(text, at)
        if not found or found.end() == at:
            raise ValueError(f"cannot read the config at {text[at:at + 60].strip()!r}")
        name, raw = found.group(1), found.group(2).strip()
        try:  # a '#' would start a comment: "6#4" is no 6
            params[name] = raw if "#" in raw else ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            params[name] = raw
        at = found.end()
    return params


def config_of(name: str, params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The matmul config of one Triton choice and the lines saying what was left out.
    Inductor's GEMM templates never split K; the persistent TMA template (its TMA keys,
    or "persistent_tma" in the choice's name) is the task's PERSISTENT_TMA kernel."""
    launch = {k: params.get(k) for k in ("num_warps", "num_stages")}
    rest = {k: v for k, v in params.items() if k not in launch}
    persistent = "persistent" in name or any(k in rest for k in _TMA)
    config, left_out, filled = tasks.matmul_config(
        rest, launch["num_warps"], launch["num_stages"],
        fixed={"SPLIT_K": 1, "PERSISTENT_TMA": persistent, "FLATTEN": False})
    detail = []
    if left_out:
        detail.append(f"not a knob of the matmul task, left out: {tasks.describe(left_out)}")
    if filled:
        detail.append(f"not in the config, the task's default taken: {', '.join(filled)}")
    return config, detail


def _head(source: Source) -> FileHead:
    return FileHead(kernel_name=KERNEL, task_id=tasks.MATMUL, triton_version="unknown",
                    torch_version="unknown")


def _read(source: Source, ctx: FileContext) -> Iterator[Event]:
    return measurements(source.lines())


IMPORTER = Importer(
    name=FORMAT, tool=TOOL, agent=AGENT, noun=f"an {FORMAT} file", form="text",
    matches=lambda source: any(is_header(line) for line in source.lines()), head=_head,
    read=_read, needs_gpu=True, costly_match=True)
