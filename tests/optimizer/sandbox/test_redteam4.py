"""Red team 4: held-out cheats written from the docs alone after the source allow-list
(tests/bad_kernels/redteam4_*.py, REDTEAM4.md), through the judge as users get it.

A plant the judge rejects is a plain assertion with the kind it must get; one that gets
through today is a strict xfail whose reason says how."""
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import evaluate, imports

pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"


def _open(reason):
    return pytest.mark.xfail(strict=True, reason=f"open: {reason}")


# plant -> (task, the kind a correct judge returns)
CASES = [
    # the allow-list, widened: match patterns, str.format and attrgetter walks, string
    # annotations evaluated, torch's own file readers and writers, global-state setters,
    # flag readers
    pytest.param("match_sys_modules", "softmax", "cheat_tamper", id="match_sys_modules"),
    pytest.param("format_sniff", "softmax", "cheat_tamper", id="format_sniff"),
    pytest.param("attrgetter", "softmax", "cheat_tamper", id="attrgetter"),
    pytest.param("typehints_eval", "softmax", "cheat_tamper", id="typehints_eval"),
    pytest.param("from_file_detect", "softmax", "cheat_tamper", id="from_file_detect"),
    pytest.param("pth_append", "softmax", "cheat_tamper", id="pth_append"),
    pytest.param("global_state", "softmax", "cheat_tamper", id="global_state"),
    pytest.param("autocast_only", "softmax", "cheat_tamper", id="autocast_only"),
    pytest.param("jail_probe", "softmax", "cheat_tamper", id="jail_probe"),
    # layouts every task now gets: offset views (off every 16-byte boundary) and rows
    # broadcast from one (a row stride of 0); the torch path they take is then seen
    pytest.param("misaligned_only", "softmax", "torch_compute", id="misaligned_only"),
    pytest.param("offset_view", "softmax", "torch_compute", id="offset_view"),
    pytest.param("broadcast_rows", "softmax", "torch_compute", id="broadcast_rows"),
    # closed by the task's scalar arguments (Task.scalar_args) drawn over their legal
    # range, a condition of every shape: the PyTorch path it takes is then seen
    pytest.param("rmsnorm_eps_flag", "rmsnorm", "torch_compute", id="rmsnorm_eps_flag"),
    pytest.param("magic_trigger", "softmax", None, id="magic_trigger",
                 marks=_open("a row whose first logit is exactly 12288.0 comes out zero: a "
                             "backdoor on one exact value, which no drawn input meets and "
                             "no static rule names without naming the value (docs/"
                             "evaluator.md, 'What no testing judge finds')")),
]


def test_the_allow_list_names_each_route_from_the_source() -> None:
    for plant in ("match_sys_modules", "format_sniff", "attrgetter", "typehints_eval",
                  "from_file_detect", "pth_append", "global_state", "autocast_only",
                  "jail_probe"):
        assert imports.problems((BAD / f"redteam4_{plant}.py").read_text()), plant


@pytest.mark.parametrize(("plant", "task", "kind"), CASES)
def test_redteam4_plant_is_rejected(plant, task, kind):
    source = (BAD / f"redteam4_{plant}.py").read_text()
    result = evaluate(task, source, shapes="auto", seeds=1, timeout_s=900)
    assert result.error_kind != "timeout", result.error_message
    assert not result.ok, f"{plant} passed the judge"
    if kind is not None:
        assert result.error_kind == kind, (result.error_kind, result.error_message)
