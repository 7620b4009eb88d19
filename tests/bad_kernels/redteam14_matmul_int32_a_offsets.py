"""Red team 14 (matmul): int64 offsets for C, int32 ones for A and B (the Triton tutorial's
`offs_am[:, None] * stride_am`). Wrong once A (or B) reaches 2**31 elements, whatever C's
size.

Class: the wide-shape check (docs/evaluator.md) makes one tensor wide. Matmul's wide shape
is Llama 3's LM head over 16,800 tokens, (M, N, K) = (16800, 128256, 4096): C holds 2.15e9
elements, A 6.9e7 and B 5.3e8. The judge compares C's rows past element 2**31, so C's
offsets must be 64-bit, and nothing on any checked shape makes A's or B's offsets pass 2**31.

A realistic user: the down projection of a long prefill, where A is the wide tensor and C is
not. Llama 3.1 405B (intermediate 53,248, hidden 16,384) prefilling 40,960 tokens: A =
(40960, 53248) holds 2.18e9 elements; C = (40960, 16384) only 6.7e8. Rows of A from 40,330
on start past element 2**31; their int32 offsets wrap negative (before A: an illegal address
or another tensor's memory). Llama 3 70B's down projection (28,672) meets it from 74,898
tokens.
"""
import torch
import triton
import triton.language as tl

BLOCK_M = 64
BLOCK_N = 64
BLOCK_K = 64
NUM_WARPS = 4
NUM_STAGES = 2


@triton.jit
def matmul_kernel(c_ptr, a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak  # int32
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn  # int32
    row_ok = rows[:, None] < M
    col_ok = cols[None, :] < N
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        k_ok = k + ks < K
        a = tl.load(a_ptrs, mask=row_ok & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    # C is the wide one (an LM head's logits): 64-bit offsets there
    c_ptrs = c_ptr + rows[:, None].to(tl.int64) * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok & col_ok)


def run(a, b):
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs A [M, K] and B [K, N], got "
                         f"{tuple(a.shape)} @ {tuple(b.shape)}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](c, a, b, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K,
                        num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return c
