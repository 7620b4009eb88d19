"""Files of an import: walking folders, reading (gzip) JSON and text logs, licence,
source names.

Pure file handling, no record logic: the format modules and the dispatcher build on it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import zlib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernelkb.kb import limits

DATA_SUFFIXES = (".json", ".json.gz")
LOG_SUFFIXES = (".log", ".txt", ".log.gz", ".txt.gz")  # Inductor's stderr, as users keep it
LINE_CHARS = 65536  # a longer line of a log is read in pieces (none of them a table line)
_LICENSE_NAMES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "COPYING")
# first lines of common licence texts -> SPDX ids; anything else keeps its first line
_LICENSE_IDS = (
    (re.compile(r"^MIT\b", re.I), "MIT"),
    (re.compile(r"^Apache License", re.I), "Apache-2.0"),
    (re.compile(r"^BSD 3-Clause", re.I), "BSD-3-Clause"),
    (re.compile(r"^BSD 2-Clause", re.I), "BSD-2-Clause"),
    (re.compile(r"^GNU GENERAL PUBLIC LICENSE", re.I), "GPL"),
    (re.compile(r"^GNU LESSER GENERAL PUBLIC LICENSE", re.I), "LGPL"),
    (re.compile(r"^Creative Commons Attribution 4\.0", re.I), "CC-BY-4.0"),
)
UNKNOWN_LICENSE = "unknown"


def is_data_file(path: Path) -> bool:
    return path.name.lower().endswith(DATA_SUFFIXES) or is_log_file(path)


def is_log_file(path: Path) -> bool:
    """A text log by its name (licence texts are not)."""
    return path.name.lower().endswith(LOG_SUFFIXES) and path.name not in _LICENSE_NAMES


def is_text(path: Path) -> bool:
    """Whether to read ``path`` as text lines rather than JSON: a log by name; a file named
    neither way (given by path, e.g. ``inductor.stderr``) when it does not open with JSON."""
    if path.name.lower().endswith(DATA_SUFFIXES):
        return False
    if is_log_file(path):
        return True
    try:
        with path.open("rb") as handle:
            head = handle.read(2)
            if head == b"\x1f\x8b":
                with gzip.open(path) as unzipped:
                    head = unzipped.read(512)
            else:
                head += handle.read(510)
    except (OSError, EOFError, zlib.error):
        return False  # the JSON reader says why
    return head.lstrip()[:1] not in (b"{", b"[")


def read_lines(path: Path) -> Iterator[str]:
    """The file's lines without their ends, gunzipped by magic number, undecodable bytes
    replaced; line by line, so a whole run's stderr is never all in memory. Raises OSError,
    EOFError or zlib.error where the file cannot be read further."""
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    with gzip.open(path) if gzipped else path.open("rb") as handle:
        while line := handle.readline(LINE_CHARS):
            yield line.decode("utf-8", errors="replace").rstrip("\r\n")


def walk(path: Path) -> Iterator[Path]:
    """The data files under ``path`` (itself if a file), in a stable order, and each
    folder that cannot be listed (the importer reports it: rglob skipped such a folder
    without a word)."""
    if path.is_file():
        yield path
        return
    found: list[Path] = []

    def unlisted(error: OSError) -> None:
        found.append(Path(error.filename))

    for folder, subfolders, names in os.walk(path, onerror=unlisted):
        subfolders.sort()
        found.extend(Path(folder) / n for n in names
                     if is_data_file(Path(n)) and (Path(folder) / n).is_file())
    yield from sorted(found)


def read_bytes(path: Path, limit: int | None = None) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by magic number, not by name); a file
    past ``limit`` bytes, before or after gunzip, raises ValueError before it is all in
    memory (a small gzip can hold gigabytes)."""
    limit = limits.IMPORT_FILE_BYTES if limit is None else limit
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    if not gzipped and path.stat().st_size > limit:
        raise ValueError(f"the file is over {limit // 2**20} MiB")
    with gzip.open(path) if gzipped else path.open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"the file is over {limit // 2**20} MiB once gunzipped")
    return data


def load_json(path: Path) -> Any:
    """Parsed JSON; raises ValueError with the reason on bad gzip or JSON."""
    try:
        return json.loads(read_bytes(path))
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise ValueError(f"cannot read: {exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"invalid JSON: {exc}") from exc
    except RecursionError as exc:
        raise ValueError("invalid JSON: nested too deeply") from exc


def file_sha8(path: Path) -> str:
    """First 8 hex digits of the file's sha256: one file, one run id (read in chunks: a
    log can be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(2**20):
            digest.update(chunk)
    return digest.hexdigest()[:8]


@lru_cache(maxsize=64)
def triton_versions(cache_root: Path, kernel_name: str) -> tuple[str, ...]:
    """The Triton versions that compiled ``kernel_name`` into this Triton cache: the
    ``triton_version`` of each ``<hash>/<kernel_name>.json`` metadata file under
    ``cache_root`` (an autotune file's folder sits beside its compiled kernels' folders)."""
    found = []
    try:
        candidates = sorted(cache_root.glob(f"*/{glob_escape(kernel_name)}.json"))[:256]
    except OSError:
        return ()
    for candidate in candidates:
        try:
            data = json.loads(candidate.read_bytes()[:2**20])
        except (OSError, ValueError):
            continue
        version = data.get("triton_version") if isinstance(data, dict) else None
        if isinstance(version, str) and version.strip():
            found.append(version.strip())
    return tuple(dict.fromkeys(found))


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


@lru_cache(maxsize=256)
def license_file(folder: Path) -> Path | None:
    """The nearest licence file in ``folder`` or a parent folder."""
    for candidate in (folder, *folder.parents):
        for name in _LICENSE_NAMES:
            found = candidate / name
            if found.is_file():
                return found
    return None


def license_id(path: Path | None) -> str:
    """SPDX-style id from a licence file's first line ("MIT License" -> "MIT")."""
    if path is None:
        return UNKNOWN_LICENSE
    try:
        lines = [s.strip() for s in path.read_text(errors="replace").splitlines() if s.strip()]
    except OSError:
        return UNKNOWN_LICENSE
    if not lines:
        return UNKNOWN_LICENSE
    for pattern, spdx in _LICENSE_IDS:
        if pattern.search(lines[0]):
            version = re.search(r"Version (\d)", " ".join(lines[1:3]))
            return f"{spdx}-{version.group(1)}.0" if spdx in ("GPL", "LGPL") and version \
                else spdx
    return lines[0][:80]


def source_name(path: Path, root: Path, prefix: str | None = None) -> str:
    """``<data set>/<path inside it>``: the data set is the folder of the nearest licence
    file (so importing the data set or one of its folders names a file the same way),
    else the imported root. ``prefix`` replaces the data set's folder name."""
    path = path.resolve()
    licence = license_file(path.parent)
    base = licence.parent if licence is not None else (root if root.is_dir() else root.parent)
    base = base.resolve()
    try:
        inner = path.relative_to(base).as_posix()
    except ValueError:  # a licence above the file but not above the root: use the root
        inner = path.name
    return printable_name(f"{prefix or base.name}/{inner}")


def printable_name(text: str) -> str:
    """A file name as records and summaries can carry it: bytes that are not UTF-8 (read as
    surrogates) and control characters such as a newline are written as escapes."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


@lru_cache(maxsize=64)
def sibling_spec(folder: Path) -> dict[str, Any] | None:
    """The T1 search-space file beside data files (``KernelSpecification``: kernel name,
    problem size), if the folder holds exactly one."""
    specs = []
    for candidate in sorted(folder.glob("*.json")):
        try:
            data = load_json(candidate)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("KernelSpecification"), dict):
            specs.append(data["KernelSpecification"])
    return specs[0] if len(specs) == 1 else None


_DEVICE = re.compile(rb'"device_name"\s*:\s*"((?:[^"\\]|\\.)*)"')


@lru_cache(maxsize=64)
def sibling_devices(folder: Path) -> tuple[str, ...]:
    """Device names that the folder's Kernel Tuner caches write (read from each file's
    head, where the tool puts ``device_name``)."""
    names = []
    for candidate in sorted(folder.iterdir()):
        if not (candidate.is_file() and is_data_file(candidate)):
            continue
        try:
            with (gzip.open(candidate) if candidate.name.endswith(".gz")
                  else candidate.open("rb")) as handle:
                head = handle.read(65536)
        except (OSError, EOFError):
            continue
        found = _DEVICE.search(head)
        if found and found.group(1).strip():
            names.append(json.loads(b'"' + found.group(1) + b'"'))
    return tuple(dict.fromkeys(names))
