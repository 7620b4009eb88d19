"""The formats the importers read, in one list. Each file is sniffed against the formats
of its form (JSON or text) in this order, those whose match is cheap first; the first
that matches reads it. The CLI's ``--format`` choices are ``names()``."""

from __future__ import annotations

from kernelkb.kb.importers import autoheuristic, inductor, kernel_tuner, t4, triton_autotune
from kernelkb.kb.importers.importer import Importer

IMPORTERS: tuple[Importer, ...] = (
    kernel_tuner.IMPORTER,
    t4.IMPORTER,
    triton_autotune.IMPORTER,
    inductor.IMPORTER,
    autoheuristic.IMPORTER,
)
AUTO = "auto"  # the --format that sniffs each file


def names() -> tuple[str, ...]:
    """The --format values: "auto", then each format's name."""
    return (AUTO, *(importer.name for importer in IMPORTERS))
