"""What a call may not change for its caller (caller_state.py): PyTorch's global state and
the input tensors' metadata, read around every checked call. The rule holds alone: red
team 10's two plants that change them are refused with the source rules off."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelkb.optimizer.sandbox import caller_state, evaluate

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"


def test_a_changed_global_state_is_named() -> None:
    before = caller_state.snapshot()
    try:
        torch.set_default_dtype(torch.float64)
        torch.backends.cuda.matmul.allow_tf32 = not torch.backends.cuda.matmul.allow_tf32
        changed = caller_state.changed(before, caller_state.snapshot())
    finally:
        torch.set_default_dtype(before["default dtype"])
        torch.backends.cuda.matmul.allow_tf32 = before["TF32 matmuls"]
    # TF32 matmuls move the float32 matmul precision with them: both are said
    assert {c.split(":")[0] for c in changed} >= {"default dtype", "TF32 matmuls"}
    assert caller_state.changed(before, caller_state.snapshot()) == []


def test_a_state_first_unread_may_be_made_by_the_call() -> None:
    """CUDA initialised by the first call is no change the caller sees."""
    assert caller_state.changed({"current CUDA device": None}, {"current CUDA device": 0}) == []
    assert caller_state.changed({"current CUDA device": 0}, {"current CUDA device": 1})


def test_an_inputs_metadata_beyond_its_bytes_is_compared() -> None:
    weight = torch.randn(8, requires_grad=True)
    x = torch.randn(4, 8)
    before = caller_state.tensor_metadata([x, weight, 1e-6])
    weight.requires_grad_(False)
    x.data = torch.randn(4, 8)  # same values' shape, other storage
    changed = caller_state.metadata_changed(before, caller_state.tensor_metadata([x, weight, 1e-6]))
    assert changed == ["input 0: storage", "input 1: requires_grad"]


@pytest.mark.slow
@pytest.mark.parametrize(("plant", "task", "kind"), [
    ("redteam10_softmax_autocast_left_on", "softmax", "cheat_tamper"),
    ("redteam10_rmsnorm_freezes_weight", "rmsnorm", "cheat_input_modified"),
])
def test_the_rule_holds_with_the_source_rules_off(plant: str, task: str, kind: str) -> None:
    source = (BAD / f"{plant}.py").read_text()
    result = evaluate(task, source, shapes="auto", seeds=1, refuse_imports=False)
    assert result.error_kind == kind, (result.error_kind, result.error_message)
