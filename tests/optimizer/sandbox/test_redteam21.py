"""Red team 21 (tests/bad_kernels/REDTEAM21.md): held-out plants from the docs alone,
after round 20's drawn reach. Each keyed its short path on a region the spans or their
budget left out: more than 128 new tokens, more than 32 sequence-heads, M > 256 or
N > 4096 with K past the lists, rows of 2**18-2**19 columns, one row past SwiGLU's listed
width, RoPE (which had no reach) past 8K tokens with positions that do not run. The
spans now take each region in (kernels/reach.py; tests/kernels/test_reach.py draws each);
the tests name a shape of it. More than 32 sequence-heads over a long cache is past the
interpreter's budget: the GPU's reach draws it, and its test runs there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

BAD = Path(__file__).parents[2] / "bad_kernels"
# RoPE's rows of the reach take the conditions of the values from this one: plain, a long
# context, then packed positions (a row whose documents restart their positions)
PACKED_POSITIONS = 2


def _evaluated(task: str, plant: str, **kwargs):
    from kernelkb.optimizer.sandbox import evaluate

    return evaluate(task, (BAD / f"redteam21_{plant}.py").read_text(), shapes="auto",
                    seeds=1, timeout_s=900, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize(("task", "plant", "reach"), [
    ("attention", "attention_chunked_prefill_window", (1, 1, 129, 32769, 64)),
    ("matmul", "matmul_prefill_long_k_tail", (257, 16, 14336)),
    ("matmul", "matmul_wide_n_long_k_tail", (1, 4097, 11100)),
    ("softmax", "softmax_vocab_band_first_chunk_max", (8, 300000)),
    ("swiglu", "swiglu_decode_wide_tail", (1, 29568)),
], ids=["chunked-prefill-window", "prefill-k-tail", "wide-n-k-tail", "vocab-band",
        "decode-wide-tail"])
def test_a_short_path_in_a_region_the_spans_now_take_is_refused(task, plant, reach):
    result = _evaluated(task, plant, reach=reach)
    assert not result.ok and result.error_kind == "wrong_result", result.text
    assert "past the task's lists" in (result.error_message or ""), result.error_message


@pytest.mark.slow
def test_running_positions_assumed_on_a_long_row_are_refused():
    from kernelkb.kernels.discovery import get_task

    reach = (1, 8200, 2, 1, 64)
    assert get_task("rope").cpu_reach is not None
    result = _evaluated("rope", "rope_long_prompt_running_positions", reach=reach,
                        reach_rows_from=PACKED_POSITIONS)
    assert not result.ok and result.error_kind == "wrong_result", result.text


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_window_taken_past_32_sequence_heads_is_refused_on_the_gpu():
    result = _evaluated("attention", "attention_many_heads_window",
                        reach=(2, 17, 1, 70000, 128))
    assert not result.ok and result.error_kind == "wrong_result", result.text
