"""The one interface every format module of the importers declares (``IMPORTER``).

The dispatcher knows formats only through it: how a file of the format is recognised
(``matches``), what the file says about itself before its entries (``head``: kernel,
problem size, device), and its entries (``read``). A new format is a module with an
``IMPORTER`` listed in ``registry.IMPORTERS``; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kernelkb.kb.importers import files
from kernelkb.kb.importers.records import FileContext, ImportNote, ImportRejection, Measurement
from kernelkb.kernels.shared.gpus import GpuFacts, UnknownPart

# what ``read`` yields: a measurement, a bad entry (position, iteration, field, reason),
# or a note (a str)
Event = Measurement | tuple[str, int, str, str] | str


def top_level(data: Any) -> str:
    """A JSON document's first keys (or its type), for a message about what it holds."""
    return ", ".join(list(data)[:6]) if isinstance(data, dict) else type(data).__name__


@dataclass(frozen=True)
class Source:
    """One file as a format sees it, with the options that stand in where it says nothing."""

    path: Path
    data: Any = None  # the JSON document; None for a text file
    kernel: str | None = None  # --kernel
    gpu: GpuFacts | UnknownPart | None = None  # --gpu

    def lines(self) -> Iterator[str]:
        """A text file's lines, read afresh on each call."""
        return files.read_lines(self.path)


@dataclass(frozen=True)
class FileHead:
    """What a file says about every entry in it, as ``FileContext`` takes it."""

    kernel_name: str
    problem_size: str = "unspecified"
    device: str = ""  # the GPU as the file names it; "" when it names none
    task_id: str | None = None  # the project task the configurations are points of
    triton_version: str = "none"
    torch_version: str = "none"
    options: str = ""  # options the record's command repeats besides --gpu
    notes: tuple[str, ...] = ()  # for the user, before the entries


@dataclass(frozen=True)
class Importer:
    """One format. ``head`` and ``read`` raise ValueError("field: reason") to reject the
    whole file."""

    name: str  # the --format value
    tool: str  # what wrote the file, as messages name it
    agent: str  # the records' provenance agent
    noun: str  # how a skip note names such a file: "a t4 file"
    form: Literal["json", "text"]  # one JSON document, or a log read line by line
    matches: Callable[[Source], bool]
    head: Callable[[Source], FileHead]
    read: Callable[[Source, FileContext], Iterator[Event]]
    needs_gpu: bool = False  # the file names no GPU, and its name is the tool's: --gpu
    costly_match: bool = False  # matches reads the whole file: not tried for another --format
    # a JSON file that no JSON reads: the document of an open file, closed as the tool
    # reads it, and a note saying so; None where it is not one
    recover: Callable[[str], tuple[Any, str] | None] | None = None
    # a JSON file no format matched, that this tool's files look like: why it is refused
    # or skipped (by source name, file name and document); None where it is not one
    unmatched: Callable[[str, str, Any], ImportRejection | ImportNote | None] | None = None

    def __post_init__(self) -> None:
        if not self.name or self.name == "auto" or self.name != self.name.strip().lower():
            raise ValueError(f"an importer's name is a lower-case --format value, not "
                             f"{self.name!r}")
        if self.form not in ("json", "text"):
            raise ValueError(f"{self.name}: form is 'json' or 'text', not {self.form!r}")
        if self.recover is not None and self.form != "json":
            raise ValueError(f"{self.name}: only a JSON format recovers an open file")
        if self.unmatched is not None and self.form != "json":
            raise ValueError(f"{self.name}: only a JSON format explains unmatched JSON")
