"""Session-wide setup, imported before any test module is collected.

Without CUDA, Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1), which
checks correctness only, never speed. The variable must be set before triton is first
imported anywhere in the process: triton.language builds its own @jit helpers (tl.max,
tl.sum, ...) at import, in interpreter form only if the variable is already set. A test
module collected early that imports triton (through kernels or the sandbox) would
otherwise leave those helpers compiled-mode and every interpreted kernel would fail with
"Cannot call @triton.jit'd outside of the scope of a kernel".

The one store fixture (``knowledge``: a fresh store under tmp_path, on the backend the
``backend`` fixture names; tests/kb runs it on both) and the one embedder (``embedder``:
loaded once a session, tests/kb/kb_testdata.py) are here.

The store's home is the user's data folder by default (kb/settings.py); every test runs
with KERNELKB_HOME (and XDG_DATA_HOME, for a subprocess that drops KERNELKB_*) in a fresh
temporary folder, and on a machine without a user store (CI) the session fails if one appeared.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch

from kernelkb.kb.settings import default_home

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


REAL_HOME = default_home()
_REAL_EXISTED = REAL_HOME.exists()  # on CI's clean machine: False, and so it must stay
TEST_ROOT = Path(tempfile.mkdtemp(prefix="kernelkb-tests-"))
os.environ["KERNELKB_HOME"] = str(TEST_ROOT / "home")
os.environ["XDG_DATA_HOME"] = str(TEST_ROOT / "xdg-data")
os.environ.pop("KERNELKB_DATA_DIR", None)


def pytest_sessionfinish(session, exitstatus) -> None:  # type: ignore[no-untyped-def]
    changed = not _REAL_EXISTED and REAL_HOME.exists()
    shutil.rmtree(TEST_ROOT, ignore_errors=True)
    if changed:
        print(f"\nthe tests wrote to the real user store {REAL_HOME}: a test or subprocess "
              "ignored KERNELKB_HOME")
        session.exitstatus = 1
# -- team-scale backends: PostgreSQL + a Chroma server, started once per session ----------
import uuid  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

import pytest  # noqa: E402
import servers  # noqa: E402  (tests/servers.py; pyproject's pytest pythonpath has tests/)

if TYPE_CHECKING:  # the store's modules load with the first test that asks for one
    from kernelkb.kb.embedder import Embedder
    from kernelkb.service import LocalKnowledge

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


@pytest.fixture
def backend() -> dict[str, Any]:
    """Settings overrides of the store ``knowledge`` opens: {} is the embedded SQLite file
    and Chroma folder. tests/kb/conftest.py overrides it with ``store_backend``."""
    return {}


@pytest.fixture
def knowledge(tmp_path: Path, backend: dict[str, Any]) -> LocalKnowledge:
    """A fresh store under tmp_path (no seeds), with the session's one embedder."""
    from kb_testdata import make_knowledge

    return make_knowledge(tmp_path, **backend)


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The test session's one Embedder: the model loads once, whichever test asks first."""
    from kb_testdata import shared_embedder

    return shared_embedder()
