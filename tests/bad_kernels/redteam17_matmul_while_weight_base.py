"""Red team 17 (matmul): A, C and every in-tile offset 64-bit; for a contiguous B the
K-block's base in B is an int32 stepped by adding `BK * N` round a `while` loop.

Class: addresses from a 32-bit product (docs/evaluator.md, `narrow_addresses`) carried
round a loop that is not an `scf.for`. The rule reads a 32-bit `scf.for` iteration
argument as possibly wrapped (round 16's carried offsets); the same offset carried by a
Python `while` lowers to `scf.while`, whose 32-bit carried values it does not read. The
step `BK * N` is computed by the wrapper (an i32 argument). The far-rows lap lays B out
non-contiguous (the 64-bit path) and the wide shape's B is 4096 x 128256 = 525M elements.

Wrong for a user: a weight kept (in, out) as JAX/Megatron keep it, called `x @ W`, with
K x N past 2**31: Nemotron-4 340B's output projection (18432, 256000): the K block's base
passes 2**31 after 8,389 rows of W and wraps negative: every logit of every token is
summed from the wrong (or faulting) rows of W.
"""
import torch
import triton
import triton.language as tl

BLOCK_M = 64
BLOCK_N = 64
BLOCK_K = 32
NUM_WARPS = 4


@triton.jit
def matmul_kernel(c_ptr, a_ptr, b_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                  b_step, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  B_PACKED: tl.constexpr):
    rm = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rn = tl.program_id(1).to(tl.int64) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    m_ok = rm < M
    n_ok = rn < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if B_PACKED:
        # a contiguous B: the K block's base stepped by BK rows, the tile 64-bit from it
        b_tile = ks.to(tl.int64)[:, None] * N + rn[None, :]
        b_off = 0
        k = 0
        while k < K:
            kk = k + ks
            k_ok = kk < K
            a = tl.load(a_ptr + rm[:, None] * s_am + kk.to(tl.int64)[None, :] * s_ak,
                        mask=m_ok[:, None] & k_ok[None, :], other=0.0)
            b = tl.load(b_ptr + b_off + b_tile, mask=k_ok[:, None] & n_ok[None, :],
                        other=0.0)
            acc = tl.dot(a, b, acc)
            b_off += b_step
            k += BK
    else:
        for k in range(0, K, BK):
            kk = (k + ks).to(tl.int64)
            k_ok = kk < K
            a = tl.load(a_ptr + rm[:, None] * s_am + kk[None, :] * s_ak,
                        mask=m_ok[:, None] & k_ok[None, :], other=0.0)
            b = tl.load(b_ptr + kk[:, None] * s_bk + rn[None, :] * s_bn,
                        mask=k_ok[:, None] & n_ok[None, :], other=0.0)
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * s_cm + rn[None, :] * s_cn,
             acc.to(c_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def run(a, b):
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs A [M, K] and B [K, N], got "
                         f"{tuple(a.shape)} @ {tuple(b.shape)}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    packed = b.stride(1) == 1 and b.stride(0) == N
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](c, a, b, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_K * N, BM=BLOCK_M, BN=BLOCK_N,
                        BK=BLOCK_K, B_PACKED=packed, num_warps=NUM_WARPS)
    return c
