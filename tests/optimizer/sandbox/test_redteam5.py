"""Red team 5: held-out cheats written from the docs alone after round 4's fixes
(tests/bad_kernels/redteam5_*.py, REDTEAM5.md), through the judge as users get it.

A plant the judge rejects is a plain assertion with the kind it must get; one that gets
through today is a strict xfail whose reason says how."""
from pathlib import Path

import pytest

from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.scalar_args import SCALAR_ARGS
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
    # what a candidate declares is what it does (declared.py): run() takes the task's
    # scalar arguments by position and by name, to one parameter, and the calls pass them
    # both ways; every header constant of the task's space is read, and the launched
    # num_warps / num_stages are the header's
    pytest.param("eps_keyword_ignored", "rmsnorm", "signature_mismatch",
                 id="eps_keyword_ignored"),
    pytest.param("config_header_lies", "softmax", "config_mismatch", id="config_header_lies"),
    # new values written into the latest call's own tensors through .data, which keeps
    # their version counters (worker.check_partly_repeated: cheat_cached_output, said
    # first since its sparse update of a user's new tensors; its cache also holds the
    # weight tensor itself, which a dropped call must free: check_outputs_freed)
    pytest.param("weight_version_cache", "rmsnorm", "cheat_cached_output",
                 id="weight_version_cache"),
    # NaN and +/-inf in the first float input, compared exactly (nonfinite_values)
    pytest.param("nan_as_mask", "softmax", "wrong_result", id="nan_as_mask"),
    # a buffer kept from before the call that the call leaves changed
    # (launch_plan.Plan.kept_and_changed)
    pytest.param("shared_scratch", "softmax", "cheat_aliasing", id="shared_scratch"),
    pytest.param("current_device", "softmax", None, id="current_device",
                 marks=_open("output on the current device, not the input's: every input of "
                             "an evaluation is on the one device there is (the CPU, or one "
                             "GPU), where 'cuda' and x.device are the same; it needs an "
                             "input on a second GPU to be seen")),
]


# plants that read a library's private attribute (`tensor._version`), which the allow-list
# now refuses at once (round 6): run behind it to test the layer they were written for
BEHIND_THE_ALLOW_LIST = ("weight_version_cache",)


def test_the_allow_list_refuses_the_plants_run_behind_it() -> None:
    for plant in BEHIND_THE_ALLOW_LIST:
        found = imports.problems((BAD / f"redteam5_{plant}.py").read_text())
        assert any("private attribute" in f for f in found), (plant, found)


def test_the_allow_list_refuses_an_annotation_that_computes() -> None:
    for plant in ("singledispatch_eval", "string_code_bomb", "string_code_frames",
                  "host_facts_out"):
        found = imports.problems((BAD / f"redteam5_{plant}.py").read_text())
        assert any("annotation" in f for f in found), (plant, found)


@pytest.mark.parametrize(("plant", "task", "kind"), CASES)
def test_redteam5_plant_is_rejected(plant, task, kind):
    source = (BAD / f"redteam5_{plant}.py").read_text()
    result = evaluate(task, source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=plant not in BEHIND_THE_ALLOW_LIST)
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


def test_eps_by_name_is_called_and_checked_past_the_signature_rule() -> None:
    """A forwarding run(*args, **kwargs) that drops eps= passes the signature rule (its
    form is the calls' to decide), and the calls pass eps by name on every other shape."""
    source = (BAD / "redteam5_eps_keyword_ignored.py").read_text().replace(
        "def run(x, weight, epsilon=1e-6, **_options):\n",
        "def run(*args, **_options):\n    x, weight = args[0], args[1]\n"
        "    epsilon = args[2] if len(args) > 2 else 1e-6\n", 1)
    task = get_task("rmsnorm")
    result = evaluate("rmsnorm", source, shapes=list(task.cpu_shapes[:2]), seeds=1,
                      timeout_s=900)
    assert result.error_kind == "wrong_result", (result.error_kind, result.error_message)
    assert SCALAR_ARGS in (result.error_message or "")


def test_a_header_read_but_not_launched_is_a_config_mismatch() -> None:
    """Every constant read (the static rule holds), NUM_WARPS = 8 in the header, 4 warps
    launched: the launches the tracker recorded say so."""
    task = get_task("softmax")
    source = task.render({"NUM_WARPS": 8}).replace(
        "num_warps=NUM_WARPS", "num_warps=max(4, NUM_WARPS // 2)")
    assert "num_warps=max(4, NUM_WARPS // 2)" in source
    result = evaluate("softmax", source, shapes=list(task.cpu_shapes[:1]), seeds=1,
                      timeout_s=900)
    assert result.error_kind == "config_mismatch", (result.error_kind, result.error_message)
    assert "NUM_WARPS = 8" in (result.error_message or "")
