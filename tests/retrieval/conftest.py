from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The fabricated test records and the shared embedder live in tests/kb/kb_testdata.py.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kb"))

from kb_testdata import make_knowledge  # noqa: E402

from kernelkb.kb.service import LocalKnowledge  # noqa: E402


@pytest.fixture
def knowledge(tmp_path: Path) -> LocalKnowledge:
    """A fresh store: real SQLite file and real Chroma folder under tmp_path."""
    return make_knowledge(tmp_path)
