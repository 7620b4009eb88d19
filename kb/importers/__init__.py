"""Importers of other people's tuning data (Kernel Tuner caches, T4 results, Triton
autotune caches, Inductor max-autotune logs, AutoHeuristic data sets) as experiences:
``iter_import(path, fmt)`` yields ("file:position", record or why not). Each format is a
module declaring an ``importer.Importer``, listed in ``registry.IMPORTERS``; the CLI's
``--format`` choices are ``registry.names()``. See docs/importing.md."""

from kernelkb.kb.importers.dispatch import Item, import_file, iter_files, iter_import
from kernelkb.kb.importers.records import ImportNote, ImportRejection
from kernelkb.kb.importers.registry import names

__all__ = ["ImportNote", "ImportRejection", "Item", "import_file", "iter_files", "iter_import",
           "names"]
