"""Import a file or folder of other people's tuning data: pick the format per file, find
the kernel and the GPU, and yield validated records (or why not) by "file:position".

The formats are ``registry.IMPORTERS``, each an ``importer.Importer``; nothing here
knows one by name. JSON files are sniffed by their top level; text files (*.log, *.txt,
or a file given by path that does not open with JSON) are read line by line.

The GPU of a file: the device name it writes when the facts table knows it; else
``--gpu``; else its file name (MI250X.json.gz). A file name that names only a family
(A100) takes the part a Kernel Tuner cache in the same folder names, if exactly one
does (a T4 file converted from that cache sits beside it); else the family's usual part.
A format that ``needs_gpu`` (Triton autotune caches, Inductor logs, AutoHeuristic data
sets) names no GPU by name, and its file names are the tool's (a cache hash could read as
"a100"): it takes ``--gpu`` only.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernelkb.kb.importers import files, registry
from kernelkb.kb.importers.importer import Event, Importer, Source, top_level
from kernelkb.kb.importers.records import (
    FileContext,
    ImportNote,
    ImportRejection,
    Measurement,
    to_record,
)
from kernelkb.kb.importers.registry import AUTO
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.shared import gpus
from kernelkb.kernels.shared.gpus import GpuFacts

Item = ExperienceRecord | ImportRejection | ImportNote


def iter_import(path: str | Path, fmt: str = AUTO, *, gpu: str | None = None,
                license: str | None = None, source: str | None = None,
                kernel: str | None = None) -> Iterator[tuple[str, Item]]:
    """Records of every data file under ``path`` as ("file:position", item). ``fmt``:
    auto (sniff each file), or a format of ``registry.names()`` (other files are skipped
    with a note).
    ``gpu`` / ``kernel`` stand in where a file does not say; ``license`` overrides the
    LICENSE file; ``source`` replaces the data set's folder name in record sources.
    Raises ValueError for an unknown format or ``gpu``, FileNotFoundError for no path."""
    for _, items in iter_files(path, fmt, gpu=gpu, license=license, source=source,
                               kernel=kernel):
        yield from items


def iter_files(path: str | Path, fmt: str = AUTO, *, gpu: str | None = None,
               license: str | None = None, source: str | None = None,
               kernel: str | None = None
               ) -> Iterator[tuple[str, Iterator[tuple[str, Item]]]]:
    """``iter_import`` one file at a time: (file's source name, its items)."""
    if fmt not in registry.names():
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(registry.names())}")
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
    recovered: list[str] = []  # the note of an open file read as its tool reads it
    form = "text" if files.is_text(file) else "json"
    if form == "text":
        opened = Source(file, kernel=kernel, gpu=gpu)
    else:
        try:
            opened = Source(file, files.load_json(file), kernel=kernel, gpu=gpu)
        except ValueError as exc:
            reopened = _recover(file)
            if reopened is None:
                yield name, ImportRejection(name, (("<file>", str(exc)),))
                return
            opened = Source(file, reopened[0], kernel=kernel, gpu=gpu)
            recovered.append(reopened[1])
    try:
        importer, passed_over = _sniff(opened, form, fmt)
    except _UNREADABLE as exc:
        yield name, ImportRejection(name, (("<file>", f"cannot read: {exc}"),))
        return
    if importer is None:
        yield name, _unmatched(name, opened, form, fmt, passed_over)
        return
    if fmt not in (AUTO, importer.name):
        yield name, ImportNote(name, f"skipped: {importer.noun}, and --format is {fmt}",
                               skip="other-format")
        return
    try:
        ctx, notes = _context(name, opened, importer, license=license)
        entries = importer.read(opened, ctx)
    except ValueError as exc:
        field, _, reason = str(exc).partition(": ")
        yield name, ImportRejection(name, ((field, reason),))
        return
    except _MALFORMED as exc:  # a shape no check foresaw: the file, not the import, fails
        yield name, ImportRejection(name, (("<file>", _unreadable(importer, exc)),))
        return
    for note in recovered + notes:
        yield name, ImportNote(name, note)
    yield from _items(name, ctx, importer, entries)


def _recover(file: Path) -> tuple[Any, str] | None:
    """A file that is not JSON as it stands, read as the tool that left it open reads it."""
    try:
        text = files.read_bytes(file).decode("utf-8")
    except (ValueError, OSError, EOFError, zlib.error):
        return None
    for importer in registry.IMPORTERS:
        if importer.recover is not None and (found := importer.recover(text)) is not None:
            return found
    return None


def _sniff(opened: Source, form: str, fmt: str) -> tuple[Importer | None, bool]:
    """The first format of the file's form that matches it, cheap matches first, and
    whether a format was passed over (a costly match, and --format names another)."""
    passed_over = False
    for importer in sorted((i for i in registry.IMPORTERS if i.form == form),
                           key=lambda i: i.costly_match):
        if importer.costly_match and fmt not in (AUTO, importer.name):
            passed_over = True
        elif importer.matches(opened):
            return importer, False
    return None, passed_over


def _unmatched(name: str, opened: Source, form: str, fmt: str, passed_over: bool
               ) -> ImportRejection | ImportNote:
    """What to say of a file no format matched."""
    if passed_over:
        return ImportNote(name, f"skipped: a {form} file, and --format is {fmt}",
                          skip="other-format")
    if form == "text":
        return ImportNote(name, "skipped: a text file with no 'AUTOTUNE op(...)' table "
                                "(not an Inductor max-autotune log)", skip="not-tuning-data")
    for importer in registry.IMPORTERS:
        said = importer.unmatched(name, opened.path.name, opened.data) \
            if importer.unmatched is not None else None
        if said is not None:
            return said
    return ImportNote(name, "skipped: not a Kernel Tuner cache or T4 results file (top "
                            f"level: {top_level(opened.data)})", skip="not-tuning-data")


def _items(name: str, ctx: FileContext, importer: Importer, entries: Iterator[Event]
           ) -> Iterator[tuple[str, Item]]:
    """The file's entries as records, rejections and notes (a str entry is a note)."""
    said_any = False
    try:
        for entry in entries:
            said_any = True
            if isinstance(entry, str):
                yield name, ImportNote(name, entry)
                continue
            if isinstance(entry, Measurement):
                item: Item = to_record(ctx, entry)
                where = f"{name}:{entry.position}"
            else:
                position, _, field, reason = entry
                where = f"{name}:{position}"
                item = ImportRejection(where, ((field, reason),))
            yield where, item
    except _MALFORMED as exc:  # the entries read so far stand; the rest of the file is one
        yield name, ImportRejection(name, (("<file>", _unreadable(importer, exc)),))
        return
    except _UNREADABLE as exc:  # a log cut short in its gzip stream, a disk error
        yield name, ImportRejection(name, (("<file>", f"cannot read further: {exc}"),))
        return
    if not said_any:  # said, so that a run that imported nothing shows why
        yield name, ImportNote(name, f"no entries: the {importer.name} file measures nothing")


_MALFORMED = (TypeError, KeyError, AttributeError, IndexError, OverflowError, ValueError)
_UNREADABLE = (OSError, EOFError, zlib.error)


def _no_gpu(importer: Importer) -> str:
    return (f"env.gpu_name: a {importer.tool} file does not name the GPU it was measured "
            "on: pass --gpu NAME, the GPU that ran it (e.g. --gpu 'NVIDIA H200')")


def _unreadable(importer: Importer, exc: Exception) -> str:
    return f"not readable as a {importer.name} file: {type(exc).__name__}: {exc}"[:500]


def _context(name: str, opened: Source, importer: Importer, *, license: str | None
             ) -> tuple[FileContext, list[str]]:
    """The file's shared facts; ValueError("field: reason") rejects the whole file."""
    head = importer.head(opened)
    if importer.needs_gpu and opened.gpu is None:
        raise ValueError(_no_gpu(importer))
    facts, how, notes = _gpu(opened.path, head.device, opened.gpu)
    gpu_option = f"--gpu {facts.name!r}" if importer.needs_gpu else ""
    folder = opened.path.parent
    ctx = FileContext(
        source=name, tool=importer.tool, agent=importer.agent, fmt=importer.name,
        kernel_name=head.kernel_name, problem_size=head.problem_size, facts=facts,
        device=head.device or None, gpu_from=how,
        license=license or files.license_id(files.license_file(folder)),
        sha8=files.file_sha8(opened.path), task_id=head.task_id,
        triton_version=head.triton_version, torch_version=head.torch_version,
        options=" ".join(o for o in (gpu_option, head.options) if o))
    return ctx, [*head.notes, *notes]


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
