"""Import a file or folder of other people's tuning data: pick the format per file, find
the kernel and the GPU, and yield validated records (or why not) by "file:position".

The GPU of a file: the device name it writes when the facts table knows it; else
``--gpu``; else its file name (MI250X.json.gz). A file name that names only a family
(A100) takes the part a Kernel Tuner cache in the same folder names, if exactly one
does (a T4 file converted from that cache sits beside it); else the family's usual part.
Triton autotune caches and Inductor logs name no GPU and their file names are the tool's
(a cache hash could read as "a100"): they need ``--gpu``.

JSON files are sniffed by their top level; text files (*.log, *.txt, or a file given by
path that does not open with JSON) are read line by line as Inductor logs.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernelkb.kb.importers import (
    autoheuristic,
    files,
    inductor,
    kernel_tuner,
    t4,
    triton_autotune,
)
from kernelkb.kb.importers.records import (
    FileContext,
    ImportNote,
    ImportRejection,
    Measurement,
    to_record,
)
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.shared import gpus
from kernelkb.kernels.shared.gpus import GpuFacts

FORMATS = ("auto", kernel_tuner.FORMAT, t4.FORMAT, triton_autotune.FORMAT, inductor.FORMAT,
           autoheuristic.FORMAT)
Item = ExperienceRecord | ImportRejection | ImportNote
_MODULES = (kernel_tuner, t4, triton_autotune)  # the JSON formats, sniffed in this order


def iter_import(path: str | Path, fmt: str = "auto", *, gpu: str | None = None,
                license: str | None = None, source: str | None = None,
                kernel: str | None = None) -> Iterator[tuple[str, Item]]:
    """Records of every data file under ``path`` as ("file:position", item). ``fmt``:
    auto (sniff each file), or one of ``FORMATS`` (other files are skipped with a note).
    ``gpu`` / ``kernel`` stand in where a file does not say; ``license`` overrides the
    LICENSE file; ``source`` replaces the data set's folder name in record sources.
    Raises ValueError for an unknown format or ``gpu``, FileNotFoundError for no path."""
    for _, items in iter_files(path, fmt, gpu=gpu, license=license, source=source,
                               kernel=kernel):
        yield from items


def iter_files(path: str | Path, fmt: str = "auto", *, gpu: str | None = None,
               license: str | None = None, source: str | None = None,
               kernel: str | None = None
               ) -> Iterator[tuple[str, Iterator[tuple[str, Item]]]]:
    """``iter_import`` one file at a time: (file's source name, its items)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    chosen: GpuFacts | gpus.UnknownPart | None = None
    if gpu:
        chosen = gpus.lookup(gpu)
        if chosen is None:  # a part the table lacks: under its name, its architecture's
            family = gpus.family_facts(gpu)
            if family is None:
                raise ValueError(gpus.unknown_gpu_message(gpu))
            chosen = gpus.UnknownPart(gpu.strip(), family["arch"], family["vendor"])
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"no such file or folder: {root}")
    if not (root.is_file() or root.is_dir()):
        raise ValueError(f"{root}: not a regular file or a folder (a pipe or a device)")
    for cached in (files.license_file, files.sibling_spec, files.sibling_devices,
                   files.triton_versions):
        cached.cache_clear()  # files may have changed since an earlier import
    for file in files.walk(root):
        yield files.source_name(file, root, source), import_file(
            file, root, fmt, gpu=chosen, license=license, source=source, kernel=kernel)


def import_file(file: Path, root: Path, fmt: str, *,
                gpu: GpuFacts | gpus.UnknownPart | None = None, license: str | None = None,
                source: str | None = None, kernel: str | None = None
                ) -> Iterator[tuple[str, Item]]:
    """One file's items; a file it cannot use is one rejection or one note, never a raise."""
    name = files.source_name(file, root, source)
    if file.is_dir():  # walk() names the folders it could not list
        yield name, ImportRejection(name, (("<folder>", "cannot be listed: permission "
                                            "denied, or it went away"),))
        return
    if files.is_text(file):
        yield from _import_log(file, name, fmt, gpu=gpu, license=license)
        return
    recovered: list[str] = []  # an open Kernel Tuner cache's note
    try:
        data = files.load_json(file)
    except ValueError as exc:
        reopened = _open_cache(file)
        if reopened is None:
            yield name, ImportRejection(name, (("<file>", str(exc)),))
            return
        data, note = reopened
        recovered.append(note)
    module = next((m for m in _MODULES if m.matches(data)), None)
    if module is None and triton_autotune.kernel_name_of(file.name):  # damaged, not other
        keys = ", ".join(list(data)[:6]) if isinstance(data, dict) else type(data).__name__
        yield name, ImportRejection(name, (("<file>", "named as a Triton autotune cache, but "
                                            "it holds no 'key' and 'configs_timings' list "
                                            f"(top level: {keys})"),))
        return
    if module is None and triton_autotune.is_compiled_metadata(file.name, data):
        yield name, ImportNote(name, "skipped: Triton compile metadata, not tuning data",
                               skip="triton-compiled")
        return
    if module is None or fmt not in ("auto", module.FORMAT):
        yield name, ImportNote(name, _skip_reason(data, fmt, module),
                               skip="other-format" if module else "not-tuning-data")
        return
    try:
        ctx, notes = _context(file, name, data, module, gpu=gpu, license=license,
                              kernel=kernel)
        entries = _entries(module, data, ctx)
    except ValueError as exc:
        field, _, reason = str(exc).partition(": ")
        yield name, ImportRejection(name, ((field, reason),))
        return
    except _MALFORMED as exc:  # a shape no check foresaw: the file, not the import, fails
        yield name, ImportRejection(name, (("<file>", _unreadable(module, exc)),))
        return
    for note in recovered + notes:
        yield name, ImportNote(name, note)
    yield from _items(name, ctx, module, entries)


def _open_cache(file: Path) -> tuple[dict[str, Any], str] | None:
    """A Kernel Tuner cache its run never closed, read as Kernel Tuner reads it."""
    try:
        text = files.read_bytes(file).decode("utf-8")
    except (ValueError, OSError, EOFError, zlib.error):
        return None
    return kernel_tuner.close_open_cache(text)


def _entries(module: Any, data: dict[str, Any], ctx: FileContext) -> Iterator[Any]:
    if module is kernel_tuner:
        return kernel_tuner.measurements(data)
    if module is t4:
        return t4.measurements(data, t4.time_unit(data))
    return triton_autotune.measurements(data, triton_autotune.header(data, ctx.kernel_name))


def _items(name: str, ctx: FileContext, module: Any, entries: Iterator[Any]
           ) -> Iterator[tuple[str, Item]]:
    """The file's entries as records, rejections and notes (a str entry is a note)."""
    measured_any = False
    try:
        for entry in entries:
            if isinstance(entry, str):
                yield name, ImportNote(name, entry)
                continue
            measured_any = True
            if isinstance(entry, Measurement):
                item = to_record(ctx, entry)
                where = f"{name}:{entry.position}"
            else:
                position, _, field, reason = entry
                where = f"{name}:{position}"
                item = ImportRejection(where, ((field, reason),))
            yield where, item
    except _MALFORMED as exc:  # the entries read so far stand; the rest of the file is one
        yield name, ImportRejection(name, (("<file>", _unreadable(module, exc)),))
        return
    except _UNREADABLE as exc:  # a log cut short in its gzip stream, a disk error
        yield name, ImportRejection(name, (("<file>", f"cannot read further: {exc}"),))
        return
    if not measured_any and module not in (inductor, autoheuristic):  # said, so that a run
        # that imported nothing shows why (those two say it with a note of their own)
        yield name, ImportNote(name, f"no entries: the {module.FORMAT} file measures nothing")


def _import_log(file: Path, name: str, fmt: str, *, gpu: GpuFacts | gpus.UnknownPart | None,
                license: str | None) -> Iterator[tuple[str, Item]]:
    """A text file: an AutoHeuristic data set (its first line says so), an Inductor log
    if it holds an AUTOTUNE table, else a note."""
    try:
        first = next(iter(files.read_lines(file)), "")
    except _UNREADABLE as exc:
        yield name, ImportRejection(name, (("<file>", f"cannot read: {exc}"),))
        return
    meta = autoheuristic.metadata(first)
    if meta is not None:
        yield from _import_autoheuristic(file, name, fmt, meta, gpu=gpu, license=license)
        return
    if fmt not in ("auto", inductor.FORMAT):
        yield name, ImportNote(name, f"skipped: a text file, and --format is {fmt}",
                               skip="other-format")
        return
    try:
        is_log = any(inductor.is_header(line) for line in files.read_lines(file))
    except _UNREADABLE as exc:
        yield name, ImportRejection(name, (("<file>", f"cannot read: {exc}"),))
        return
    if not is_log:
        yield name, ImportNote(name, "skipped: a text file with no 'AUTOTUNE op(...)' table "
                                     "(not an Inductor max-autotune log)",
                               skip="not-tuning-data")
        return
    if gpu is None:
        yield name, ImportRejection(name, (_no_gpu(inductor),))
        return
    ctx = FileContext(
        source=name, tool=inductor.TOOL, agent=inductor.AGENT, fmt=inductor.FORMAT,
        kernel_name=inductor.KERNEL, problem_size="unspecified", facts=gpu, device=None,
        gpu_from="--gpu", license=license or files.license_id(files.license_file(file.parent)),
        sha8=files.file_sha8(file), task_id="matmul", triton_version="unknown",
        torch_version="unknown", options=f"--gpu {gpu.name!r}")
    yield from _items(name, ctx, inductor, inductor.measurements(files.read_lines(file)))


def _import_autoheuristic(file: Path, name: str, fmt: str, meta: dict[str, Any], *,
                          gpu: GpuFacts | gpus.UnknownPart | None, license: str | None
                          ) -> Iterator[tuple[str, Item]]:
    """An AutoHeuristic data set: the GPU named by --gpu, of the file's capability."""
    if fmt not in ("auto", autoheuristic.FORMAT):
        yield name, ImportNote(name, f"skipped: an AutoHeuristic data set, and --format is "
                                     f"{fmt}", skip="other-format")
        return
    if gpu is None:
        yield name, ImportRejection(name, (_no_gpu(autoheuristic),))
        return
    if isinstance(gpu, GpuFacts) and gpu.arch != autoheuristic.arch(meta):
        yield name, ImportRejection(name, (("env.arch", (
            f"the data set was measured on a {autoheuristic.arch(meta)} GPU (device_capa "
            f"{meta['device_capa']}), and --gpu {gpu.name!r} is {gpu.arch}")),))
        return
    ctx = FileContext(
        source=name, tool=autoheuristic.TOOL, agent=autoheuristic.AGENT,
        fmt=autoheuristic.FORMAT, kernel_name=inductor.KERNEL, problem_size="unspecified",
        facts=gpu, device=None, gpu_from="--gpu",
        license=license or files.license_id(files.license_file(file.parent)),
        sha8=files.file_sha8(file), task_id="matmul", triton_version="unknown",
        torch_version="unknown", options=f"--gpu {gpu.name!r}")
    yield from _items(name, ctx, autoheuristic,
                      autoheuristic.measurements(files.read_lines(file)))


_MALFORMED = (TypeError, KeyError, AttributeError, IndexError, OverflowError, ValueError)
_UNREADABLE = (OSError, EOFError, zlib.error)


def _no_gpu(module: Any) -> tuple[str, str]:
    return ("env.gpu_name", f"a {module.TOOL} file does not name the GPU it was measured "
            "on: pass --gpu NAME, the GPU that ran it (e.g. --gpu 'NVIDIA H200')")


def _unreadable(module: Any, exc: Exception) -> str:
    return f"not readable as a {module.FORMAT} file: {type(exc).__name__}: {exc}"[:500]


def _skip_reason(data: Any, fmt: str, module: Any) -> str:
    if module is not None:
        return f"skipped: a {module.FORMAT} file, and --format is {fmt}"
    keys = ", ".join(list(data)[:6]) if isinstance(data, dict) else type(data).__name__
    return f"skipped: not a Kernel Tuner cache or T4 results file (top level: {keys})"


def _context(file: Path, name: str, data: dict[str, Any], module: Any, *,
             gpu: GpuFacts | gpus.UnknownPart | None, license: str | None,
             kernel: str | None
             ) -> tuple[FileContext, list[str]]:
    """The file's shared facts; ValueError("field: reason") rejects the whole file."""
    if module is triton_autotune:
        return _triton_context(file, name, data, gpu=gpu, license=license, kernel=kernel)
    spec = files.sibling_spec(file.parent) or {}
    if module is kernel_tuner:
        head = kernel_tuner.header(data)
        kernel_name, problem, device = kernel or head.kernel_name, head.problem_size, head.device
    else:
        t4.time_unit(data)  # an unknown unit rejects the file before any record
        kernel_name = kernel or spec.get("KernelName")
        problem = kernel_tuner.problem_size_text(spec.get("ProblemSize"))
        device = ""
    if not kernel_name:
        where = "kernel_name" if module is kernel_tuner else "KernelName"
        raise ValueError(f"{where}: the file names no kernel; pass --kernel NAME"
                         + ("" if module is kernel_tuner
                            else " or keep its T1 search-space file beside it"))
    facts, how, notes = _gpu(file, device, gpu)
    ctx = FileContext(
        source=name, tool=module.TOOL, agent=module.AGENT, fmt=module.FORMAT,
        kernel_name=str(kernel_name), problem_size=problem, facts=facts, device=device or None,
        gpu_from=how, license=license or files.license_id(files.license_file(file.parent)),
        sha8=files.file_sha8(file),
    )
    return ctx, notes


def _triton_context(file: Path, name: str, data: dict[str, Any], *,
                    gpu: GpuFacts | gpus.UnknownPart | None, license: str | None,
                    kernel: str | None
                    ) -> tuple[FileContext, list[str]]:
    """A Triton autotune file's context: its kernel from the file name (or --kernel), the
    task it maps onto, the GPU from --gpu, the Triton version from the compiled kernels
    beside it in the cache."""
    kernel_name = kernel or triton_autotune.kernel_name_of(file.name)
    if not kernel_name:
        raise ValueError(f"kernel_name: the file name does not end in "
                         f"{triton_autotune.SUFFIX} (<kernel>{triton_autotune.SUFFIX}); "
                         "pass --kernel NAME")
    head = triton_autotune.header(data, kernel_name)
    if gpu is None:
        raise ValueError(": ".join(_no_gpu(triton_autotune)))
    notes = list(head.notes)
    versions = files.triton_versions(file.parent.parent, kernel_name)
    if len(versions) > 1:
        notes.append(f"the cache holds {kernel_name} compiled by Triton {', '.join(versions)}:"
                     " the version is recorded as unknown")
    ctx = FileContext(
        source=name, tool=triton_autotune.TOOL, agent=triton_autotune.AGENT,
        fmt=triton_autotune.FORMAT, kernel_name=kernel_name,
        problem_size=head.shape.removeprefix("problem_size="), facts=gpu, device=None,
        gpu_from="--gpu", license=license or files.license_id(files.license_file(file.parent)),
        sha8=files.file_sha8(file), task_id=head.task,
        triton_version=versions[0] if len(versions) == 1 else "unknown",
        torch_version="unknown",
        options=f"--gpu {gpu.name!r}" + (f" --kernel {kernel!r}" if kernel else ""))
    return ctx, notes


def _gpu(file: Path, device: str, option: GpuFacts | gpus.UnknownPart | None
         ) -> tuple[GpuFacts | gpus.UnknownPart, str, list[str]]:
    if device.strip():
        found = gpus.lookup(device)
        if found is not None:
            notes = [f"the file names {device!r}: --gpu {option.name!r} not used"] \
                if option is not None and option.name != found.name else []
            return found, "the file's device_name", notes
        if option is not None:
            return option, "--gpu", [f"device {device!r} is not in the facts table: "
                                     f"took --gpu {option.name!r}"]
        arch, vendor = gpus.arch_from_name(device)
        part = gpus.UnknownPart(device.strip(), arch, vendor)
        return part, "the file's device_name (not in the facts table)", [
            f"device {device!r} is not in the facts table: imported under that name, "
            f"architecture {arch} (from the name), no other facts, so similarity and the "
            "ranker cannot place it; --gpu NAME takes a known part's facts instead"]
    if option is not None:
        return option, "--gpu", []
    found = gpus.lookup("", hint=file.name)
    if found is None:
        raise ValueError("env.gpu_name: the file names no device and its file name names "
                         f"no known GPU; pass --gpu NAME (known: "
                         f"{', '.join(gpus.known_names())})")
    family = [f for f in gpus.TABLE if f.family == found.family]
    if len(family) > 1:
        beside = {f.name for d in files.sibling_devices(file.parent)
                  if (f := gpus.lookup(d)) is not None and f.family == found.family}
        if len(beside) == 1:
            known = gpus.lookup(beside.pop())
            assert known is not None
            return known, "the file name, part from a cache beside it", \
                [f"GPU from the file name {file.name!r} and the cache beside it: {known.name}"]
        return found, "the file name", [
            f"GPU from the file name {file.name!r}: {found.name} (the {found.family} "
            f"family has {len(family)} parts; pass --gpu to choose another)"]
    return found, "the file name", [f"GPU from the file name {file.name!r}: {found.name}"]
