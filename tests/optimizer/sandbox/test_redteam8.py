"""Red team 8: held-out cheats and escape probes written from the docs alone after round
7's fixes (tests/bad_kernels/redteam8_*.py, REDTEAM8.md), through the judge as users get
it.

Every cheat passed the judge on its first run (REDTEAM8.md); each is refused now, a plain
assertion with the kind it gets. The escape probes run behind the allow-list
(`refuse_imports=False`: they import subprocess and os) and start a fresh Python in the
jail: what they report must hold the jail's line (no line "ESCAPED"), the two that reach
for the judge's limits included (the worker has a uid of its own)."""
from pathlib import Path

import pytest
from redteam import report_of

from kernelkb.optimizer.sandbox import evaluate, imports

pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"


# plant -> (task, the kind a correct judge returns (None: any rejection), the allow-list on)
CASES = [
    # PyTorch on inputs users pass and the judge never draws
    # closed: inputs no draw makes, called once each (kernels/unusual_inputs.py)
    pytest.param("interleaved_glu_torch", "swiglu", "torch_compute", True,
                 id="interleaved_glu_torch"),
    # closed: the other integer dtype of an index input
    pytest.param("rope_int64_positions", "rope", "torch_compute", True,
                 id="rope_int64_positions"),
    # closed: a dimension past every list
    pytest.param("vocab_past_lists", "softmax", "torch_compute", True,
                 id="vocab_past_lists"),
    # closed: two more leading dimensions
    pytest.param("scores_rank4", "softmax", "torch_compute", True,
                 id="scores_rank4"),
    # closed: leading dimensions that do not fold
    pytest.param("seq_first_view", "rmsnorm", "torch_compute", True,
                 id="seq_first_view"),
    # closed: a size between the lists' powers of two
    pytest.param("attention_head_dim", "attention", "torch_compute", True,
                 id="attention_head_dim"),
    # right only in the interpreter
    # closed: lanes of one store to one address (races.py)
    pytest.param("lane_last_wins", "rmsnorm", "wrong_result", True,
                 id="lane_last_wins"),
    # closed: exchanges of different values are stores (races.py)
    pytest.param("atomic_rmw_race", "rmsnorm", "wrong_result", True,
                 id="atomic_rmw_race"),
    # watched vs not
    # closed: rows of every condition in wider rows with numbers between (unusual_inputs)
    pytest.param("pad_nan_watch", "softmax", "wrong_result", True, id="pad_nan_watch"),
    # state across calls
    # closed: a few elements changed at drawn places; the allow-list refuses it first now
    # (its key reads data_ptr() past the alignment a plan holds), so it runs behind it
    pytest.param("sampled_weight_cache", "rmsnorm", "cheat_cached_output", False,
                 id="sampled_weight_cache"),
]

PROBES = ("escape_judge_limits", "escape_env_files", "escape_output_flood",
          "escape_judge_memory_cap")
SECRET = "RT8SECRET"



def test_the_cheats_pass_the_allow_list_and_the_probes_do_not() -> None:
    for param in CASES:
        plant = param.values[0]
        refused = imports.problems((BAD / f"redteam8_{plant}.py").read_text())
        assert bool(refused) == (plant == "sampled_weight_cache"), (plant, refused)
    for plant in PROBES:
        assert imports.problems((BAD / f"redteam8_{plant}.py").read_text()), plant


@pytest.mark.parametrize(("plant", "task", "kind", "allow_list"), CASES)
def test_redteam8_plant_is_rejected(plant, task, kind, allow_list):
    source = (BAD / f"redteam8_{plant}.py").read_text()
    result = evaluate(task, source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=allow_list)
    assert result.error_kind != "timeout", result.error_message
    assert not result.ok, f"{plant} passed the judge"
    if kind is not None:
        assert result.error_kind == kind, (result.error_kind, result.error_message)


def test_redteam8_secrets_and_host_paths_stay_out(monkeypatch):
    """Secrets under names hosts use, host files and writes to host paths as root."""
    for name in ("HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN",
                 "KERNELKB_SECRET_KEY", "TRITON_RT8_TOKEN", "CUDA_RT8_TOKEN"):
        monkeypatch.setenv(name, f"x{SECRET}")
    source = (BAD / "redteam8_escape_env_files.py").read_text()
    result = evaluate("rmsnorm", source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=False)
    report = report_of(result)
    assert not result.ok, "a probe raises its report: it is never ok"
    assert "launcher refused" not in report, report
    assert "secret in the environment" not in report and "secret=True" not in report, report
    assert "holds a secret True" not in report, report
    assert "\nESCAPED" not in report, report
    for path in ("/work/main/RT8_WROTE", "/work/main/kernels/RT8_WROTE", "/etc/RT8_WROTE",
                 "/usr/lib/RT8_WROTE"):
        assert not Path(path).exists(), path


def test_redteam8_output_floods_stay_bounded():
    """256 MiB to each of the worker's pipes, a 32 MiB message, the tmpfs filled."""
    source = (BAD / "redteam8_escape_output_flood.py").read_text()
    result = evaluate("rmsnorm", source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=False)
    report = report_of(result)
    assert not result.ok
    assert "launcher refused" not in report, report
    assert "No space left on device" in report, report
    assert len(result.error_message or "") < 20_000
    assert all(len(str(v)) < 20_000 for v in (result.artifacts or {}).values())


def test_redteam8_the_worker_cannot_touch_the_judges_limits():
    """prlimit, setpriority, sched_setaffinity and ioprio_set on PID 1: refused, the
    worker's uid is not the judge's (jail.WORKER_UID)."""
    source = (BAD / "redteam8_escape_judge_limits.py").read_text()
    result = evaluate("rmsnorm", source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=False)
    report = report_of(result)
    assert not result.ok
    assert "launcher refused" not in report, report
    assert "\nJUDGE" not in report and not report.startswith("JUDGE"), report


def test_redteam8_memory_cap_control_is_wrong_result():
    source = (BAD / "redteam8_escape_judge_memory_cap.py").read_text()
    source = source.replace("CAP_JUDGE = True", "CAP_JUDGE = False")
    result = evaluate("rmsnorm", source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=False)
    assert result.error_kind == "wrong_result", (result.error_kind, result.error_message)


def test_redteam8_a_capped_judge_still_says_wrong_result():
    """A prlimit on the judge's address space is refused, so the wrong kernel's verdict is
    its own, not a crash."""
    source = (BAD / "redteam8_escape_judge_memory_cap.py").read_text()
    result = evaluate("rmsnorm", source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=False)
    assert result.error_kind == "wrong_result", (result.error_kind, result.error_message)
