"""Throwaway PostgreSQL and Chroma servers for the team-scale tests.

A team shares one store: SQL on PostgreSQL, vectors on a Chroma server. These helpers
start the real servers on free loopback ports in temporary folders and stop them after:
PostgreSQL from the machine's binaries (``initdb``/``pg_ctl``, PostgreSQL 15 on the CI
image; run as the ``postgres`` user when the tests run as root, which PostgreSQL
refuses), Chroma with the ``chroma run`` command of the chromadb package. Each test gets
its own database and collection, so tests never see each other's rows.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

PG_BIN_DIRS = ("/usr/local/bin", "/usr/lib/postgresql/15/bin", "/usr/bin")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pg_binary(name: str) -> str | None:
    for folder in (os.environ.get("KERNELKB_PG_BIN", ""), *PG_BIN_DIRS):
        path = Path(folder) / name
        if folder and path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return shutil.which(name)


def postgres_available() -> str | None:
    """None when the tests can start PostgreSQL, else why not."""
    if not all(pg_binary(n) for n in ("initdb", "pg_ctl", "postgres")):
        return "PostgreSQL binaries (initdb, pg_ctl, postgres) not found"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    return None


def chroma_available() -> str | None:
    if _chroma_command() is None:
        return "the `chroma` command of the chromadb package is not installed"
    return None


def _chroma_command() -> list[str] | None:
    script = Path(sys.executable).parent / "chroma"
    if script.is_file():
        return [str(script)]
    found = shutil.which("chroma")
    return [found] if found else None


@dataclass
class Postgres:
    """A running cluster; ``new_database()`` gives each test an empty database."""

    folder: Path
    port: int
    user: str = "kernelkb"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "t") -> str:
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user={self.user} "
                             "dbname=postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        _as_server_user([pg_binary("pg_ctl") or "pg_ctl", "-D", str(self.folder / "data"),
                         "-m", "immediate", "-w", "stop"], check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


def _server_user() -> dict[str, object]:
    """Popen arguments that run a command as ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return {}
    return {"user": "postgres", "group": pwd.getpwnam("postgres").pw_gid,
            "extra_groups": []}


def _as_server_user(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120,
                          **_server_user())  # type: ignore[call-overload]


def start_postgres() -> Postgres:
    """initdb into a temporary folder (trust auth, loopback only, fsync off: a test
    cluster), then start it on a free port and wait until it accepts connections."""
    folder = Path(tempfile.mkdtemp(prefix="kernelkb-pg-"))
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    folder.chmod(0o700)
    port = free_port()
    data = folder / "data"
    pg = Postgres(folder=folder, port=port)
    _as_server_user([pg_binary("initdb") or "initdb", "-D", str(data), "-U", pg.user,
                     "--auth=trust", "-E", "UTF8", "--no-sync"])
    options = (f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
    _as_server_user([pg_binary("pg_ctl") or "pg_ctl", "-D", str(data), "-o", options,
                     "-l", str(folder / "server.log"), "-w", "-t", "60", "start"])
    return pg


@dataclass
class ChromaServer:
    folder: Path
    port: int
    proc: subprocess.Popen[bytes]
    host: str = "127.0.0.1"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_chroma() -> ChromaServer:
    """``chroma run`` on a free port over a temporary folder; waits for its heartbeat."""
    command = _chroma_command()
    assert command is not None
    folder = Path(tempfile.mkdtemp(prefix="kernelkb-chroma-"))
    port = free_port()
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    log = open(folder / "server.log", "wb")  # noqa: SIM115  (the server writes it)
    proc = subprocess.Popen([*command, "run", "--path", str(folder / "data"), "--host",
                             "127.0.0.1", "--port", str(port)], stdout=log,
                            stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=2).is_success:
                return ChromaServer(folder=folder, port=port, proc=proc)
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"chroma did not start: {(folder / 'server.log').read_text()}")
        time.sleep(0.2)


def backend_env(backend: dict[str, Any]) -> dict[str, str]:
    """The same overrides as KERNELKB_* environment variables, for CLI subprocesses."""
    names = {"db_url": "KERNELKB_DATABASE_URL", "chroma_host": "KERNELKB_CHROMA_HOST",
             "chroma_port": "KERNELKB_CHROMA_PORT",
             "chroma_collection": "KERNELKB_CHROMA_COLLECTION"}
    return {names[k]: str(v) for k, v in backend.items()}
