from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def backend(store_backend: dict[str, Any]) -> dict[str, Any]:
    """The store tests open ``knowledge`` (tests/conftest.py) twice: on the SQLite file +
    Chroma folder, and (the `team` run) on a fresh PostgreSQL database + a collection on
    a Chroma server."""
    return store_backend


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty KERNELKB_HOME (no vectors: the CLI tests read SQL) as the working dir."""
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELKB_VECTORS", "false")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"
