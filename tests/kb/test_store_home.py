"""One store per user: where it lives, that every command uses it from any directory, that
a read seeds an empty store, and that a store kept empty says how to fill it.

Real CLI (kernelkb.cli.main in process), real SQLite store; vectors off, so no embedding model
loads (the seeding and the home are what is under test, not the index)."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn

from kernelkb.api.app import create_app
from kernelkb.api.http_protocol import port_problem
from kernelkb.cli.main import main
from kernelkb.kb.settings import Settings
from kernelkb.service import LocalKnowledge

READ_COMMANDS = [["stats"], ["insights", "--op", "softmax"], ["query", "--op", "rmsnorm"],
                 ["export", "-o", "out.jsonl"], ["bootstrap", "--gpu", "h200"]]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """KERNELKB_HOME in tmp_path, the working directory elsewhere, vectors off."""
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELKB_VECTORS", "false")
    monkeypatch.delenv("KERNELKB_LOAD_SEEDS_ON_START", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path / "home"


def test_default_home_is_the_users_data_folder(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERNELKB_HOME", raising=False)
    monkeypatch.delenv("KERNELKB_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # platformdirs on Linux
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    assert settings.data_dir == tmp_path / "xdg" / "kernelkb"
    assert settings.database_url.endswith("/xdg/kernelkb/kernelkb.sqlite")
    assert settings.chroma_folder == tmp_path / "xdg" / "kernelkb" / "chroma"
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path / "mine"))
    assert Settings().data_dir == tmp_path / "mine"
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(tmp_path / "old-name"))  # the older name wins
    assert Settings().data_dir == tmp_path / "old-name"


def test_the_cache_folder_is_the_users_cache_folder(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """platformdirs places the cache (the ONNX graph, the task registry's summary) and
    follows XDG_CACHE_HOME on Linux, as the hand-written path did not."""
    from kernelkb.kernels.discovery import _summary_file
    from kernelkb.kernels.shared.folders import user_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert user_cache() == tmp_path / "cache" / "kernelkb"
    assert _summary_file() == tmp_path / "cache" / "kernelkb" / "task_registry.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert user_cache() == Path.home() / ".cache" / "kernelkb"


def test_the_test_session_never_uses_the_real_user_store() -> None:
    """tests/conftest.py points the home (and XDG_DATA_HOME, for subprocesses that drop
    KERNELKB_*) into a temporary folder for the whole session."""
    temp = Path(tempfile.gettempdir())
    assert Settings().data_dir == Path(os.environ["KERNELKB_HOME"])
    assert Settings().data_dir.is_relative_to(temp)
    assert Path(os.environ["XDG_DATA_HOME"]).is_relative_to(temp)


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=lambda a: a[0])
def test_every_read_command_seeds_an_empty_home_and_leaves_the_cwd_alone(
        home: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"empty store at {home}: loaded" in err
    assert (home / "kernelkb.sqlite").is_file()
    assert not (Path.cwd() / ".kernelkb").exists()
    kb = LocalKnowledge(Settings())
    try:
        assert kb.stats()["experiences"] > 400  # the shipped seeds
    finally:
        kb.close()


def test_commands_in_two_directories_share_one_store(home: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats"]) == 0
    first = json.loads(capsys.readouterr().out)
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    assert main(["stats"]) == 0
    captured = capsys.readouterr()
    again = json.loads(captured.out)
    assert again["store"] == str(home) == first["store"]
    assert again["experiences"] == first["experiences"] > 0
    assert "loaded" not in captured.err  # seeded once, by the first command
    assert not (other / ".kernelkb").exists()


def test_a_store_kept_empty_says_how_to_seed(home: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KERNELKB_LOAD_SEEDS_ON_START", "false")
    assert main(["insights", "--op", "softmax"]) == 0
    captured = capsys.readouterr()
    assert "is empty (KERNELKB_LOAD_SEEDS_ON_START=false): `kernelkb seed`" in captured.err
    assert captured.out.startswith("0 experiences")
    assert main(["seed"]) == 0
    capsys.readouterr()
    assert main(["insights", "--op", "softmax"]) == 0
    captured = capsys.readouterr()
    assert "empty" not in captured.err
    assert int(captured.out.split()[0]) > 0


def test_the_server_uses_the_home_and_seeds_it(home: Path) -> None:
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).json()
        assert health["experiences"] > 400
        assert (home / "kernelkb.sqlite").is_file()
        assert not (Path.cwd() / ".kernelkb").exists()
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_serve_refuses_a_port_in_use_before_loading_anything(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "--port" in err
    assert not home.exists()  # refused before the store opened or the model loaded
    assert port_problem("127.0.0.1", 70000) == "--port 70000: a port is 1-65535"


def test_mcp_over_http_on_a_port_in_use_is_one_line(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """uvicorn's own answer was a traceback and exit code 3."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert main(["mcp", "--http", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"kernelkb mcp: cannot listen on 127.0.0.1:{port}" in err
    assert "Traceback" not in err


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
