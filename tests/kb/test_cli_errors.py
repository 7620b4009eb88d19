"""User errors get a message, not a traceback, and are caught before the store opens or a
model loads: unknown task, bad dtype, bad flag values, a missing file, an unknown id.

The real CLI (kernelkb.cli.main) in process; the home is a fresh folder that must stay absent
when a command is refused before it needs the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelkb.cli.main import main

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
    (["optimize", "softmax", "--gpus", "2"], "--gpus 2: this host shows 0 GPU(s)"),
    (["optimize", "softmax", "--gpus", "0,0"], "--gpus '0,0': all, a count, or distinct ids"),
    (["optimize", "softmax", "--gpus", "all", "--ray", "auto"], "--gpus and --ray: give one"),
]


@pytest.mark.parametrize(("argv", "message"), REFUSED, ids=lambda v: "-".join(v)
                         if isinstance(v, list) else None)
def test_optimize_refuses_bad_arguments_before_anything_loads(
        home: Path, argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KERNELKB_LLM_MODEL", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    # a plain sentence, not a log record ("ERROR kernelkb.cli.optimize: ...")
    assert err.startswith("kernelkb optimize: ") and "ERROR" not in err
    assert "Traceback" not in err
    assert not home.exists()  # neither the store nor the seeds were touched


def test_a_task_name_in_another_case_is_the_task() -> None:
    import argparse

    from kernelkb.cli.optimize import check_arguments

    args = argparse.Namespace(task="SoftMax", dtype="float16", shapes="cpu",
                              sweep_shapes="auto", seeds=1, timeout_s=60.0, agent="offline")
    assert check_arguments(args) == "softmax"


@pytest.mark.parametrize(("argv", "message"), [
    (["query", "--op", "softmax", "-k", "0"],
     "--limit 0: Input should be greater than or equal to 1"),
    (["query", "--op", "softmax", "--max-chars", "10"], "--max-chars 10: Input should be"),
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


def _store(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small store: two records, no seeds."""
    import json

    from kb_testdata import record_dict

    monkeypatch.setenv("KERNELKB_LOAD_SEEDS_ON_START", "false")
    data = home.parent / "two.jsonl"
    data.write_text("".join(json.dumps(record_dict(summary=f"record {n}", iteration=n + 1))
                            + "\n" for n in range(2)))
    assert main(["ingest", str(data)]) == 0


def test_export_writes_whole_or_not_at_all(home: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Opening the target emptied it first: a full disk or Ctrl-C left it torn and the old
    export gone. Now an error leaves the old file as it was, and says why in one line."""
    _store(home, monkeypatch)
    target = home.parent / "out.jsonl"
    target.write_text("the previous export\n")

    from kernelkb.kb import queries as kb_queries

    real = kb_queries.iter_records

    def half_then_stop(session, **kwargs):  # type: ignore[no-untyped-def]
        iterator = real(session, **kwargs)
        yield next(iterator)
        raise KeyboardInterrupt

    monkeypatch.setattr(kb_queries, "iter_records", half_then_stop)
    assert main(["export", "-o", str(target)]) == 130
    assert target.read_text() == "the previous export\n"
    assert [p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")] == []
    monkeypatch.setattr(kb_queries, "iter_records", real)
    assert main(["export", "-o", str(target)]) == 0
    assert len(target.read_text().splitlines()) == 2
    capsys.readouterr()
    for bad, message in ((home.parent / "no" / "x.jsonl", "No such folder"),
                         (home.parent, "Is a directory"), (Path("/dev/full"), "No space")):
        assert main(["export", "-o", str(bad)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err


def test_files_and_stores_that_cannot_be_used_are_one_line(
        home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _store(home, monkeypatch)
    capsys.readouterr()
    binary = home.parent / "kernel.py"
    binary.write_bytes(b"\xff\xfe\x00")
    cases = [
        (["ingest", str(home.parent)], "not a regular file"),
        (["ingest", "/dev/zero"], "not a regular file"),  # once: read until memory ran out
        (["query", "--op", "softmax", "--source", str(binary)], "not UTF-8 text"),
        (["bootstrap", "--op", "softmax", "--gpu", "My GPU", "--sm-count", "10",
          "--bandwidth", "nan", "--smem", "100"], "mem_bandwidth_gbps"),
        (["bootstrap", "--op", "softmax", "--gpu", "My GPU", "--sm-count", "0",
          "--bandwidth", "100", "--smem", "100"], "sm_count"),
        (["import", str(home.parent), "--license", "x" * 5000], "--license: 1 to 256"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    for url, message in (("garbage", "KERNELKB_DATABASE_URL"),
                         ("sqlite://", "in memory"),
                         (f"sqlite:///{home.parent}", "cannot be used")):
        monkeypatch.setenv("KERNELKB_DATABASE_URL", url)
        assert main(["stats"]) == 2, url
        err = capsys.readouterr().err
        assert message in err and len(err.splitlines()) == 1, (url, err)
    monkeypatch.delenv("KERNELKB_DATABASE_URL")
    other = home.parent / "other-home"
    other.mkdir()
    (other / "kernelkb.sqlite").write_bytes(b"not a database at all" * 1000)
    monkeypatch.setenv("KERNELKB_HOME", str(other))
    assert main(["stats"]) == 2
    assert "the database cannot be used: file is not a database" in capsys.readouterr().err


@pytest.mark.parametrize(("variable", "value"), [
    ("KERNELKB_SERVE_THREADS", "abc"), ("KERNELKB_SERVE_THREADS", "0"),
    ("KERNELKB_PORT", "abc")])
def test_a_bad_setting_is_one_line_naming_the_variable(
        home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["stats"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kernelkb: error: {variable}: ") and len(err.splitlines()) == 1


def test_every_user_fixable_error_renders_without_loading_the_tasks() -> None:
    """One mark (kernels.shared.errors.UserFixable) makes an error the user's: rendering
    it imports nothing heavy, so a typo is answered at once, not after torch loads."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from kernelkb.errors import user_message\n"
        "from kernelkb.kb.queries import AmbiguousId\n"
        "from kernelkb.retrieval.names import UnknownName\n"
        "assert user_message(UnknownName('unknown op')) == 'unknown op'\n"
        "assert user_message(AmbiguousId('two share it')) == 'two share it'\n"
        "assert user_message(RuntimeError('a fault of ours')) is None\n"
        "assert 'torch' not in sys.modules, 'rendering loaded torch'\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    from kernelkb.errors import user_message
    from kernelkb.kb.vector_index import IndexUnusable
    from kernelkb.optimizer.sandbox.runner import SandboxBusy

    assert user_message(SandboxBusy("come back later")) == "come back later"
    assert user_message(IndexUnusable("rebuild it")) == "rebuild it"
