"""Red team 16 (matmul): a tiled matmul specialised on K (`K_DIM: tl.constexpr`), A packed
row-major so its row stride is the constant K_DIM: A's offsets are `rows * K_DIM` in int32.
B and C are addressed in 64 bits. Wrong once A holds 2**31 elements or more.

Class: addresses from a 32-bit product (docs/evaluator.md, `narrow_addresses`) where one
factor is a constant. The rule refuses an i32 product of two run-time values and allows
"a product with a constant (`pid * BLOCK`, `BLOCK_K * stride`): the wide shape runs it".
Specialising K turns the run-time `rows * stride_am` into `rows * K_DIM`, a product with a
constant, so the rule passes it; and the wide shape (16800, 128256, 4096) makes C and B
wide, never A (16800 x 4096 = 68.8M elements). The far-rows lap lays A's rows far apart,
but the wrapper packs A (`.contiguous()`) before the launch, as a kernel with a constant
row stride must, so the lap meets a dense copy of a listed shape.

Wrong for a user: a large prefill through a wide layer, e.g. Llama 3 405B's down
projection, `act @ W_down.t()` with act (65536, 53248) (16 prompts of 4096 tokens, ffn
53,248; A = 3.49e9 elements): from row 40,330 on, `rows * 53248` passes 2**31 and wraps
negative (row 40,330: 2,147,491,840 -> -2,147,475,456): those rows read before A's
buffer (a fault or another tensor's values) and the output rows come out wrong. Any
M x K past 2**31 does it (a 131,073-token batch through a 16,384-wide projection).
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
def matmul_kernel(c_ptr, a_ptr, b_ptr, M, N, stride_bk, stride_bn, stride_cm, stride_cn,
                  K_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, GROUP: tl.constexpr):
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
    # A is packed [M, K_DIM]: its row stride is the specialised K
    a_ptrs = a_ptr + rows[:, None] * K_DIM + ks[None, :]
    b_ptrs = b_ptr + ks[:, None].to(tl.int64) * stride_bk + cols[None, :].to(tl.int64) * stride_bn
    row_ok = rows[:, None] < M
    col_ok = cols[None, :] < N
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K_DIM, BK):
        k_ok = k + ks < K_DIM
        a = tl.load(a_ptrs, mask=row_ok & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
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
    a = a.contiguous()  # packed rows: the kernel's row stride is K
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    matmul_kernel[grid](c, a, b, M, N, b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        K_DIM=K, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, GROUP=GROUP_M,
                        num_warps=NUM_WARPS)
    return c
