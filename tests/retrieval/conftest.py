"""The retrieval tests' one seeded store: the shipped seeds in a fresh SQLite store, vectors
off (names, rankings and predictions read SQL), built once per test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kb_testdata import make_knowledge

from kernelkb.service import LocalKnowledge

SEEDS = Path(__file__).resolve().parents[2] / "seeds"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKnowledge]:
    kb = make_knowledge(tmp_path_factory.mktemp("seeded"), seeds_dir=SEEDS, vectors=False)
    assert all(not r.rejected for r in kb.seed().values())
    yield kb
    kb.close()
