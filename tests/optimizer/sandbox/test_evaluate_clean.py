"""A correct candidate passes every layer the CPU can check, and its feedback maps onto
the experience record."""

from __future__ import annotations

import pytest

from kernelkb.kb.record import Environment, Feedback
from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import detect_environment, evaluate, resolve_shapes


@pytest.fixture(scope="module")
def clean():
    task = get_task("softmax")
    # the online variant reads a NaN input as a masked lane under the CPU interpreter (its
    # running max drops it), which the non-finite condition now rejects there
    source = task.render({"BLOCK_SIZE": 1024, "ONLINE": False})
    return evaluate("softmax", source, shapes=[(4, 128), (1, 7), (3, 1823)], seeds=2)


def test_correct_candidate_passes(clean):
    assert clean.ok and clean.error_kind is None, clean.text
    assert clean.stage == "correctness"
    assert clean.shapes_checked == ["rows=4,cols=128", "rows=1,cols=7", "rows=3,cols=1823"]
    assert clean.mismatch_share == 0.0
    assert clean.max_abs_err is not None and clean.max_abs_err < 1e-3
    assert clean.config["BLOCK_SIZE"] == 1024 and clean.config["ONLINE"] is False
    assert len(clean.source_hash) == 16


def test_cpu_run_marks_timing_unavailable(clean):
    assert clean.timing_available is False
    assert clean.time_ms is None and clean.timings == {}
    assert clean.registers is None
    assert "correctness: pass on 3 shapes" in clean.text
    assert "time: unavailable" in clean.text


def test_feedback_and_env_validate_as_the_record(clean):
    feedback = Feedback.model_validate(clean.feedback_dict())
    assert feedback.stage == "correctness" and feedback.text == clean.text
    env = Environment.model_validate(clean.env)
    assert env.gpu_name == "cpu-interpreter" and env.arch == "cpu"
    assert Environment.model_validate(detect_environment()).triton_version


def test_failed_feedback_validates_too():
    result = evaluate("softmax", "def run(x)\n    return x\n", shapes=[(1, 7)], seeds=1)
    assert result.error_kind == "syntax_error"
    feedback = Feedback.model_validate(result.feedback_dict())
    assert feedback.stage == "syntax" and feedback.error_message


def test_auto_shapes_on_cpu_are_cpu_plus_edge():
    task = get_task("softmax")
    name, shapes = resolve_shapes(task, "auto", on_gpu=False)
    assert name == "cpu+edge" and shapes == [*task.cpu_shapes, *task.edge_shapes]
    assert resolve_shapes(task, "auto", on_gpu=True)[1] == list(task.shapes("tune"))


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"shapes": "huge"}, ValueError),
    ({"shapes": [(1, 2, 3)]}, ValueError),
    ({"shapes": []}, ValueError),
    ({"dtype": "int8"}, ValueError),
])
def test_bad_arguments_fail_fast_with_a_clear_error(kwargs, error):
    with pytest.raises(error):
        evaluate("softmax", "def run(x):\n    return x\n", **kwargs)


def test_unknown_task_names_the_known_ones():
    with pytest.raises(KeyError, match="softmax"):
        evaluate("no_such_task", "def run(x):\n    return x\n")
