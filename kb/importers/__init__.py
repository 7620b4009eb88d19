"""Importers of other people's tuning data (Kernel Tuner caches, T4 results, Triton
autotune caches, Inductor max-autotune logs) as experiences: ``iter_import(path, fmt)``
yields ("file:position", record or why not). See docs/importing.md."""

from kernelkb.kb.importers.dispatch import FORMATS, Item, import_file, iter_files, iter_import
from kernelkb.kb.importers.records import ImportNote, ImportRejection

__all__ = ["FORMATS", "ImportNote", "ImportRejection", "Item", "import_file", "iter_files",
           "iter_import"]
