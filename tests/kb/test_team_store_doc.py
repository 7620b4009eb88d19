"""docs/team-store.md's commands, run as written: against a throwaway PostgreSQL cluster
whose superuser is not ``kernelkb`` (as on a real server: the role does not exist until
the doc makes it) and a ``chroma run`` server, ending in ``kernelkb serve`` answering.

Only the doc's placeholders are filled in: ``dbhost`` and ``chromahost`` are the loopback
cluster and Chroma server, their ports the free ones taken here, the token ``...`` a real
one. The lines are read from the doc itself, so a doc that skips a step (the role before
``createdb -O kernelkb``) fails here as it fails for a reader."""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
import servers

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "team-store.md"
SUPERUSER = "admin"  # the cluster's superuser: the doc's role is a new one


def _block() -> list[str]:
    """The doc's first bash block, one command a line, comments off."""
    text = DOC.read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "docs/team-store.md has no bash block"
    lines = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def _unavailable() -> str | None:
    for reason in (servers.postgres_available(), servers.chroma_available()):
        if reason:
            return reason
    for tool in ("createuser", "createdb"):
        if not shutil.which(tool):
            return f"the PostgreSQL client's {tool} is not installed"
    return None


def _cluster() -> tuple[Path, int]:
    """initdb with a superuser other than the doc's role; loopback, trust, a free port."""
    folder = Path(tempfile.mkdtemp(prefix="kernelkb-pgdoc-"))
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    folder.chmod(0o700)
    port = servers.free_port()
    servers._as_server_user([servers.pg_binary("initdb") or "initdb", "-D",
                             str(folder / "data"), "-U", SUPERUSER, "--auth=trust", "-E",
                             "UTF8", "--no-sync"])
    options = (f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off "
               "-c synchronous_commit=off")
    servers._as_server_user([servers.pg_binary("pg_ctl") or "pg_ctl", "-D",
                             str(folder / "data"), "-o", options, "-l",
                             str(folder / "server.log"), "-w", "-t", "60", "start"])
    return folder, port


def _wait(url: str, proc: subprocess.Popen[bytes], log: Path, seconds: float,
          **kwargs: object) -> httpx.Response:
    deadline = time.monotonic() + seconds
    while True:
        try:
            answer = httpx.get(url, timeout=10, **kwargs)  # type: ignore[arg-type]
            if answer.status_code < 500:
                return answer
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer (exit {proc.poll()}):\n"
                                 f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)


@pytest.mark.slow  # a cluster, a Chroma server and two service workers loading the model
def test_the_team_store_doc_runs_as_written(tmp_path: Path) -> None:
    reason = _unavailable()
    if reason:
        if os.environ.get("KERNELKB_REQUIRE_SERVERS") == "1":
            pytest.fail(f"KERNELKB_REQUIRE_SERVERS=1 but {reason}")
        pytest.skip(reason)
    seeds = tmp_path / "seeds"  # one small shipped file: the doc's serve seeds the store
    seeds.mkdir()
    shutil.copy(REPO / "seeds" / "revalidate_h200.jsonl", seeds)
    shipped = sum(1 for line in (seeds / "revalidate_h200.jsonl").read_text().splitlines()
                  if line.strip())
    folder, pg_port = _cluster()
    chroma_port, serve_port = servers.free_port(), servers.free_port()
    token = "team-doc-token"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELKB_", "PG"))}
    env.update(PGPORT=str(pg_port), PGUSER=SUPERUSER, KERNELKB_PORT=str(serve_port),
               KERNELKB_DATA_DIR=str(tmp_path / "home"), KERNELKB_SEEDS_DIR=str(seeds),
               HF_HUB_OFFLINE="1", ANONYMIZED_TELEMETRY="False",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    fill = {"@dbhost/": f"@127.0.0.1:{pg_port}/", "dbhost": "127.0.0.1",
            "chromahost": "127.0.0.1", "/srv/kernelkb-chroma": str(tmp_path / "chroma"),
            "8000": str(chroma_port), "=...": f"={token}"}
    running: list[subprocess.Popen[bytes]] = []
    serve_log = tmp_path / "serve.log"
    try:
        for line in _block():
            for placeholder, value in fill.items():
                line = line.replace(placeholder, value)
            words = shlex.split(line)
            if words[:2] == ["pip", "install"]:  # the extra this venv was made with
                import psycopg  # noqa: F401
                continue
            if words[0] == "export":
                env.update(word.split("=", 1) for word in words[1:])
                continue
            if words[:2] == ["chroma", "run"]:
                log = open(tmp_path / "chroma.log", "wb")  # noqa: SIM115
                running.append(subprocess.Popen(words, env=env, stdout=log,
                                                stderr=subprocess.STDOUT))
                _wait(f"http://127.0.0.1:{chroma_port}/api/v2/heartbeat", running[-1],
                      tmp_path / "chroma.log", 90)
                continue
            if words[:2] == ["kernelkb", "serve"]:
                log = open(serve_log, "wb")  # noqa: SIM115
                running.append(subprocess.Popen(words, env=env, stdout=log,
                                                stderr=subprocess.STDOUT))
                continue
            # createuser --pwprompt asks twice; no terminal here, so it reads stdin
            done = subprocess.run(words, env=env, input="pw\npw\n", text=True,
                                  capture_output=True, timeout=60, start_new_session=True)
            assert done.returncode == 0, f"{line}: {done.stderr}"
        assert running and running[-1].args[:2] == ["kernelkb", "serve"], _block()
        serve = running[-1]
        base = f"http://127.0.0.1:{serve_port}"
        health = _wait(f"{base}/health", serve, serve_log, 480)
        assert health.status_code == 200, health.text
        listed = httpx.get(f"{base}/experiences", params={"limit": 1}, timeout=60).json()
        assert listed["total"] == shipped  # seeded into PostgreSQL by the doc's service
        said = serve_log.read_text(errors="replace")
        assert "revalidate_h200.jsonl" in said, said[-2000:]  # seeding named the file
        from kb_testdata import record_dict

        record = record_dict(summary="written by the team", config={"TEAM": 1})
        refused = httpx.post(f"{base}/experiences", json=record, timeout=60)
        assert refused.status_code in (401, 403), refused.text
        stored = httpx.post(f"{base}/experiences", json=record, timeout=60,
                            headers={"Authorization": f"Bearer {token}"})
        assert stored.status_code == 201, stored.text
    finally:
        for proc in reversed(running):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        servers._as_server_user([servers.pg_binary("pg_ctl") or "pg_ctl", "-D",
                                 str(folder / "data"), "-m", "immediate", "-w", "stop"],
                                check=False)
        shutil.rmtree(folder, ignore_errors=True)
