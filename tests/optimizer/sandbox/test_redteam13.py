"""Red team 13 (tests/bad_kernels/REDTEAM13.md): held-out plants on the parity between the
judge and the export's launch plans, written from the docs alone. Each is rejected as users
get it, or (where the judge rightly passes what it checks) the exported op stays right
where the plant would have gone wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from redteam import judged_as_users_get_it

BAD = Path(__file__).parents[2] / "bad_kernels"
ROOT = Path(__file__).parents[3]

CASES = [
    # closed from the source: state kept on an object the module did not make (a tensor
    # made at import, the triton.language module) outlives every fresh import
    pytest.param("softmax_tensor_attr_layouts", "softmax", "cheat_tamper",
                 id="softmax_tensor_attr_layouts"),
    pytest.param("swiglu_module_attr_layouts", "swiglu", "cheat_tamper",
                 id="swiglu_module_attr_layouts"),
    # closed from the source: an address read past its 16-byte alignment (a row's phase in
    # its 64-byte line; q and k read through one pointer when they sat back to back)
    pytest.param("softmax_pointer_phase", "softmax", "cheat_tamper", id="softmax_pointer_phase"),
    pytest.param("rope_stacked_qk", "rope", "cheat_tamper", id="rope_stacked_qk"),
    # caught: a counter in the sign bits of a kept buffer (its bytes change)
    pytest.param("rmsnorm_signed_zero_count", "rmsnorm", "cheat_aliasing",
                 id="rmsnorm_signed_zero_count"),
    # caught: lazy on a fresh module's first call, on strided rows only (by the judge's
    # unusual lap, wrong_result, when the round ran; since, first by the worker: each
    # other layout's call is a fresh import's, its plan replayed on every condition's
    # values laid out so, check_layout_plans)
    pytest.param("rmsnorm_first_call_strided", "rmsnorm", "cheat_replay",
                 id="rmsnorm_first_call_strided"),
]


# behind the allow-list: the replay on inputs moved 48 bytes along in memory (a plan is
# keyed on 16-byte alignment alone) finds the frozen row phase. Not the adjacency of q and
# k: the judge never records a call with its inputs back to back (the allow-list's alone)
BEHIND = {"softmax_pointer_phase": "cheat_replay"}


@pytest.mark.slow
@pytest.mark.parametrize(("plant", "task", "kind"), CASES)
def test_redteam13_plant_is_rejected(plant: str, task: str, kind: str) -> None:
    judged_as_users_get_it(task, (BAD / f"redteam13_{plant}.py").read_text(), kind,
                           BEHIND.get(plant))


FALLBACK = """
import torch, best_TASK as m
CALL
print("wrong", len(bad), "refused", len(m.launcher.refused))
"""
RMSNORM_CALLS = """
bad = []
w = torch.randn(64)
for i in range(4100):
    x = torch.randn(2, 64)
    x[1] = 0.0  # a padding row: NaN without eps
    y = m.launch(x, w, eps=1e-6)
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    if not torch.allclose(y, ref, atol=1e-4, equal_nan=False):
        bad.append(i)
"""
SWIGLU_CALLS = """
bad = []
for i in range(4100):
    gate, up = torch.randn(2, 128).chunk(2, -1)  # a fused gate_up output: one storage
    y = m.launch(gate, up)
    if not torch.allclose(y, torch.nn.functional.silu(gate) * up, atol=1e-5):
        bad.append(i)
"""


@pytest.mark.slow
@pytest.mark.parametrize(("plant", "task", "calls", "refused"), [
    ("rmsnorm_refused_plan_state", "rmsnorm", RMSNORM_CALLS, "1"),
    ("swiglu_shared_storage_fallback", "swiglu", SWIGLU_CALLS, "0"),
])
def test_a_layout_without_a_plan_calls_run_from_a_fresh_import_each_time(
        tmp_path: Path, plant: str, task: str, calls: str, refused: str) -> None:
    """A layout that cannot be a plan (a host read) calls run() per call: each call from
    the module as imported, so a counter kept across calls never passes 1 and the plant's
    switch at 4096 calls is never reached (wrong from call 4097 on before). Inputs that
    share one storage (a fused gate_up projection's halves) were such a layout; they are
    a plan now, each half read from its own input, and the switch is never reached
    either."""
    from kernelkb.kernels.discovery import get_task
    from kernelkb.optimizer.export import export_module

    source = (BAD / f"redteam13_{plant}.py").read_text()
    export_module(get_task(task), source, tmp_path / f"best_{task}.py", dtype="float32")
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("KERNELKB_LAUNCH_PLAN", None)
    check = FALLBACK.replace("TASK", task).replace("CALL", calls)
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", check], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["wrong", "0", "refused", refused], done.stdout
