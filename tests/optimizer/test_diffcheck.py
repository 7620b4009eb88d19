"""AST-normalised diff check: comment / whitespace / docstring-only edits are invalid."""

from __future__ import annotations

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.diffcheck import check, normalize

SOFTMAX = get_task("softmax").template


def test_identical_source_is_an_empty_diff() -> None:
    result = check(SOFTMAX, SOFTMAX)
    assert not result.valid and result.diff == "" and "empty" in result.reason


def test_comment_only_edit_is_invalid_but_keeps_its_diff() -> None:
    child = SOFTMAX.replace("    pid = tl.program_id(0)",
                            "    # fewer shared-memory bytes -> higher occupancy\n"
                            "    pid = tl.program_id(0)")
    result = check(SOFTMAX, child)
    assert not result.valid
    assert "comments" in result.reason
    assert "+    # fewer shared-memory" in result.diff


def test_whitespace_and_docstring_changes_are_invalid() -> None:
    reformatted = SOFTMAX.replace("def run(x):", 'def run(x):\n    """Faster now."""') \
        .replace("n_rows, n_cols = x.shape", "n_rows,   n_cols   =   x.shape")
    assert not check(SOFTMAX, reformatted).valid


def test_a_real_change_is_valid_with_a_unified_diff() -> None:
    child = get_task("softmax").render({"NUM_WARPS": 8})
    result = check(SOFTMAX, child)
    assert result.valid and result.reason is None
    assert "-NUM_WARPS = 4" in result.diff and "+NUM_WARPS = 8" in result.diff


def test_unparseable_child_is_left_to_the_sandbox() -> None:
    result = check(SOFTMAX, SOFTMAX.replace("def run(x):", "def run(x)"))
    assert result.valid  # a real change; the sandbox reports the syntax error
    assert normalize("def f(:") is None
