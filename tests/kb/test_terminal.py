"""What a person sees: in a pipe, a CLI command's stderr carries its own lines only (no
model-load bar, no library warnings, nothing that redraws); on a terminal (a real pseudo
terminal) the same command draws its progress bar."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kb_testdata import record_dict

from kernelkb.kb import terminal

ROOT = Path(__file__).resolve().parents[2]
NOISE = ("Loading weights", "ForCausalLMLoss", "loss_type", "it/s]", "Batches:",
         "Loading SentenceTransformer", "huggingface/tokenizers")
REDRAW = re.compile(r"\r(?!\n)|\x1b\[")  # carriage returns and ANSI escapes: bar garbage


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "KERNELKB_PROGRESS", "TRANSFORMERS_VERBOSITY",
                        "HF_HUB_DISABLE_PROGRESS_BARS", "TERM")}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TERM="xterm-256color",
               KERNELKB_DATA_DIR=str(tmp_path / "store"),
               KERNELKB_SEEDS_DIR=str(tmp_path / "no-seeds"))
    return env


def _records(tmp_path: Path, n: int = 3) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(record_dict(summary=f"terminal test {i}",
                                                   config={"B": i})) + "\n"
                            for i in range(n)))
    return path


def test_a_piped_command_prints_no_bars_and_no_library_noise(tmp_path: Path) -> None:
    """Embedding loads the model (the source of the load bar); stdout keeps the result."""
    done = subprocess.run([sys.executable, "-m", "kernelkb", "ingest", str(_records(tmp_path))],
                          capture_output=True, text=True, env=_env(tmp_path), timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 accepted, 0 duplicate, 0 rejected" in done.stdout
    for noise in NOISE:
        assert noise not in done.stderr, done.stderr
    assert not REDRAW.search(done.stderr), repr(done.stderr)
    for line in done.stderr.splitlines():  # anything left is our own log format
        assert re.match(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) (kb|retrieval|optimizer)", line), \
            line


@pytest.mark.slow  # a second model load in a subprocess; CI runs it (-m slow)
def test_the_frozen_bf16_model_loads_without_warnings(tmp_path: Path) -> None:
    """The bf16 path (CPUs with native bf16) traces the transformer; transformers used to
    warn there about a training loss (ForCausalLMLoss) on every first embedding."""
    code = ("from pathlib import Path; from kernelkb.kb.embedder import Embedder; "
            f"e = Embedder(bf16=True, cache_dir=Path({str(tmp_path)!r})); "
            "print(e.embed(['softmax: [tiling] one row per program']).shape)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, 384)"
    assert done.stderr == "", done.stderr


@pytest.mark.slow  # a third CLI process; CI runs it (-m slow)
def test_on_a_terminal_the_command_draws_its_progress(tmp_path: Path) -> None:
    records = _records(tmp_path, n=300)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "kernelkb", "ingest", str(records)],
                            stdin=follower, stdout=follower, stderr=follower,
                            env=_env(tmp_path), cwd=tmp_path)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(timeout=300) == 0, seen[-2000:]
    text = seen.decode("utf-8", "replace")
    assert "ingest in.jsonl" in text  # the bar's description, drawn while it ran
    assert "300 accepted" in text
    for noise in NOISE:
        assert noise not in text


@pytest.mark.parametrize(("env", "tty", "expected"), [
    ({}, True, True), ({}, False, False), ({"CI": "true"}, True, False),
    ({"TERM": "dumb"}, True, False), ({"KERNELKB_PROGRESS": "0"}, True, False),
    ({"KERNELKB_PROGRESS": "1"}, False, True)])
def test_bars_only_on_an_interactive_terminal(monkeypatch: pytest.MonkeyPatch, env: dict,
                                              tty: bool, expected: bool) -> None:
    for name in ("CI", "TERM", "KERNELKB_PROGRESS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    class Stream:
        def isatty(self) -> bool:
            return tty

    assert terminal.interactive(Stream()) is expected  # type: ignore[arg-type]
