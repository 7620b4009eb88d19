"""Every planted faulty or cheating candidate is caught and classified (CPU interpreter).

One subprocess per candidate (each imports torch + triton, ~3 s on 2 cores), on two
shapes: a full block (4, 128) and a row shorter than its block (1, 7).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.sandbox import evaluate

BAD = Path(__file__).parents[2] / "bad_kernels"
FULL, SHORT = "rows=4,cols=128", "rows=1,cols=7"
SHAPES = [(4, 128), (1, 7)]

# file, extra evaluate() arguments, expected stage, expected error kind, failing shapes
CASES = [
    ("syntax_error", {}, "syntax", "syntax_error", []),
    ("compile_error", {}, "compile", "compile_error", [FULL]),
    ("endless_loop", {"timeout_s": 5}, "run", "timeout", [FULL]),
    ("oob_read", {}, "run", "illegal_memory_access", [SHORT]),
    ("off_by_one_mask", {"dtype": "float32"}, "correctness", "wrong_result", [SHORT]),
    ("small_bias", {}, "correctness", "bias", [FULL, SHORT]),
    ("cached_output", {}, "correctness", "cheat_cached_output", [FULL, SHORT]),
    ("writes_input", {}, "correctness", "cheat_input_modified", [FULL, SHORT]),
    ("reused_buffer", {}, "correctness", "cheat_aliasing", [FULL, SHORT]),
    ("runtime_error", {}, "run", "runtime_error", [FULL]),
    ("out_of_memory", {"mem_limit_mb": 4096}, "run", "out_of_memory", [FULL]),
    ("segfault", {}, "run", "illegal_memory_access", [FULL]),
]


@pytest.mark.parametrize(("name", "kwargs", "stage", "kind", "failing"), CASES,
                         ids=[c[0] for c in CASES])
def test_planted_candidate_is_caught(name, kwargs, stage, kind, failing):
    source = (BAD / f"{name}.py").read_text()
    args = {"shapes": SHAPES, "seeds": 2, "timeout_s": 30, **kwargs}
    result = evaluate("softmax", source, **args)
    assert not result.ok
    assert (result.stage, result.error_kind) == (stage, kind), result.text
    assert result.failing_shapes == failing, result.text
    assert kind in result.text
    assert result.timing_available is False


def test_bias_candidate_passes_the_max_error_rule():
    """The 1.005 scaling hides under atol + rtol*|ref|; only the bias rule sees it."""
    result = evaluate("softmax", (BAD / "small_bias.py").read_text(), shapes=SHAPES, seeds=1)
    assert result.error_kind == "bias"
    assert result.mismatch_share == 0.0
    assert 3e-3 < result.bias < 7e-3
    assert "although every element is within tolerance" in result.error_message


def test_messages_point_at_the_candidate_line():
    compile_err = evaluate("softmax", (BAD / "compile_error.py").read_text(), shapes=SHAPES[:1],
                           seeds=1)
    assert "incompatible dimensions" in compile_err.error_message
    assert "tl.arange(0, 2 * BLOCK)" in compile_err.error_message
    oob = evaluate("softmax", (BAD / "oob_read.py").read_text(), shapes=SHAPES, seeds=1)
    assert "out-of-bounds load" in oob.error_message
    assert "line 14" in oob.error_message
