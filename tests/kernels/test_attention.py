"""The fused decoder attention task: output AND cache writes vs reference, every space point.

The op writes the KV cache in place, so each check runs the reference and the candidate
on separate clones of the inputs and compares the output and both caches (the task's
``mutated_inputs``). bf16 on the CPU: Triton's interpreter does not support ``tl.dot`` on
bfloat16 operands (triton-lang/triton#11584), so bf16 runs only on a GPU here.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from kernel_checks import assert_task_close, candidate_for, naive_cases, run_tracked

from kernelkb.kernels.attention import CACHE_SLACK, apply_rope, rope_cos_sin
from kernelkb.kernels.base import Shape
from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.dtypes import DTYPES

TASK = get_task("attention")
SPACE = list(TASK.space())
ON_GPU = torch.cuda.is_available()
# Small shapes every point of the space must pass (seconds in the interpreter): odd cache
# and a sequence shorter than any block; sizes that divide every tile (the EVEN_SEQ path)
# with a cached prefix; a decode step of one token.
SPACE_SHAPES = ((1, 1, 9, 13, 32), (1, 1, 64, 64, 32), (1, 1, 1, 37, 32))


def _clone(inputs: tuple) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def check_attention(config, shape: Shape, dtype: str, *, seed: int, device: str) -> None:
    """Candidate vs reference on separate clones: the output and the written caches."""
    inputs = TASK.make_inputs(shape, DTYPES[dtype], seed, device)
    ref_inputs, cand_inputs = _clone(inputs), _clone(inputs)
    expected = TASK.reference(*ref_inputs)
    label = f"attention {TASK.shape_label(shape)} {dtype} config={dict(config or {})}"
    actual = run_tracked(TASK, candidate_for(TASK, config), cand_inputs, label)
    assert_task_close(TASK, dtype, actual, expected, label=f"{label} output")
    for i in TASK.mutated_inputs:
        assert_task_close(TASK, dtype, cand_inputs[i], ref_inputs[i], label=f"{label} input {i}")


def test_a_kernel_that_skips_the_cache_write_fails(seed, device):
    """The fused form attends to new keys straight from k and v, so dropping its cache
    write leaves the output right: only the cache comparison can catch it."""
    fused = TASK.render({**TASK.default_config, "FUSE_KV_WRITE": True})
    marker = "    if FUSED:  # this program writes the cache rows of its own query block\n"
    assert fused.count(marker) == 1
    module = load_candidate(fused.replace(marker, "    if False:\n"), "skips_cache_write")
    inputs = TASK.make_inputs((1, 2, 9, 13, 32), torch.float16, seed, device)
    ref_inputs, cand_inputs = _clone(inputs), _clone(inputs)
    expected = TASK.reference(*ref_inputs)
    assert_task_close(TASK, "float16", module.run(*cand_inputs), expected, label="output")
    with pytest.raises(AssertionError, match="differ"):
        assert_task_close(TASK, "float16", cand_inputs[3], ref_inputs[3], label="k_cache")


def _skip_bf16_on_interpreter(dtype: str) -> None:
    if dtype == "bfloat16" and not ON_GPU:
        pytest.skip("interpreter: tl.dot on bf16 unsupported (triton-lang/triton#11584)")


@pytest.mark.parametrize(("shape", "dtype"), naive_cases(TASK), ids=str)
def test_naive_kernel_matches_reference(shape, dtype, seed, device):
    _skip_bf16_on_interpreter(dtype)
    check_attention(None, shape, dtype, seed=seed, device=device)


@pytest.mark.parametrize("config", SPACE, ids=lambda c: "-".join(map(str, c.values())))
def test_every_space_point_passes_on_small_edge_shapes(config, seed, device):
    for shape in SPACE_SHAPES:
        check_attention(config, shape, "float16", seed=seed, device=device)


def test_the_kv_caches_are_the_inputs_it_writes():
    assert TASK.mutated_inputs == (3, 4)



def test_reference_writes_only_the_new_cache_slots(seed):
    q, k, v, k_cache, v_cache, cache_len = TASK.make_inputs((1, 2, 5, 3, 32), torch.float32,
                                                            seed, "cpu")
    k_before, v_before = k_cache.clone(), v_cache.clone()
    TASK.reference(q, k, v, k_cache, v_cache, cache_len)
    new = slice(cache_len, cache_len + 5)
    assert k_cache.shape[2] == cache_len + 5 + CACHE_SLACK
    assert torch.equal(v_cache[:, :, new], v)
    assert not torch.equal(k_cache[:, :, new], k_before[:, :, new])
    for untouched in (slice(0, cache_len), slice(cache_len + 5, None)):  # NaN past: bitwise
        assert torch.equal(k_cache[:, :, untouched].view(torch.int32),
                           k_before[:, :, untouched].view(torch.int32))
        assert torch.equal(v_cache[:, :, untouched].view(torch.int32),
                           v_before[:, :, untouched].view(torch.int32))


def test_reference_agrees_with_sdpa_on_rotated_inputs(seed):
    """An independent formulation: RoPE by complex multiplication, then PyTorch's SDPA
    with an explicit causal mask shifted by the cached prefix."""
    batch, heads, seq, cache_len, dim = 2, 3, 11, 6, 32
    q, k, v, k_cache, v_cache, _ = TASK.make_inputs((batch, heads, seq, cache_len, dim),
                                                    torch.float32, seed, "cpu")
    prefix_k, prefix_v = k_cache[:, :, :cache_len].clone(), v_cache[:, :, :cache_len].clone()
    out = TASK.reference(q, k, v, k_cache, v_cache, cache_len)

    pos = torch.arange(cache_len, cache_len + seq, dtype=torch.float64)
    freq = 10000.0 ** (-torch.arange(dim // 2, dtype=torch.float64) / (dim // 2))
    turn = torch.polar(torch.ones(seq, dim // 2, dtype=torch.float64), pos[:, None] * freq)

    def rotate(x: torch.Tensor) -> torch.Tensor:
        z = torch.complex(x[..., : dim // 2].double(), x[..., dim // 2 :].double()) * turn
        return torch.cat((z.real, z.imag), dim=-1).float()

    keys = torch.cat((prefix_k, rotate(k)), dim=2)
    values = torch.cat((prefix_v, v), dim=2)
    mask = torch.ones(seq, cache_len + seq, dtype=torch.bool).tril(diagonal=cache_len)
    expected = F.scaled_dot_product_attention(rotate(q), keys, values, attn_mask=mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_rope_is_identity_at_position_zero_and_keeps_norms():
    x = torch.randn(4, 64)
    cos, sin = rope_cos_sin(torch.zeros(4, dtype=torch.long), 64)
    assert torch.equal(apply_rope(x, cos, sin), x)
    cos, sin = rope_cos_sin(torch.arange(100, 104), 64)
    rotated = apply_rope(x, cos, sin)
    assert not torch.allclose(rotated, x)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))


_NAIVE = load_candidate(TASK.template, "attention_naive")
_naive_rope_cos_sin = _NAIVE._rope_cos_sin


@triton.jit
def _angles_kernel(pos_ptr, freq_ptr, cos_ptr, sin_ptr, N: tl.constexpr, HALF: tl.constexpr):
    """The naive kernel's in-kernel cos / sin of N positions, stored [N, HALF]."""
    rows = tl.arange(0, N)
    offs = tl.arange(0, HALF)
    cos, sin = _naive_rope_cos_sin(tl.load(pos_ptr + rows), offs, freq_ptr, HALF)
    at = rows[:, None] * HALF + offs[None, :]
    tl.store(cos_ptr + at, cos)
    tl.store(sin_ptr + at, sin)


def test_in_kernel_rope_angles_hold_at_a_million_positions(device):
    """The naive kernel's computed cos / sin stay within 2e-6 of fp64 at positions to 2**20
    (the reach shapes sit at 131071); one fp32 product pos * inv_freq is off by 0.03 rad
    there, and by 0.002 rad at 131071, which failed a 64K-key check of the cache write."""
    head_dim, n = 64, 64
    positions = torch.cat((torch.arange(n // 2), 2**20 - torch.arange(n // 2))).to(device)
    cos = torch.empty(n, head_dim // 2, device=device)
    sin = torch.empty_like(cos)
    inv_freq = _NAIVE._inv_freq(positions.device, head_dim)
    _angles_kernel[(1,)](positions.to(torch.int32), inv_freq, cos, sin, N=n, HALF=head_dim // 2)
    exact_cos, exact_sin = rope_cos_sin(positions, head_dim)
    assert (cos.double() - exact_cos).abs().max().item() < 2e-6
    assert (sin.double() - exact_sin).abs().max().item() < 2e-6
    plain = positions.float()[:, None] * inv_freq[0][None, :]  # one fp32 product
    assert (plain.double().cos() - exact_cos).abs().max().item() > 1e-3


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda i: i[:3] + (i[3][:, :, :-CACHE_SLACK - 1].contiguous(),
                            i[4][:, :, :-CACHE_SLACK - 1].contiguous(), i[5]),
         "exceeds cache size"),
        (lambda i: i[:3] + (i[3].transpose(2, 3), i[4].transpose(2, 3), i[5]), "caches must"),
        (lambda i: (i[0][..., :48], *i[1:]), "must share"),
    ],
    ids=["cache-too-small", "cache-transposed", "q-wrong-shape"],
)
def test_bad_inputs_raise_a_clear_error(change, message, seed, device):
    inputs = TASK.make_inputs((1, 1, 4, 2, 64), torch.float16, seed, device)
    caches = (inputs[3].clone(), inputs[4].clone())
    with pytest.raises(ValueError, match=message):
        candidate_for(TASK).run(*change(inputs))
    for cache, before in zip(inputs[3:5], caches, strict=True):  # bitwise: NaN slots
        assert torch.equal(cache.view(torch.int16), before.view(torch.int16))


def test_odd_head_dim_is_refused(seed, device):
    inputs = TASK.make_inputs((1, 1, 4, 0, 48), torch.float16, seed, device)
    with pytest.raises(ValueError, match="power of two"):
        candidate_for(TASK).run(*inputs)


def test_flop_and_byte_model():
    # one head, 2 new tokens after 3 cached: query 0 sees 4 keys, query 1 sees 5
    assert TASK.flops((1, 1, 2, 3, 8), torch.float16) == 4 * 8 * (4 + 5)
    assert TASK.bytes_moved((1, 1, 2, 3, 8), torch.float16) == 8 * (6 * 2 + 2 * 3) * 2
    assert not TASK.compute_bound
    assert math.isclose(TASK.flops((1, 1, 4096, 0, 1), torch.float16) / (4 * 4096**2), 0.5,
                        rel_tol=1e-3)
