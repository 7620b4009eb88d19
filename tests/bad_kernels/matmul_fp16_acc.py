"""Faulty: a matmul whose running sum is rounded to fp16 after every K block (half the
accumulator registers). Within tolerance for K <= 128, where there are four roundings;
over it at K = 4096, like users' GEMMs.
Expected: wrong_result on matmul's long-K CPU shape."""
import torch
import triton
import triton.language as tl


@triton.jit
def mm(c, a, b, M, N, K, sam, sak, sbk, sbn, scm, scn,
       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0).to(tl.int64)
    pn = tl.program_id(1).to(tl.int64)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float16)
    for k0 in range(0, K, BK):
        ka = k0 + rk
        av = tl.load(a + rm[:, None] * sam + ka[None, :] * sak,
                     mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
        bv = tl.load(b + ka[:, None] * sbk + rn[None, :] * sbn,
                     mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = (acc.to(tl.float32) + tl.dot(av, bv)).to(tl.float16)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def run(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    mm[grid](c, a, b, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
             c.stride(0), c.stride(1), BM=32, BN=32, BK=32)
    return c
