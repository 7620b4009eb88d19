"""Red team 9: held-out cheats and escape probes written from the docs alone after round
8's fixes (tests/bad_kernels/redteam9_*.py, REDTEAM9.md), through the judge as users get
it.

A plant the judge refuses is a plain assertion of the kind it got. A plant that passes the
judge is a strict xfail asserting the kind a correct judge would give, with how it gets
through as the reason. The escape probes run behind the allow-list (`refuse_imports=False`:
they import subprocess and os) and start a fresh Python in the jail: what they report must
hold no line "ESCAPED"."""
from pathlib import Path

import pytest
from redteam import escaped, report_of

from kernelkb.optimizer.sandbox import evaluate, imports

pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"



# plant -> (task, the kind a correct judge returns)
CASES = [
    # PyTorch on inputs users pass and no check of the judge makes
    # closed: one dimension fewer (kernels/unusual_inputs.py)
    pytest.param("softmax_1d_logits", "softmax", "torch_compute", id="softmax_1d_logits"),
    # closed: a task without leading dims gets them tried on its first input
    pytest.param("matmul_batched_a", "matmul", "torch_compute", id="matmul_batched_a"),
    # closed: a rank more with the last dimension strided
    pytest.param("rmsnorm_channels_first", "rmsnorm", "torch_compute", id="rmsnorm_channels_first"),
    # closed: the first input in float32 beside half weights
    pytest.param("rmsnorm_half_weight_fp32_x", "rmsnorm", "torch_compute",
                 id="rmsnorm_half_weight_fp32_x"),
    # closed from the source: PyTorch named outside the kernels on any path, taken or
    # not (named_compute.py); behind the source rules it still passes
    pytest.param("rmsnorm_rows_past_reach", "rmsnorm", "torch_compute",
                 id="rmsnorm_rows_past_reach"),
    # closed: index inputs broadcast over the batch, on the smallest shape they change
    pytest.param("rope_shared_positions", "rope", "torch_compute", id="rope_shared_positions"),
    # watched vs not, from the input's storage
    # closed: every input the contiguous start of a larger buffer
    pytest.param("rmsnorm_static_prefix", "rmsnorm", "torch_compute", id="rmsnorm_static_prefix"),
    # Python over memory that no dispatch mode sees
    # closed: the allow-list refuses apply_, map_ and map2_ (no wrapper needs them), and
    # the tracker records them as host reads
    pytest.param("rmsnorm_map_other_dtype", "rmsnorm", "torch_compute",
                 id="rmsnorm_map_other_dtype"),
    # state across calls
    # closed from the source: what run() returns may not be read out of a module
    # container, on any path (tensor_flow.kept_returns)
    pytest.param("rmsnorm_output_ring", "rmsnorm", "cheat_aliasing",
                 id="rmsnorm_output_ring"),
    # closed: every third checked call's fresh allocations hold an earlier output's bytes
    pytest.param("softmax_stale_output", "softmax", "wrong_result", id="softmax_stale_output"),
    # the exported launch plan
    # closed by the allow-list: its staging step was Tensor.map_ (behind the allow-list
    # it still passes: the judge replays no plan recorded under no_grad)
    pytest.param("rmsnorm_plan_no_grad", "rmsnorm", "cheat_tamper",
                 id="rmsnorm_plan_no_grad"),
]

PROBES = ("escape_report_after_exit", "escape_zombie_pids", "escape_sysfs_host_view")




# cheats that passed the allow-list when written and are refused by it since
REFUSED_BY_THE_ALLOW_LIST = {"rmsnorm_map_other_dtype", "rmsnorm_plan_no_grad",
                             "rmsnorm_static_prefix"}  # untyped_storage(): no plan key's
# refused only by the source rules (refuse_imports: the allow-list and the Triton-only
# rule read from the source, optimizer/sandbox/source_rules.py)
ONLY_THE_ALLOW_LIST = {"rmsnorm_plan_no_grad", "rmsnorm_rows_past_reach", "rmsnorm_output_ring"}


def test_the_cheats_pass_the_allow_list_and_the_probes_do_not() -> None:
    for param in CASES:
        plant = param.values[0]
        refused = imports.problems((BAD / f"redteam9_{plant}.py").read_text())
        assert bool(refused) == (plant in REFUSED_BY_THE_ALLOW_LIST), (plant, refused)
    for plant in PROBES:
        assert imports.problems((BAD / f"redteam9_{plant}.py").read_text()), plant


@pytest.mark.parametrize(("plant", "task", "kind"), CASES)
def test_redteam9_plant_is_rejected(plant, task, kind):
    source = (BAD / f"redteam9_{plant}.py").read_text()
    # the layers behind the allow-list alone (tests/optimizer/sandbox/conftest.py), but for
    # the plants only the allow-list refuses
    result = evaluate(task, source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=plant in ONLY_THE_ALLOW_LIST)
    assert result.error_kind != "timeout", result.error_message
    assert not result.ok, f"{plant} passed the judge"
    assert result.error_kind == kind, (result.error_kind, result.error_message)


def _probe(plant: str):
    source = (BAD / f"redteam9_{plant}.py").read_text()
    result = evaluate("rmsnorm", source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=False)
    report = report_of(result)
    assert "launcher refused" not in report, report
    return result, report


# closed: the worker ends every other process before its final report, the judge takes it
# only while none is alive and ends the rest once the worker is gone (strays.py)
def test_redteam9_the_report_is_not_rewritten_after_the_worker_exits():
    """A child keeps every descriptor of the worker, outlives it under the judge and
    writes over this probe's marker in the report memfd."""
    result, report = _probe("escape_report_after_exit")
    assert not result.ok, "a probe raises its report: it is never ok"
    assert not escaped(report), report
    # the worker's own report (its child ended before it): the probe's raise, unjudged
    assert result.error_kind == "runtime_error", (result.error_kind, report)


# the same child started by a finalizer, after the worker's final report and its sweep
LATE_RUN = '''
class Late(RuntimeError):
    def __del__(self):
        for fd in range(3, 1024):
            try:
                os.set_inheritable(fd, True)
            except OSError:
                pass
        _launch(CHILD, (MARKER,), keep_fds=True, wait=False, env={})


def run(x, weight, eps=1e-6):
    raise Late("never ok\\n" + MARKER)
'''


def test_a_process_started_after_the_final_report_does_not_write_it():
    """Past the worker's own sweep: the judge finds the child alive beside the worker and
    refuses the report (``cheat_tamper``), or took the report before the child existed."""
    source = (BAD / "redteam9_escape_report_after_exit.py").read_text()
    source = source[:source.index("def run(")] + LATE_RUN
    result = evaluate("rmsnorm", source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=False)
    report = report_of(result)
    assert not escaped(report), report
    assert result.error_kind in ("cheat_tamper", "runtime_error"), (result.error_kind, report)


# closed: the judge, init of the jail's PID namespace, reaps every orphan (SIGCHLD)
def test_redteam9_orphans_do_not_stay_with_the_judge():
    """Orphans (until the cgroup refuses a PID) exit under the judge (PID 1); an honest
    kernel is then still ok."""
    result, report = _probe("escape_zombie_pids")
    assert not escaped(report), report
    assert result.ok, (result.error_kind, result.error_message, report)


# closed: the cgroup tree and every disk's folder are covered (jail.SYS_MASKED)
def test_redteam9_the_bound_sys_shows_no_host_identifier():
    """Serials, UUIDs, WWIDs, other groups' PIDs and memory through /sys."""
    result, report = _probe("escape_sysfs_host_view")
    assert not result.ok, "a probe raises its report: it is never ok"
    assert not escaped(report), report
