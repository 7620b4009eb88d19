"""The sandbox contains what it runs (optimizer/sandbox/jail.py, runner.py): a planted
probe tries to write the project and its task modules, read a fake ~/.ssh/id_rsa and a
fake store, read API keys from its environment, reach a loopback server, and leave a
setsid child running. Inside the namespaces every attempt fails; without them (the
fallback) the environment is still scrubbed, the child still ended, and the feedback
says the run was not contained."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import evaluate, jail, strays
from kernelkb.optimizer.sandbox.runner import _PROJECT_ROOT

BAD = Path(__file__).parents[2] / "bad_kernels"
SECRETS = {"OPENAI_API_KEY": "sk-probe-secret", "KERNELKB_API_TOKEN": "kb-probe-token"}


class LoopbackServer:
    """Accepts on 127.0.0.1 and counts connections (the probe must make none)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A fake HOME with an ssh key, a fake store, secrets in the environment, a server."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("FAKE-PRIVATE-KEY")
    store = tmp_path / "store"
    store.mkdir()
    (store / "kernelkb.sqlite").write_text("FAKE-STORE-ROWS")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(store))
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    server = LoopbackServer()
    yield home, store / "kernelkb.sqlite", server
    server.close()


def probe_source(project: Path, home: Path, store: Path, port: int, marker: str) -> str:
    source = (BAD / "escape_probe.py").read_text()
    for token, value in (("__PROJECT__", str(project)), ("__FAKE_HOME__", str(home)),
                         ("__STORE__", str(store)), ("__PORT__", str(port)),
                         ("__MARKER__", marker)):
        source = source.replace(token, value)
    return source


def survivors(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def probe_report(result) -> str:
    assert result.error_kind == "runtime_error", result.text
    assert "PROBE" in result.error_message, result.error_message
    return result.error_message


@pytest.mark.skipif(jail.unavailable_reason() is not None,
                    reason=f"no namespaces here: {jail.unavailable_reason()}")
def test_the_probe_reaches_nothing_inside_the_namespaces(planted):
    home, store, server = planted
    marker = f"probe-{uuid.uuid4().hex}"
    project = Path(_PROJECT_ROOT)
    before = (project / "kernels" / "softmax.py").stat().st_mtime_ns
    result = evaluate("softmax", probe_source(project, home, store, server.port, marker),
                      shapes=[(1, 7)], seeds=1,
                      refuse_surroundings=False)  # the jail alone
    report = probe_report(result)
    # a host without a delegated cgroup adds "; limits per process only (...)" (the H200)
    assert result.containment.split("; ")[0] == "namespaces"
    assert report.split("PROBE ")[1].split(" | ")[0].startswith("cwd=")
    assert " | " not in report.split("PROBE ")[1].split("\n")[0], report  # nothing else
    assert not (project / f"pwned_{marker}").exists()
    assert (project / "kernels" / "softmax.py").stat().st_mtime_ns == before
    assert server.accepted == 0
    assert survivors(marker) == []
    assert "sandbox:" not in result.text


def test_without_namespaces_the_environment_is_still_scrubbed_and_the_child_ended(
        planted, tmp_path, monkeypatch):
    home, store, server = planted
    monkeypatch.setattr(jail, "mode", lambda: (None, "disabled by the test"))
    marker = f"probe-{uuid.uuid4().hex}"
    decoy = tmp_path / "decoy_project"  # the fallback cannot protect files: not the real one
    (decoy / "kernels").mkdir(parents=True)
    result = evaluate("softmax", probe_source(decoy, home, store, server.port, marker),
                      shapes=[(1, 7)], seeds=1,
                      refuse_surroundings=False)  # the jail alone
    report = probe_report(result)
    for value in SECRETS.values():
        assert value not in report
    cwd = report.split("cwd=")[1].split(" | ")[0].split("\n")[0]
    assert cwd != os.getcwd() and "kernelkb_sandbox_" in cwd
    assert survivors(marker) == []
    assert result.containment.split("; ")[0] == "uncontained: disabled by the test"
    assert "sandbox: uncontained: disabled by the test" in result.text


def test_outside_an_evaluation_no_process_counts_as_a_stray():
    """strays.py without a PID namespace: only the evaluation's own cgroup counts, so a
    process in none (this test's) finds nothing and ends nothing of the user's."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert strays.alive(os.getpid()) == []
        assert strays.end(os.getpid(), wait_s=0.1) == []
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
