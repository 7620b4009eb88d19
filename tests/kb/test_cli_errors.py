"""User errors get a message, not a traceback, and are caught before the store opens or a
model loads: unknown task, bad dtype, bad flag values, a missing file, an unknown id.

The real CLI (kb.cli.main) in process; the home is a fresh folder that must stay absent
when a command is refused before it needs the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.cli import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELKB_VECTORS", "false")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


REFUSED = [
    (["optimize", "sofmax"], "unknown task 'sofmax'; closest: 'softmax'; known: attention"),
    (["optimize", "softmax", "--dtype", "float64"],
     "--dtype 'float64': softmax runs in bfloat16, float16, float32"),
    (["optimize", "softmax", "--shapes", "huge"], "--shapes: unknown shape set 'huge'"),
    (["optimize", "softmax", "--sweep-shapes", "most"],
     "--sweep-shapes: unknown shape set 'most'"),
    (["optimize", "softmax", "--seeds", "0"], "--seeds 0: must be above 0"),
    (["optimize", "softmax", "--regime", "huge_rows"],
     "--regime 'huge_rows': softmax's regimes are short_rows, medium_rows, long_rows"),
    (["optimize", "softmax", "--timeout-s", "-1"], "--timeout-s -1.0: must be above 0"),
    (["optimize", "softmax", "--max-iters", "0"], "patience, max_iters and explore_every"),
    (["optimize", "softmax", "--target-speedup", "0.5"], "target_speedup must be > 1"),
    (["optimize", "softmax", "--agent", "llm"], "--agent llm needs a model"),
]


@pytest.mark.parametrize(("argv", "message"), REFUSED, ids=lambda v: "-".join(v)
                         if isinstance(v, list) else None)
def test_optimize_refuses_bad_arguments_before_anything_loads(
        home: Path, argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KERNELKB_LLM_MODEL", raising=False)
    assert main(argv) == 2
    assert message in caplog.text
    assert "Traceback" not in capsys.readouterr().err
    assert not home.exists()  # neither the store nor the seeds were touched


def test_a_task_name_in_another_case_is_the_task() -> None:
    import argparse

    from optimizer.command import check_arguments

    args = argparse.Namespace(task="SoftMax", dtype="float16", shapes="cpu",
                              sweep_shapes="auto", seeds=1, timeout_s=60.0, agent="offline")
    assert check_arguments(args) == "softmax"


@pytest.mark.parametrize(("argv", "message"), [
    (["query", "--op", "softmax", "-k", "0"], "k: Input should be greater than or equal to 1"),
    (["query", "--op", "softmax", "--max-chars", "10"], "max_chars: Input should be greater"),
    (["query", "--op", "softmax", "--source", "missing.py"], "--source missing.py: no such file"),
    (["query"], "--op is required"),
    (["bootstrap", "--op", "softmax", "--dtype", "fp64"],
     "--dtype 'fp64': one of float32, float16, bfloat16"),
    (["bootstrap", "--limit", "0"], "--limit 0: show at least 1"),
    (["revalidate", "--task", "sofmax"], "unknown task 'sofmax'; closest: 'softmax'"),
])
def test_read_commands_refuse_bad_values_with_a_message(
        home: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not home.exists()


def test_a_flag_that_is_not_a_number_gets_argparses_message(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["optimize", "softmax", "--max-iters", "many"])
    assert exit_.value.code == 2
    assert "argument --max-iters: invalid int value: 'many'" in capsys.readouterr().err


def test_an_unknown_id_is_a_message(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "0123456789abcdef"]) == 2
    assert "no experience '0123456789abcdef'" in capsys.readouterr().err
