"""Red team 16 (matmul): a tiled matmul with an "NT" path for B = W.t() (a contiguous
(N, K) weight read through its transpose, as `F.linear` and every lm_head call pass it),
specialised on K (`K_DIM: tl.constexpr`) so the weight's row stride is a constant: B's
offsets there are `cols * K_DIM` in int32. A, C and the general B path are 64-bit. Wrong
once the weight holds 2**31 elements or more.

Class: addresses from a 32-bit product (docs/evaluator.md, `narrow_addresses`) where one
factor is a constant, on an input layout the laps never lay out. The rule allows a product
with a constant ("the wide shape runs it"); the wide shape (16800, 128256, 4096) passes B
as a contiguous (K, N) tensor, which takes the general path, and the far-rows lap lays B's
K rows far apart (dimension 0), never its columns, so a column-major B past 2**31 elements
is met by neither. The judge draws `W.t()` layouts only at the task's sizes, where
`cols * K_DIM` stays far under 2**31.

Wrong for a user: Nemotron-4 340B's logits, `h @ lm_head.weight.t()` with the weight
(256000, 18432) (4.72e9 elements): from vocabulary column 116,509 on, `cols * 18432`
passes 2**31 and wraps negative (116,509 x 18,432 = 2,147,493,888 -> -2,147,473,408), so
the logits of the last 139,491 vocabulary entries are read from outside the weight (a
fault or another tensor's values). Any `x @ W.t()` whose W holds 2**31+ elements does it
(a tied 256k-vocabulary embedding at hidden 8,389+).
"""
import torch
import triton
import triton.language as tl

BLOCK_M = 64
BLOCK_N = 64
BLOCK_K = 32
GROUP_M = 8
NUM_WARPS = 4


@triton.jit
def matmul_kernel(c_ptr, a_ptr, b_ptr, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, K_DIM: tl.constexpr, B_T: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  GROUP: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    group_rows = tl.minimum(tiles_m - first_m, GROUP)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    a_ptrs = a_ptr + rows[:, None].to(tl.int64) * stride_am + ks[None, :].to(tl.int64) * stride_ak
    if B_T:
        # B = W.t() of a packed (N, K_DIM) weight: column n is W's row n, K_DIM apart
        b_ptrs = b_ptr + cols[None, :] * K_DIM + ks[:, None]
        b_step = BK
    else:
        b_ptrs = (b_ptr + ks[:, None].to(tl.int64) * stride_bk
                  + cols[None, :].to(tl.int64) * stride_bn)
        b_step = BK * stride_bk
    row_ok = rows[:, None] < M
    col_ok = cols[None, :] < N
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K_DIM, BK):
        k_ok = k + ks < K_DIM
        a = tl.load(a_ptrs, mask=row_ok & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += b_step
    c_ptrs = (c_ptr + rows[:, None].to(tl.int64) * stride_cm
              + cols[None, :].to(tl.int64) * stride_cn)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok & col_ok)


def run(a, b):
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs A [M, K] and B [K, N], got "
                         f"{tuple(a.shape)} @ {tuple(b.shape)}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    b_t = K > 1 and b.stride(0) == 1 and b.stride(1) == K  # x @ W.t(), W packed (N, K)
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    matmul_kernel[grid](c, a, b, M, N, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), K_DIM=K, B_T=b_t,
                        BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, GROUP=GROUP_M,
                        num_warps=NUM_WARPS)
    return c
