from __future__ import annotations

from pathlib import Path

import pytest
from kb_testdata import make_knowledge

from retrieval.service import LocalKnowledge


@pytest.fixture
def knowledge(tmp_path: Path) -> LocalKnowledge:
    """A fresh store: real SQLite file and real Chroma folder under tmp_path."""
    return make_knowledge(tmp_path)
