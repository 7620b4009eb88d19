"""Red team 10: held-out cheats and escape probes written from the docs alone after the
static Triton-only rule (tests/bad_kernels/redteam10_*.py, REDTEAM10.md), through the
judge as users get it.

A plant the judge refuses is a plain assertion of the kind it got. A plant that passes the
judge is a strict xfail asserting the kind a correct judge would give, with how it gets
through as the reason. The escape probes run behind the allow-list (`refuse_imports=False`:
they import subprocess and os) and start a fresh Python in the jail: what they report must
hold no line "ESCAPED"."""
from pathlib import Path

import pytest
from redteam import escaped, judged_as_users_get_it, probe

from kernelkb.optimizer.sandbox import imports

pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"



# plant -> (task, the kind a correct judge returns)
CASES = [
    # PyTorch (or Python) past the static Triton-only rule, on a branch no call of the
    # judge takes (rows past its reach, a dtype or a rank it never makes)
    # closed: what a wrapper does to its tensors is an allow-list (tensor_flow.py)
    pytest.param("rmsnorm_operators_only", "rmsnorm", "torch_compute", id="rmsnorm_operators_only"),
    # closed: PyTorch named in a kernel's body is Python, not Triton
    pytest.param("softmax_jit_body_python", "softmax", "torch_compute",
                 id="softmax_jit_body_python"),
    # closed: F.normalize is named (the static rule knows torch.nn.functional's names)
    pytest.param("rmsnorm_composite_normalize", "rmsnorm", "torch_compute",
                 id="rmsnorm_composite_normalize"),
    # closed: a tensor handed to an operator-module function (tensor_flow.py)
    pytest.param("matmul_operator_module", "matmul", "torch_compute", id="matmul_operator_module"),
    # closed by the allow-list: no star import
    pytest.param("softmax_star_import", "softmax", "cheat_tamper", id="softmax_star_import"),
    # closed: .tolist() and math over a tensor (tensor_flow.py)
    pytest.param("swiglu_host_python", "swiglu", "torch_compute", id="swiglu_host_python"),
    # closed: .index_put_() is named as a tensor method that computes
    pytest.param("softmax_accumulating_put", "softmax", "torch_compute",
                 id="softmax_accumulating_put"),
    # the caller's process and tensors, beyond the answer
    # closed by the allow-list: no torch setter (torch.set_*)
    pytest.param("softmax_autocast_left_on", "softmax", "cheat_tamper",
                 id="softmax_autocast_left_on"),
    # closed: the weight read after the call holds other values (its .data rebound);
    # the allow-list refuses it first now (an attribute set on the caller's tensor)
    pytest.param("rmsnorm_rebinds_weight_data", "rmsnorm", "cheat_tamper",
                 id="rmsnorm_rebinds_weight_data"),
    # closed: .requires_grad_() is no view, copy or cast (tensor_flow.py)
    pytest.param("rmsnorm_freezes_weight", "rmsnorm", "torch_compute", id="rmsnorm_freezes_weight"),
    # closed: calls on batches never seen may not each leave memory alive
    # (worker.check_kept_per_batch)
    pytest.param("rmsnorm_workspace_per_shape", "rmsnorm", "cheat_aliasing",
                 id="rmsnorm_workspace_per_shape"),
]

PROBES = ("escape_sockets_keys_fds", "escape_across_evaluations", "escape_host_kernel_caches")




# cheats that passed the allow-list when written and are refused by it since
REFUSED_BY_THE_ALLOW_LIST = {"softmax_star_import", "softmax_autocast_left_on",
                             "rmsnorm_rebinds_weight_data"}
# what the layers behind the allow-list say of a plant it now refuses first
BEHIND = {"rmsnorm_rebinds_weight_data": "cheat_input_modified"}


def test_the_cheats_pass_the_allow_list_and_the_probes_do_not() -> None:
    for param in CASES:
        plant = param.values[0]
        refused = imports.problems((BAD / f"redteam10_{plant}.py").read_text())
        assert bool(refused) == (plant in REFUSED_BY_THE_ALLOW_LIST), (plant, refused)
    for plant in PROBES:
        assert imports.problems((BAD / f"redteam10_{plant}.py").read_text()), plant


@pytest.mark.parametrize(("plant", "task", "kind"), CASES)
def test_redteam10_plant_is_rejected(plant, task, kind):
    # as users get it: the allow-list on (every cheat passes it)
    judged_as_users_get_it(task, (BAD / f"redteam10_{plant}.py").read_text(), kind,
                           BEHIND.get(plant))


def _probe(plant: str, task: str = "rmsnorm"):
    return probe((BAD / f"redteam10_{plant}.py").read_text(), task)


def test_redteam10_no_host_socket_key_or_writable_host_file():
    """Unix sockets and FIFOs anywhere in the jail's folders, add_key/request_key, the
    descriptors the worker hands its children, a terminal on fd 0."""
    _, report = _probe("escape_sockets_keys_fds")
    assert not escaped(report), report


def test_redteam10_nothing_carries_from_one_evaluation_to_the_next():
    """Markers in every writable folder and keys in every keyring, looked for by the next
    evaluation of the same process (a worker started ahead)."""
    _probe("escape_across_evaluations")
    _, report = _probe("escape_across_evaluations")
    assert not escaped(report), report


def test_redteam10_no_host_kernel_objects_outlive_the_jail():
    """The host's dentry, inode and file counts are covered in the jail's /proc (jail.py's
    PROC_MASKED), so the plant reads no host-global counter; the dentries its lookups
    make are charged to the evaluation's cgroup and freed at its end, which
    test_limits_reclaim.py measures from the host's side."""
    _, report = _probe("escape_host_kernel_caches")
    assert not escaped(report), report
    assert "dentry-state unreadable" in report
