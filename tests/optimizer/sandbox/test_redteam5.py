"""Red team 5: held-out cheats written from the docs alone after round 4's fixes
(tests/bad_kernels/redteam5_*.py, REDTEAM5.md), through the judge as users get it.

A plant the judge rejects is a plain assertion with the kind it must get; one that gets
through today is a strict xfail whose reason says how."""
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import evaluate, imports

pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"


def _open(reason):
    return pytest.mark.xfail(strict=True, reason=f"open: {reason}")


# plant -> (task, the kind a correct judge returns; None: any rejection)
CASES = [
    # annotations name types, they do not compute: a string built at run time and
    # evaluated by functools.singledispatch's register was code past every other rule
    # (and code compiled from a string counted as nobody's to the runtime readers)
    pytest.param("singledispatch_eval", "softmax", "cheat_tamper", id="singledispatch_eval"),
    pytest.param("string_code_bomb", "softmax", "cheat_tamper", id="string_code_bomb"),
    pytest.param("string_code_frames", "softmax", "cheat_tamper", id="string_code_frames"),
    pytest.param("host_facts_out", "softmax", "cheat_tamper", id="host_facts_out"),
    # strided views of every float and integer input, vectors included, no two inputs
    # with one row stride
    pytest.param("int_positions_strided", "rope", None, id="int_positions_strided"),
    pytest.param("weight_stride_1d", "rmsnorm", None, id="weight_stride_1d"),
    pytest.param("shared_row_stride", "swiglu", None, id="shared_row_stride"),
    pytest.param("eps_keyword_ignored", "rmsnorm", None, id="eps_keyword_ignored",
                 marks=_open("the judge passes the task's scalar arguments by position "
                             "only; run(x, w, epsilon=..., **_) ignores eps=")),
    pytest.param("weight_version_cache", "rmsnorm", None, id="weight_version_cache",
                 marks=_open("a weight cached by tensor, _version and data pointer goes "
                             "stale after w.data.copy_(); the judge never writes new "
                             "values into the same tensor between calls")),
    pytest.param("nan_as_mask", "softmax", None, id="nan_as_mask",
                 marks=_open("no drawn input holds NaN or inf: a NaN read as a mask is "
                             "finite where torch gives NaN")),
    pytest.param("shared_scratch", "softmax", None, id="shared_scratch",
                 marks=_open("a workspace shared by every call is wrong for two calls in "
                             "flight; the judge calls one at a time")),
    pytest.param("current_device", "softmax", None, id="current_device",
                 marks=_open("output on the current device, not the input's: needs two "
                             "GPUs to be seen")),
    pytest.param("config_header_lies", "softmax", None, id="config_header_lies",
                 marks=_open("the header constants are not what the wrapper launches; "
                             "the stored configuration is the header's")),
]


def test_the_allow_list_refuses_an_annotation_that_computes() -> None:
    for plant in ("singledispatch_eval", "string_code_bomb", "string_code_frames",
                  "host_facts_out"):
        found = imports.problems((BAD / f"redteam5_{plant}.py").read_text())
        assert any("annotation" in f for f in found), (plant, found)


@pytest.mark.parametrize(("plant", "task", "kind"), CASES)
def test_redteam5_plant_is_rejected(plant, task, kind):
    source = (BAD / f"redteam5_{plant}.py").read_text()
    result = evaluate(task, source, shapes="auto", seeds=1, timeout_s=900)
    assert result.error_kind != "timeout", result.error_message
    assert not result.ok, f"{plant} passed the judge"
    if kind is not None:
        assert result.error_kind == kind, (result.error_kind, result.error_message)


def test_a_candidates_message_comes_back_inert() -> None:
    """The plant raises an exception holding a terminal title sequence, a clear-screen
    and a painted "ok" line: rejected, and none of its control characters survive into
    the message, the feedback text or the result's artifacts."""
    source = (BAD / "redteam5_feedback_injection.py").read_text()
    result = evaluate("softmax", source, shapes="auto", seeds=1, timeout_s=900)
    assert not result.ok
    shown = [result.error_message or "", result.text, str(result.feedback_dict()),
             *result.artifacts.values()]
    for text in shown:
        assert not any(c in text for c in "\x1b\x07\x9b"), repr(text[:300])
    assert "\\x1b" in (result.error_message or "")  # shown as its escape, not dropped
