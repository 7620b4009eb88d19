"""Every planted faulty or cheating candidate is caught and classified (CPU interpreter).

One subprocess per candidate (each imports torch + triton, ~3 s on 2 cores), on two
shapes: a full block (4, 128) and a row shorter than its block (1, 7).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import evaluate

BAD = Path(__file__).parents[2] / "bad_kernels"
FULL, SHORT = "rows=4,cols=128", "rows=1,cols=7"
SHAPES = [(4, 128), (1, 7)]

# file, extra evaluate() arguments, expected stage, expected error kind, failing shapes
CASES = [
    ("syntax_error", {}, "syntax", "syntax_error", []),
    ("compile_error", {}, "compile", "compile_error", [FULL]),
    ("endless_loop", {"timeout_s": 10}, "run", "timeout", [FULL]),  # torch import: ~5 s loaded
    ("oob_read", {}, "run", "illegal_memory_access", [SHORT]),
    ("oob_read_discarded", {}, "run", "illegal_memory_access", [SHORT]),  # GPU: guards miss it
    ("off_by_one_mask", {"dtype": "float32"}, "correctness", "wrong_result", [SHORT]),
    ("small_bias", {}, "correctness", "bias", [FULL, SHORT]),
    ("cached_output", {}, "correctness", "cheat_cached_output", [FULL, SHORT]),
    ("writes_input", {}, "correctness", "cheat_input_modified", [FULL, SHORT]),
    ("reused_buffer", {}, "correctness", "cheat_aliasing", [FULL, SHORT]),
    ("output_pool", {}, "correctness", "cheat_aliasing", [FULL, SHORT]),
    ("runtime_error", {}, "run", "runtime_error", [FULL]),
    ("out_of_memory", {"mem_limit_mb": 4096}, "run", "out_of_memory", [FULL]),
    ("segfault", {}, "run", "illegal_memory_access", [FULL]),
]

# what the agent must be told: the error and the candidate's line
MESSAGES = {
    "compile_error": ("incompatible dimensions", "tl.arange(0, 2 * BLOCK)"),
    "oob_read": ("out-of-bounds load", "line 14"),
    "oob_read_discarded": ("out-of-bounds load", "line 17"),
    "small_bias": ("although every element is within tolerance",),
    "syntax_error": ("expected ':'", "def run(x)"),
    "runtime_error": ("view(-1, 3)",),
    "output_pool": ("were not allocated in this call",),
}


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
    for text in MESSAGES.get(name, ()):
        assert text in result.error_message, result.error_message
    if name == "small_bias":  # hides under atol + rtol*|ref|; only the bias rule sees it
        assert result.mismatch_share == 0.0 and 3e-3 < result.bias < 7e-3
