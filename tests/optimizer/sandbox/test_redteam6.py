"""Red team 6: held-out cheats and escape probes written from the docs alone after round
5's fixes (tests/bad_kernels/redteam6_*.py, REDTEAM6.md), through the judge as users get
it.

A plant the judge rejects is a plain assertion (with the kind it got where that kind is
the point); one that gets through today is a strict xfail whose reason says how. Plants
marked "behind the allow-list" use `import os` / `import time`, which the allow-list
refuses at once (asserted below); they run with `refuse_imports=False` to test the layers
behind it, as the other layer tests do. The escape probes run behind the allow-list too,
and start a fresh Python in the jail: what they report must hold the jail's line."""
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import evaluate, imports

pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"


def _open(reason):
    return pytest.mark.xfail(strict=True, reason=f"open: {reason}")


# plant -> (task, the kind a correct judge returns (None: any rejection), the allow-list on)
CASES = [
    # the output's dtype is checked against the reference's
    pytest.param("output_upcast", "rmsnorm", "wrong_result", True, id="output_upcast"),
    # a reader of the caller's global state named on the allow-list's list
    pytest.param("rng_watch", "rmsnorm", "cheat_tamper", True, id="rng_watch"),
    # writes to the caller's memory outside the view it was given: an input's whole
    # storage is compared, not only its view
    pytest.param("pad_scratch", "softmax", "cheat_input_modified", True, id="pad_scratch"),
    # (every program stores into the one element past the weight: a data race, races.py,
    # and the storage compare on a GPU; first now, from the source: a wrapper reading its
    # weight's untyped_storage() to find room past it, which no view, copy or cast needs;
    # first of all now, the allow-list: the storage behind a view is no plan key's)
    pytest.param("weight_gap_scratch", "rmsnorm", "cheat_tamper", True,
                 id="weight_gap_scratch"),
    # the output's layout: row-major, the reference's, or an input's of its shape
    pytest.param("output_column_major", "rmsnorm", "wrong_result", True,
                 id="output_column_major"),
    # paths keyed on an input's form: a training forward's (a non-leaf activation,
    # nn.Parameter weights) is one of the conditions
    pytest.param("nonleaf_lazy", "rmsnorm", "wrong_result", True, id="nonleaf_lazy"),
    pytest.param("parameter_weight", "rmsnorm", "wrong_result", True,
                 id="parameter_weight"),
    # a float32 weight beside half activations: inputs a task names (float32_inputs)
    pytest.param("mixed_dtype_weight", "rmsnorm", "wrong_result", True,
                 id="mixed_dtype_weight"),
    # zero rows (an empty batch) are asked once per evaluation
    pytest.param("empty_batch", "rmsnorm", "wrong_result", True, id="empty_batch"),
    pytest.param("int32_offsets", "rmsnorm", None, True, id="int32_offsets",
                 marks=_open("int32 row offsets wrap past 2**31 elements: the GPU's "
                             "judge checks the task's wide shape there "
                             "(test_wide_offsets.py); the interpreter holds 8 GiB")),
    # correctness that rests on the interpreter: its programs run shuffled, new
    # allocations hold NaN (program_order.py)
    pytest.param("program_order", "rmsnorm", "wrong_result", True, id="program_order"),
    # resources: an output the caller drops must be freed
    pytest.param("keeps_every_output", "rmsnorm", "cheat_aliasing", True,
                 id="keeps_every_output"),
    # behaviour that differs when watched
    # the allow-list refuses the random generators' seeds and state
    pytest.param("initial_seed_watch", "rmsnorm", "cheat_tamper", True,
                 id="initial_seed_watch"),
    # the allow-list refuses typing's forward references (string subscripts, get_args)
    # and every private attribute of an object the candidate did not make (_evaluate)
    pytest.param("typing_subscript_eval", "rmsnorm", "cheat_tamper", True,
                 id="typing_subscript_eval"),
    # behind the allow-list: the runtime readers, with a library's frame making the call
    # (a library frame that holds the reader it calls was handed it: the read is the
    # candidate's when the candidate's frame stands above, handed.py)
    pytest.param("launder_clock", "rmsnorm", "cheat_tamper", False, id="launder_clock"),
    pytest.param("launder_jail_detect", "rmsnorm", "cheat_tamper", False,
                 id="launder_jail_detect"),
]

BEHIND_THE_ALLOW_LIST = ("launder_clock", "launder_jail_detect", "escape_clone3",
                         "escape_cgroup_sys", "escape_persist")


def test_the_allow_list_refuses_the_plants_run_behind_it() -> None:
    for plant in BEHIND_THE_ALLOW_LIST:
        found = imports.problems((BAD / f"redteam6_{plant}.py").read_text())
        assert any("imports" in f for f in found), (plant, found)


@pytest.mark.parametrize(("plant", "task", "kind", "allow_list"), CASES)
def test_redteam6_plant_is_rejected(plant, task, kind, allow_list):
    source = (BAD / f"redteam6_{plant}.py").read_text()
    result = evaluate(task, source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=allow_list)
    assert result.error_kind != "timeout", result.error_message
    assert not result.ok, f"{plant} passed the judge"
    if kind is not None:
        assert result.error_kind == kind, (result.error_kind, result.error_message)


def _probe(plant: str):
    source = (BAD / f"redteam6_{plant}.py").read_text()
    result = evaluate("rmsnorm", source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=False)
    message = result.error_message or ""
    assert not result.ok, "a probe raises its report: it is never ok"
    assert "ESCAPED" not in message, message
    return message


@pytest.mark.parametrize("plant", ["escape_clone3", "escape_cgroup_sys"])
def test_redteam6_escape_probe_stays_in_the_jail(plant):
    """A fresh Python in the jail: namespaces through clone3 (seccomp cannot read its
    flags); the cgroup's limits, /sys's submounts, the judge's descriptors through
    pidfd_getfd, a TCP connection out."""
    _probe(plant)


MARKERS = (Path("/tmp/.rt6_marker"), Path("/dev/shm/.rt6_marker"),
           Path("/var/tmp/.rt6_marker"))


def test_redteam6_nothing_persists_past_an_evaluation():
    """Markers left in every writable place the jail shows must not be there for the next
    evaluation, nor on the host; writes into the bound packages and site-packages (a .pth
    runs in every later Python) must fail."""
    import site

    import kernelkb.kernels
    import kernelkb.optimizer

    _probe("escape_persist")
    _probe("escape_persist")  # finds the first run's markers if anything persisted
    for marker in MARKERS:
        assert not marker.exists(), marker
    bound = [*site.getsitepackages(), *kernelkb.kernels.__path__,  # namespace portions
             *kernelkb.optimizer.__path__]
    for folder in bound:
        assert not (Path(folder) / "rt6_probe.pth").exists(), folder


def test_redteam6_a_shell_from_a_typing_subscript_stays_in_the_jail():
    """The persist probe again, with the allow-list on: os.system and open come back as
    the values of a typing forward reference's text; whatever runs must hold the jail."""
    source = (BAD / "redteam6_escape_allowlisted.py").read_text()
    result = evaluate("rmsnorm", source, shapes="auto", seeds=1, timeout_s=900)
    assert not result.ok
    assert "ESCAPED" not in (result.error_message or ""), result.error_message
    for marker in MARKERS:
        assert not marker.exists(), marker


def test_redteam6_the_allow_list_refuses_a_shell_from_a_typing_subscript():
    source = (BAD / "redteam6_escape_allowlisted.py").read_text()
    assert imports.problems(source)
