from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kb_testdata import make_knowledge

from kernelkb.kb.service import LocalKnowledge


@pytest.fixture
def knowledge(tmp_path: Path, store_backend: dict[str, Any]) -> LocalKnowledge:
    """A fresh store: SQLite file + Chroma folder under tmp_path, or (the `team` run)
    a fresh PostgreSQL database + a collection on a Chroma server."""
    return make_knowledge(tmp_path, **store_backend)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty KERNELKB_HOME (no vectors: the CLI tests read SQL) as the working dir."""
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELKB_VECTORS", "false")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"
