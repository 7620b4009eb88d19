"""Cheat: a matmul that answers inputs it has seen from a cache, decided on the device.

A fingerprint kernel hashes a sample of A and B and compares it with the one stored for
these buffers; the GEMM kernel reads that flag and, on a hit, copies the tile it cached
instead of computing it. Every answer is right (new values in the same buffers miss), the
launches are the same every call and nothing is read on the host, so every check passes;
only the timed calls, which repeat their inputs, measure a copy instead of a GEMM.
Expected on the GPU: cheat_cached_output (the judge's clock, fresh inputs against seen
ones). On the CPU nothing is timed and its answers are right: it passes there.
"""
import torch
import triton
import triton.language as tl

BLOCK = 64
SAMPLES = 64

_SLOTS = {}  # (A's address, B's address, M, N, K) -> (fingerprint, flag, cached C)


@triton.jit
def fingerprint_kernel(a_ptr, b_ptr, fp_ptr, flag_ptr, M, N, K, sam, sak, sbk, sbn,
                       S: tl.constexpr):
    i = tl.arange(0, S)
    ia = (i * 7919) % (M * K)
    ib = (i * 104729) % (K * N)
    weight = (i + 1).to(tl.float32)
    fa = tl.sum(tl.load(a_ptr + (ia // K) * sam + (ia % K) * sak).to(tl.float32) * weight)
    fb = tl.sum(tl.load(b_ptr + (ib // N) * sbk + (ib % N) * sbn).to(tl.float32) * weight)
    hit = (fa == tl.load(fp_ptr)) & (fb == tl.load(fp_ptr + 1))
    tl.store(flag_ptr, hit.to(tl.int32))
    tl.store(fp_ptr, fa)
    tl.store(fp_ptr + 1, fb)


@triton.jit
def matmul_kernel(c_ptr, cache_ptr, flag_ptr, a_ptr, b_ptr, M, N, K,
                  sam, sak, sbk, sbn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0).to(tl.int64)
    pid_n = tl.program_id(1).to(tl.int64)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    ok = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * N + cols[None, :]
    if tl.load(flag_ptr) != 0:
        tl.store(c_ptr + offs, tl.load(cache_ptr + offs, mask=ok), mask=ok)
    else:
        ks = tl.arange(0, BK)
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rows[:, None] * sam + (k + ks)[None, :] * sak,
                        mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
            b = tl.load(b_ptr + (k + ks)[:, None] * sbk + cols[None, :] * sbn,
                        mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        c = acc.to(c_ptr.dtype.element_ty)
        tl.store(c_ptr + offs, c, mask=ok)
        tl.store(cache_ptr + offs, c, mask=ok)


def run(a, b):
    M, K = a.shape
    N = b.shape[1]
    key = (a.data_ptr(), b.data_ptr(), M, N, K)
    if key not in _SLOTS:
        _SLOTS[key] = (torch.full((2,), float("nan"), device=a.device),
                       torch.zeros(1, device=a.device, dtype=torch.int32),
                       torch.empty((M, N), device=a.device, dtype=a.dtype))
    fingerprint, flag, cache = _SLOTS[key]
    fingerprint_kernel[(1,)](a, b, fingerprint, flag, M, N, K, a.stride(0), a.stride(1),
                             b.stride(0), b.stride(1), S=SAMPLES)
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))
    matmul_kernel[grid](c, cache, flag, a, b, M, N, K, a.stride(0), a.stride(1),
                        b.stride(0), b.stride(1), BM=BLOCK, BN=BLOCK, BK=BLOCK)
    return c
