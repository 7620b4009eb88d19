"""Session-wide setup, imported before any test module is collected.

Without CUDA, Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1), which
checks correctness only, never speed. The variable must be set before triton is first
imported anywhere in the process: triton.language builds its own @jit helpers (tl.max,
tl.sum, ...) at import, in interpreter form only if the variable is already set. A test
module collected early that imports triton (through kernels or the sandbox) would
otherwise leave those helpers compiled-mode and every interpreted kernel would fail with
"Cannot call @triton.jit'd outside of the scope of a kernel".
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


# -- team-scale backends: PostgreSQL + a Chroma server, started once per session ----------
import uuid  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import servers  # noqa: E402  (tests/servers.py)

# .ci/run sets this: there a missing server binary fails the run instead of skipping
_REQUIRED = os.environ.get("KERNELKB_REQUIRE_SERVERS") == "1"


def _unavailable(reason: str | None) -> None:
    if reason:
        if _REQUIRED:
            pytest.fail(f"KERNELKB_REQUIRE_SERVERS=1 but {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[servers.Postgres]:
    _unavailable(servers.postgres_available())
    pg = servers.start_postgres()
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture(scope="session")
def chroma_server() -> Iterator[servers.ChromaServer]:
    _unavailable(servers.chroma_available())
    chroma = servers.start_chroma()
    try:
        yield chroma
    finally:
        chroma.stop()


@pytest.fixture
def team_backend(postgres_server: servers.Postgres,
                 chroma_server: servers.ChromaServer) -> dict[str, Any]:
    """Settings overrides for a fresh team store: an empty PostgreSQL database and an
    unused collection on the Chroma server."""
    return {"db_url": postgres_server.new_database(), "chroma_host": chroma_server.host,
            "chroma_port": chroma_server.port, "chroma_collection": f"c{uuid.uuid4().hex[:12]}"}


@pytest.fixture(params=["sqlite", pytest.param("team", marks=pytest.mark.postgres)])
def store_backend(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The store-layer tests run twice: on the embedded SQLite file + Chroma folder ({}:
    the defaults) and on PostgreSQL + a Chroma server."""
    if request.param == "sqlite":
        return {}
    return request.getfixturevalue("team_backend")
