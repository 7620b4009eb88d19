"""Red team 2, inputs never drawn (transposed operands): a matmul that passes each
operand's row stride but takes its column stride for 1, and never calls .contiguous().
Every input the checks make is row-major, and strided rows (each row the first columns of
a wider buffer) keep the column stride 1, so it is right on all of them. B handed in as a
transposed view, the way a user writes x @ linear.weight.t(), has strides (1, K): the
kernel then reads the wrong elements and returns a wrong product without any error.
Expected: wrong_result (a transposed operand; no check passes one)."""
import torch
import triton
import triton.language as tl

BLOCK_N = 128
BLOCK_K = 128


@triton.jit
def matmul_kernel(c_ptr, a_ptr, b_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0).to(tl.int64)
    pid_n = tl.program_id(1).to(tl.int64)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ka = k0 + rk
        a = tl.load(a_ptr + rm[:, None].to(tl.int64) * stride_am + ka[None, :],
                    mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ka[:, None].to(tl.int64) * stride_bk + rn[None, :],
                    mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None].to(tl.int64) * stride_cm + rn[None, :], c,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def run(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    block_m = max(16, min(64, triton.next_power_of_2(M)))
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                        BM=block_m, BN=BLOCK_N, BK=BLOCK_K)
    return c
