"""The API tests' one served store: a fresh store behind a live server that takes writes
with ``TOKEN`` only, one per test module (each module's records stay its own)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kb_testdata import make_knowledge
from live_server import TOKEN, live_server

from kernelkb.service import LocalKnowledge


@pytest.fixture(scope="module")
def api_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKnowledge, str]]:
    """The store and its server's base URL."""
    kb = make_knowledge(tmp_path_factory.mktemp("api"), api_token=TOKEN)
    with live_server(kb) as port:
        yield kb, f"http://127.0.0.1:{port}"
    kb.close()


@pytest.fixture(scope="module")
def url(api_store: tuple[LocalKnowledge, str]) -> str:
    """The base URL alone, for the tests that speak only HTTP."""
    return api_store[1]
