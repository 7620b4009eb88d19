"""Red team 3: held-out cheats and escapes written from the docs alone
(tests/bad_kernels/redteam3_*.py, REDTEAM3.md), through the judge as users get it.

A plant the judge rejects is a plain assertion with the kind it must get; one that gets
through today is a strict xfail whose reason says how, so the hole stays on record and
the test turns red the day it is closed.
"""
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import evaluate

pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"


def _open(reason):
    return pytest.mark.xfail(strict=True, reason=f"open: {reason}")


# (plant, task, the kind a correct judge returns; None: any rejection)
CASES = [
    # closed by the source allow-list (imports.py)
    pytest.param("redteam3_hook_aten_out", "softmax", "cheat_tamper", id="hook_aten_out"),
    pytest.param("redteam3_hook_aten_mm", "matmul", "cheat_tamper", id="hook_aten_mm"),
    pytest.param("redteam3_interp_numpy_body", "softmax", "cheat_tamper",
                 id="interp_numpy_body"),
    pytest.param("redteam3_numpy_clock_bomb", "softmax", "cheat_tamper",
                 id="numpy_clock_bomb"),
    pytest.param("redteam3_numpy_reads_uid_map", "softmax", "cheat_tamper",
                 id="numpy_reads_uid_map"),
    pytest.param("redteam3_getattr_sys_modules", "softmax", "cheat_tamper",
                 id="getattr_sys_modules"),
    pytest.param("redteam3_host_info_leak", "softmax", "cheat_tamper", id="host_info_leak"),
    pytest.param("redteam3_os_times_bomb", "softmax", "cheat_tamper", id="os_times_bomb"),
    pytest.param("redteam3_hostname_detect", "softmax", "cheat_tamper", id="hostname_detect"),
    pytest.param("redteam3_host_writes_numpy", "softmax", "cheat_tamper",
                 id="host_writes_numpy"),
    pytest.param("redteam3_judge_signals", "softmax", None, id="judge_signals"),
    # caught by the judge's own reference, taken before the call
    pytest.param("redteam3_rewrites_input_to_match", "softmax", "cheat_input_modified",
                 id="rewrites_input_to_match"),
    # closed by rope's long-context condition (positions from 32768 on)
    pytest.param("redteam3_rope_pos_wrap", "rope", "wrong_result", id="rope_pos_wrap"),
    # closed by the column-major condition every task gets (the last stride is not 1)
    pytest.param("redteam3_transposed_input", "softmax", "wrong_result", id="transposed_input"),
    # closed by the judge's check of every other dtype the task declares, on its smallest
    # CPU shape (the exported op also refuses unchecked dtypes: test_export_plan.py)
    pytest.param("redteam3_dtype_only_checked", "softmax", "wrong_result",
                 id="dtype_only_checked"),
    # closed by the judge's shape past the largest asked (1.5-2x its bytes on the CPU,
    # within the task's bounds), its rows under every condition of the values
    pytest.param("redteam3_big_input_lazy", "softmax", "wrong_result", id="big_input_lazy"),
    # closed: inputs that require grad are a condition of every task, and launches that
    # differ from the plain call's on same-layout inputs are replayed on the others' values
    pytest.param("redteam3_requires_grad_lazy", "softmax", "cheat_replay",
                 id="requires_grad_lazy"),
]


@pytest.mark.parametrize(("plant", "task", "kind"), CASES)
def test_redteam3_plant_is_rejected(plant, task, kind):
    source = (BAD / f"{plant}.py").read_text()
    result = evaluate(task, source, shapes="auto", seeds=1, timeout_s=600)
    assert result.error_kind != "timeout", result.error_message
    assert not result.ok, f"{plant} passed the judge"
    if kind is not None:
        assert result.error_kind == kind, (result.error_kind, result.error_message)


def test_the_jail_masks_host_facts_the_red_team_read() -> None:
    """With every in-process rule off, the jail alone: no host MAC address through
    /sys/devices or /sys/bus, no kernel command line."""
    from kernelkb.optimizer.sandbox import jail

    if jail.mode()[0] is None:
        pytest.skip(f"no namespaces here: {jail.mode()[1]}")
    source = (BAD / "redteam3_host_info_leak.py").read_text()
    result = evaluate("softmax", source, shapes=[(1, 7)], seeds=1, timeout_s=600,
                      refuse_imports=False, refuse_surroundings=False,
                      refuse_introspection=False)
    mac = Path("/sys/class/net/eth0/address")
    if mac.exists():
        assert mac.read_text().strip() not in (result.error_message or "")
    cmdline = Path("/proc/cmdline").read_text().strip()
    assert cmdline[:40] not in (result.error_message or ""), result.error_message
