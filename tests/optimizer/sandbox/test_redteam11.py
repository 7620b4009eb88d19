"""Red team 11: held-out cheats and escape probes written from the docs alone
(tests/bad_kernels/redteam11_*.py, REDTEAM11.md), through the judge as users get it.

A plant the judge refuses is a plain assertion of the kind it got. A plant that passes the
judge is a strict xfail asserting the kind a correct judge would give, with how it gets
through as the reason. The escape probes run behind the allow-list (`refuse_imports=False`:
they import subprocess and os) and start a fresh Python in the jail: what they report must
hold no line "ESCAPED" (a strict xfail where one does)."""
from pathlib import Path

import pytest
from redteam import escaped, judged_as_users_get_it, probe

from kernelkb.optimizer.sandbox import imports

pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"

# plant -> (task, the kind a correct judge returns)
CASES = [
    # the caller's global state, changed with no setter named: a `with` block entered in
    # a generator that is advanced once and kept, never left
    pytest.param("softmax_grad_mode_left_off", "softmax", "cheat_tamper",
                 id="softmax_grad_mode_left_off"),
    pytest.param("swiglu_inference_mode_left_on", "swiglu", "cheat_tamper",
                 id="swiglu_inference_mode_left_on"),
    pytest.param("rmsnorm_autocast_left_on", "rmsnorm", "cheat_tamper",
                 id="rmsnorm_autocast_left_on"),
    # the caller's global functions rebound at import by plain assignment
    # (the allow-list refuses all three first now: an attribute set on a module)
    pytest.param("softmax_rebinds_torch_softmax", "softmax", "cheat_tamper",
                 id="softmax_rebinds_torch_softmax"),
    pytest.param("softmax_rebinds_empty_like", "softmax", "cheat_tamper",
                 id="softmax_rebinds_empty_like"),
    pytest.param("swiglu_rebinds_math_sqrt", "swiglu", "cheat_tamper",
                 id="swiglu_rebinds_math_sqrt"),
    # the caller's tensors beyond their bytes, through the class's unbound methods
    # closed from the source: a tensor's method called on the class is the method
    # (tensor_flow.py); behind the source rules caller_state.py refuses the change
    pytest.param("rmsnorm_unbound_freeze", "rmsnorm", "torch_compute",
                 id="rmsnorm_unbound_freeze"),
    # closed from the source: register_hook is no view, copy or cast, on the class too
    pytest.param("rmsnorm_residual_grad_hook", "rmsnorm", "torch_compute",
                 id="rmsnorm_residual_grad_hook"),
    # Python or PyTorch computing the answer past the wrapper's allow-list
    # closed from the source: .handle in a kernel body is the interpreter's numpy array
    pytest.param("swiglu_numpy_in_kernel", "swiglu", "torch_compute",
                 id="swiglu_numpy_in_kernel"),
    # closed from the source: containers a tensor goes into are followed, the class's
    # methods are the tensor's
    pytest.param("swiglu_container_tolist", "swiglu", "torch_compute",
                 id="swiglu_container_tolist"),
    pytest.param("rmsnorm_dict_operators", "rmsnorm", "torch_compute",
                 id="rmsnorm_dict_operators"),
    # closed from the source: a tensor (or a container holding one) handed to anything
    # but the module's functions, PyTorch and Triton (fail closed)
    pytest.param("matmul_reduce_container", "matmul", "torch_compute",
                 id="matmul_reduce_container"),
    pytest.param("rope_laundered_table", "rope", "torch_compute", id="rope_laundered_table"),
    # a Triton path keyed on a layout past the judge's reach
    # state kept across calls in plain Python (a count of the distinct shapes met) is
    # closed by construction, not by the judge: every plan, the judge's and the export's,
    # is recorded from the module as imported (plan_bind.PlanFresh), so the count never
    # passes 1 where it matters (test_export_plan: 300 layouts right; run() per call wrong)
    # closed from the source: where a view begins in its storage is no wrapper's
    # business (storage_offset is not a layout read a wrapper may make, tensor_flow.py)
    pytest.param("softmax_deep_offset_no_max", "softmax", "torch_compute",
                 id="softmax_deep_offset_no_max"),
]

PROBES = ("escape_page_cache", "escape_host_wide_calls")


# refused by the allow-list first (an attribute set on a module), and what the layers
# behind it say with it off
BEHIND = {"softmax_rebinds_torch_softmax": "cheat_tamper",
          "softmax_rebinds_empty_like": "cheat_tamper", "swiglu_rebinds_math_sqrt": "cheat_tamper"}


def test_the_cheats_pass_the_allow_list_and_the_probes_do_not() -> None:
    for param in CASES:
        plant = param.values[0]
        refused = imports.problems((BAD / f"redteam11_{plant}.py").read_text())
        assert bool(refused) == (plant in BEHIND), (plant, refused)
    for plant in PROBES:
        assert imports.problems((BAD / f"redteam11_{plant}.py").read_text()), plant


@pytest.mark.parametrize(("plant", "task", "kind"), CASES)
def test_redteam11_plant_is_rejected(plant, task, kind):
    # as users get it: the allow-list on (every cheat passes it)
    judged_as_users_get_it(task, (BAD / f"redteam11_{plant}.py").read_text(), kind,
                           BEHIND.get(plant))


def _probe(plant: str, task: str = "rmsnorm"):
    return probe((BAD / f"redteam11_{plant}.py").read_text(), task)


# closed: the seccomp filter refuses preadv2 (RWF_NOWAIT read which pages of the bound /usr
# the host had cached) and fadvise64 (DONTNEED dropped 863 of 907 pages of /usr/bin/git)
def test_redteam11_host_page_cache_stays_the_hosts():
    """mincore() residency of bound host files, and POSIX_FADV_DONTNEED on one the host
    had cached."""
    _, report = _probe("escape_page_cache")
    assert not escaped(report), report


# closed: the seccomp filter refuses sync and syncfs (they wrote back the whole host's
# dirty pages: Dirty 1524 kB -> 72 kB in one run, an I/O burst no cgroup bounds)
def test_redteam11_no_host_wide_action_from_the_jail():
    """sync()/syncfs() on a bound host filesystem, a system-wide perf counter, host
    uevents, host-global pressure and fork counts."""
    _, report = _probe("escape_host_wide_calls")
    assert not escaped(report), report
