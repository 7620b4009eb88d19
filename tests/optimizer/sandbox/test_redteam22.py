"""Red team 22 (tests/bad_kernels/REDTEAM22.md): held-out plants from the docs alone,
after round 21's reach. None keyed on a shape: each on a property every input the judge
built shared. The inputs now hold each:

- softmax: a grammar's mask (eight allowed ids a row, -inf runs between them), where a
  kernel took the first all -inf chunk for right padding;
- attention: scores at twice the scale (an online softmax with no running max overflows
  float16's exp), and caches with room past the keys (a decode that dropped its masks
  where a key block fit in the cache);
- RoPE: positions of a long context to 8M (a clamp past 2**21);
- matmul: rows whose products pass float16's range (a clamp to 65,504 hid the inf); SwiGLU
  too;
- a frozen model's weights (``nn.Parameter`` that requires no grad) in the user's
  sequence of calls, where a cast copy was kept by shape (RMSNorm, matmul).

Open: a path taken after 2**20 calls in one process (a strict xfail below). The escape
probes got the runner's host pid from the folder names; they carry none since.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelkb.kernels.discovery import get_task

BAD = Path(__file__).parents[2] / "bad_kernels"


def _condition(task_name: str, name: str):
    (condition,) = [c for c in get_task(task_name).input_conditions if c.name == name]
    return condition


def _inputs(task_name: str, shape: tuple[int, ...], condition: str, seed: int = 3):
    task = get_task(task_name)
    return _condition(task_name, condition).apply(
        tuple(task.make_inputs(shape, torch.float16, seed, "cpu")), seed)


def test_a_grammars_mask_holds_runs_of_minus_inf_between_real_logits():
    (x,) = _inputs("softmax", (3, 8192), "a grammar's mask")
    finite = torch.isfinite(x[0]).nonzero().flatten()
    assert 2 <= len(finite) <= 9 and int(finite.diff().min()) >= 1024  # runs between them


def test_attentions_inputs_reach_large_scores_and_caches_with_room():
    q, k, v, k_cache, v_cache, cache_len = _inputs("attention", (1, 2, 16, 100, 64),
                                                   "large scores")
    keys = torch.cat((k_cache[:, :, :cache_len].float(), k.float()), dim=2)
    scores = q.float() @ keys.transpose(-1, -2) / 64**0.5
    assert float(scores.max()) > 11.09  # float16's exp overflows past it
    *_, k_cache, v_cache, cache_len = _inputs("attention", (1, 2, 1, 100, 64),
                                              "a cache with room")
    spare = k_cache.shape[2] - (cache_len + 1)
    assert spare > 2 * 128 and bool(k_cache[:, :, cache_len + 1:].isnan().all())


def test_ropes_long_context_passes_two_million_and_stays_exact_in_float32():
    positions = [_inputs("rope", (2, 64, 2, 1, 64), "a long context", seed)[2].max()
                 for seed in range(8)]
    assert max(int(p) for p in positions) > 2**22
    assert max(int(p) for p in positions) + 10**6 < 2**24  # a drawn offset on top


@pytest.mark.parametrize(("task_name", "shape"), [("matmul", (33, 70, 100)),
                                                  ("swiglu", (9, 1000))])
def test_inputs_reach_products_past_float16s_range(task_name, shape):
    ref = get_task(task_name).reference(*_inputs(task_name, shape,
                                                 "products past float16's range"))
    assert bool(ref.isinf().any()) and bool(ref.isfinite().any())


def _evaluated(task: str, plant: str, **kwargs):
    from kernelkb.optimizer.sandbox import evaluate

    return evaluate(task, (BAD / f"redteam22_{plant}.py").read_text(), shapes="auto",
                    seeds=1, timeout_s=900, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize(("task", "plant", "kinds"), [
    ("softmax", "softmax_padding_early_exit", {"wrong_result"}),
    ("attention", "attention_no_running_max", {"wrong_result"}),
    ("attention", "attention_static_cache_decode", {"wrong_result"}),
    ("rope", "rope_clamped_2m_positions", {"wrong_result"}),
    ("matmul", "matmul_fp16_saturates", {"wrong_result"}),
    ("matmul", "matmul_frozen_weight_pack", {"cheat_cached_output", "wrong_result"}),
    ("rmsnorm", "rmsnorm_frozen_weight_cache", {"cheat_cached_output", "wrong_result"}),
], ids=["grammar-mask", "no-running-max", "static-cache", "clamped-positions",
        "fp16-saturates", "frozen-matmul", "frozen-rmsnorm"])
def test_a_kernel_wrong_on_inputs_the_judge_now_builds_is_refused(task, plant, kinds):
    result = _evaluated(task, plant)
    assert not result.ok and result.error_kind in kinds, result.text


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="open: a path taken after 2**20 calls in one "
                   "process; every check runs from a fresh import, far under it "
                   "(docs/evaluator.md, the cheat_tamper row's 'Not seen')")
def test_a_path_taken_after_a_million_calls_is_refused():
    result = _evaluated("rmsnorm", "rmsnorm_hot_after_million_calls")
    assert not result.ok, result.text
