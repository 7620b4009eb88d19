"""Shared pieces of the optimizer tests: real stores under tmp_path, one shared embedder.

No CUDA here means every evaluation runs the Triton interpreter in the sandbox's
subprocess (correctness only, ~3 s each), so the end-to-end tests keep rounds and shapes
few and pass tiny shape lists explicitly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

_EMBEDDER: Any = None


def make_local_knowledge(root: Path) -> Any:
    """A real LocalKnowledge (SQLite file + Chroma folder) with the model loaded once."""
    global _EMBEDDER
    from kernelkb.kb.embedder import Embedder
    from kernelkb.kb.service import LocalKnowledge
    from kernelkb.kb.settings import Settings

    if _EMBEDDER is None:
        _EMBEDDER = Embedder()
    settings = Settings(data_dir=root, seeds_dir=root / "no-seeds", service_url=None)
    return LocalKnowledge(settings, embedder=_EMBEDDER)


@pytest.fixture
def local_knowledge(tmp_path: Path) -> Any:
    return make_local_knowledge(tmp_path / "kb")
