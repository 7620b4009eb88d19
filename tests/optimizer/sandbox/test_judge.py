"""The judge (optimizer/sandbox/judge.py): the result the runner reads is decided in a
process the candidate cannot reach, from checks it made itself.

Each planted candidate beats the worker's own checks, which live in the candidate's
process; the judge must still give the right verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import evaluate
from kernelkb.optimizer.sandbox.judge import Judge, JudgeFailure

BAD = Path(__file__).parents[2] / "bad_kernels"


def _evaluate(name: str):
    """The judge alone: the rule that refuses code swaps and gc walks at the source
    (introspection.py) is off, so what reaches the judge is what it must catch itself."""
    return evaluate("softmax", (BAD / name).read_text(), shapes="cpu", seeds=1,
                    refuse_introspection=False, refuse_surroundings=False)


def test_a_check_rewritten_in_the_candidate_process_does_not_fool_the_judge() -> None:
    result = _evaluate("swaps_check_and_tamper_code.py")
    assert not result.ok
    assert result.error_kind == "wrong_result", result.text
    # the worker's checks passed it: the failure is the judge's, on inputs drawn now
    assert result.error_message.startswith("the judge: on fresh inputs"), result.error_message
    assert result.failing_shapes and result.failing_shapes[0] in result.error_message


def test_a_forged_report_is_not_a_result() -> None:
    result = _evaluate("forges_report.py")
    assert not result.ok, result.text
    assert result.error_kind == "crash"
    assert "the judge" in result.error_message


def test_the_judge_is_out_of_the_candidates_reach() -> None:
    result = _evaluate("reads_judge.py")
    assert result.error_kind == "runtime_error", result.text
    found = result.error_message.split("RuntimeError: ", 1)[-1].splitlines()[0]
    assert found.count("denied (") == 3 and "open" not in found, found


def test_an_honest_kernel_passes_and_says_what_the_judge_checked() -> None:
    task = get_task("softmax")
    result = evaluate("softmax", task.template, shapes="cpu", seeds=1)
    assert result.ok, result.text
    labels = {task.shape_label(s) for s in task.cpu_shapes}
    drawn = result.judge["drawn_shape"]
    listed = {task.shape_label(s) for s in (*task.shapes("all"), *task.cpu_shapes)}
    assert drawn and drawn not in listed  # one shape no list names
    checked = [label.split(" [")[0] for label in result.judge["spot_checked"]]
    assert set(checked) - {drawn} and set(checked) - {drawn} <= labels
    # the first spot-checked shape and the drawn one meet every input condition softmax
    # has, the strided rows every task gets among them
    names = {c.name for c in task.input_conditions}
    assert "strided rows" in names
    for shape in (checked[0], drawn):
        met = {label.split(" [")[1].rstrip("]") for label in result.judge["spot_checked"]
               if label.startswith(shape + " [")}
        assert met == names, result.judge["spot_checked"]
    assert "judge: re-ran" in result.text
    # every other dtype softmax declares and a shape past the largest asked, apart
    assert result.judge["other_dtypes"] == {"shape": "rows=4,cols=128",
                                            "dtypes": ["bfloat16", "float32"]}
    assert {label.rsplit(" [", 1)[1] for label in result.judge["other_dtypes_checked"]} \
        == {"bfloat16]", "float32]"}
    assert result.judge["big_shape_checked"] == [
        f"{result.judge['big_shape']} [rows of every condition]"]
    assert "judge: also checked in bfloat16, float32 on (rows=4,cols=128)" in result.text
    # last, the smallest shape asked with leading dimensions, as a model passes x
    assert result.judge["leading_dims_checked"] == ["rows=4,cols=128 [leading dimensions]"]
    # then inputs no other check makes: a rank more, unfoldable leading dimensions, an
    # element stride of 2, numbers in the gaps, and a shape past the lists' columns
    unusual = result.judge["unusual_checked"]
    assert {label.rsplit(" [", 1)[1] for label in unusual if "[" in label} == {
        "unusual: two more leading dimensions]", "unusual: leading dimensions that do not fold]",
        "unusual: one dimension fewer]", "unusual: a rank more with the last dimension strided]",
        "unusual: an element stride of 2]", "unusual: the first input in float32]",
        "unusual: each input the start of a larger buffer]",
        "unusual: rows of every condition in wider rows, numbers between]"}
    widest = max(s[1] for s in (*task.sweep_shapes, *task.edge_shapes, *task.cpu_shapes))
    assert any("[" not in label and int(label.rsplit("cols=", 1)[1]) > widest
               for label in unusual)
    assert not result.judge.get("unusual_refused")  # the template takes them all
    # the reach: softmax's rows drawn past the lists, under the mixed conditions from a
    # drawn one
    (reach_label,) = result.judge["reach_checked"]
    assert reach_label.startswith(f"{result.judge['reach_shape']} [rows of every condition")
    # its share of the wall time, for the cost benchmark: no clock, no CUDA on the CPU
    assert set(result.judge["laps_s"]) == {"spot checks", "other dtypes", "big shape", "reach",
                                           "leading dimensions", "unusual inputs"}
    assert result.judge["laps_s"]["spot checks"] > 0


class _Clocked(Judge):
    """The clock rules alone: the judge's own figures scripted per side, and on inputs
    seen against fresh ones (the same as ``mine`` unless given)."""

    def __init__(self, mine: float, theirs: float, fresh: float | None = None) -> None:
        self.task, self.dtype = get_task("softmax"), torch.float16
        self.figures = {"candidate": mine, "incumbent": theirs}
        self.fresh = mine if fresh is None else fresh

    def timed(self, shape, label, who, calls):
        return self.figures[who]

    def timed_seen_and_fresh(self, shape, label, sets):
        return self.figures["candidate"], self.fresh


def _report(reported: float, claimed: float | None) -> dict:
    label = "rows=4096,cols=4096"
    gpu = {"alone": {label: [reported, 0.0, 0.02]}}
    if claimed is not None:
        gpu["comparison"] = {"shapes": {label: {"ratio": claimed}}}
    return {"gpu": gpu}


@pytest.mark.parametrize(("mine", "theirs", "reported", "claimed", "caught"), [
    (1.00, 1.00, 0.98, None, False),   # GPU-bound, figures agree
    (1.00, 1.00, 0.30, None, True),    # reported GPU time far under the judge's clock
    (1.00, 1.50, 0.95, 1.45, False),   # a real gain: the judge's ratio shows it
    (1.00, 1.05, 0.70, 1.60, True),    # a claimed gain the judge's clock does not show
    (0.02, 0.02, 0.004, 3.0, False),   # launch-bound: wall time says nothing, no verdict
])
def test_the_judges_clock(mine, theirs, reported, claimed, caught) -> None:
    seen = {"timed": {}}
    judge = _Clocked(mine, theirs)
    if caught:
        with pytest.raises(JudgeFailure) as failure:
            judge.check_clock(_report(reported, claimed), seen)
        assert failure.value.kind == "cheat_timer" and "judge's clock" in str(failure.value)
    else:
        judge.check_clock(_report(reported, claimed), seen)
        assert seen["timed"]["rows=4096,cols=4096"]["candidate_ms"] == mine


@pytest.mark.parametrize(("seen", "fresh", "caught"), [
    (1.00, 1.05, False),  # the same work on any input
    (0.06, 0.70, True),   # a copy of a kept answer where the input repeats, a GEMM where not
    (0.30, 0.70, True),   # kept for most calls: still far from fresh
    (1.29, 1.68, False),  # honest attention prefill on the H200 (fresh inputs read 1.31x)
    (0.02, 0.30, False),  # launch-bound on fresh inputs: wall time says nothing
])
def test_the_judges_clock_on_fresh_inputs(seen, fresh, caught) -> None:
    """An input-keyed cache (content_cache.py, right on every new input) is fast only on
    inputs that repeat, as timed calls do."""
    record = {"timed": {}}
    judge = _Clocked(seen, seen, fresh)
    if caught:
        with pytest.raises(JudgeFailure) as failure:
            judge.check_clock(_report(seen, None), record)
        assert (failure.value.kind, failure.value.stage) == ("cheat_cached_output",
                                                             "performance")
        assert "inputs it had not" in str(failure.value)
    else:
        judge.check_clock(_report(seen, None), record)
        figures = record["timed"]["rows=4096,cols=4096"]
        assert (figures["seen_inputs_ms"], figures["fresh_inputs_ms"]) == (seen, fresh)


def test_answers_kept_per_input_are_seen_on_the_cpu_by_the_buffers_they_keep() -> None:
    """content_cache.py's answers are right on every new input (a device-side fingerprint
    of the values, not the buffer's address), so no correctness check sees them; but the
    fingerprint and the kept answer are written into buffers kept from before the call,
    which a call may not leave changed (launch_plan.Plan.kept_and_changed): caught on the
    CPU too, before any timing."""
    source = (BAD / "content_cache.py").read_text()
    result = evaluate("matmul", source, shapes=[(64, 96, 128), (33, 70, 100)], seeds=2,
                      timeout_s=120)
    assert result.error_kind == "cheat_aliasing", result.text
    assert "kept from before it" in (result.error_message or "")


def test_a_worker_told_to_skip_the_input_conditions_is_caught() -> None:
    """A softmax without the row maximum passes the plain draw; the candidate switches
    the worker's input conditions off through gc. The judge's spot-check meets each."""
    result = _evaluate("skips_conditions.py")
    assert result.error_kind in ("wrong_result", "bias"), result.text
    assert result.error_message.startswith("the judge: on fresh inputs"), result.error_message


def test_the_workers_prints_reach_the_logs() -> None:
    """The worker is a forked child of the judge: a candidate's own prints still come
    back in the logs the feedback shows."""
    source = get_task("softmax").template.replace(
        "def run(", "print('hello from the candidate', flush=False)\n\n\ndef run(", 1)
    result = evaluate("softmax", source, shapes="cpu", seeds=1)
    assert result.ok, result.text
    assert "hello from the candidate" in result.artifacts["stdout_tail"]


def test_a_kernel_that_takes_two_dimensions_only_is_wrong_with_leading_ones():
    """softmax's x as a model passes it, (batch, seq, vocab): a kernel that unpacks two
    dimensions raises there, which is its wrong result, not a crash of the worker."""
    task = get_task("softmax")
    source = task.template.replace(
        "    x = x.reshape(-1, x.shape[-1]).contiguous()\n    n_rows, n_cols = x.shape\n",
        "    n_rows, n_cols = x.shape\n    x = x.contiguous()\n", 1)
    assert source != task.template, "the lines moved in softmax's template"
    result = evaluate("softmax", source, shapes=[(4, 128)], seeds=1, timeout_s=300)
    assert result.error_kind == "wrong_result", result.text
    assert "[leading dimensions]" in result.error_message, result.error_message
    assert "too many values to unpack" in result.error_message, result.error_message
