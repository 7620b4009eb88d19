"""Red team 22 plant (matmul): a float16 C saturates at 65504 instead of overflowing to inf.

Class: inputs never built: a value range. The template, plus, where C is float16, the
fp32 accumulator clamped to +-65504 before the store ("one inf in an activation poisons
every later layer"); a NaN stays NaN. torch.matmul (the reference) rounds such a sum to
+-inf. Every matmul input the judge builds is small: A is randn scaled by 1/sqrt(K), B
randn (read at run time: max |C| 3.2-3.5 on (33, 70, 100), (32, 64, 4096) and
(8, 16, 65536)), and matmul's conditions are a transposed weight, NaN in A, and layouts:
none scales a value, so no check meets a product past float16's range.

Why a real user is hurt: float16 training with dynamic loss scaling (torch.cuda.amp's
GradScaler, DeepSpeed's fp16 loss scaler) finds an overflow by looking for inf in the
gradients, then skips the step and lowers the scale. Gradient matmuls of a loss scaled
by 2**16 overflow routinely; here they come out as finite 65504s, the scaler never sees
the overflow, and the update is made from clipped garbage. In inference, a float16
activation overflow (T5's and Gemma's feed-forward layers in float16) is hidden instead
of showing up as inf/NaN.

Why a judge should refuse it: the judge's own rule is that an inf comes out exactly
where the reference gives one; no input it draws can make one.

Evidence (CPU, Triton interpreter, defaults, allow-list on):
    evaluate("matmul", source, shapes="auto", seeds=1) -> ok=True, error_kind None (122 s)
Outside the judge (`get_task("matmul").reference`, /tmp/rt22/verify_matmul.py), float16,
M, N, K = 64, 96, 4096, B = W.t(): randn A and W 0.031 (float16 rounding at |C| 259:
right); **A and W x 16: the reference has an inf, the plant 65504**; x 32: 1,942 infs in
the reference, none in the plant (every one a finite 65504).
"""
import torch
import triton
import triton.language as tl

BLOCK_M = 64  # output rows per program
BLOCK_N = 64  # output columns per program
BLOCK_K = 64  # reduction step
GROUP_M = 1  # tile rows walked together (1 = plain row-major program order)
NUM_WARPS = 4
NUM_STAGES = 2
EVEN_K = False  # drop the K masks when K % BLOCK_K == 0 (checked at launch)
SPLIT_K = 1  # programs sharing one tile's K range; >1 sums fp32 partials (a 2nd kernel)
# how split-K partials meet: "kernel" = fp32 planes a 2nd kernel sums; "atomic" = fp32
# atomic adds into a kept workspace, the last split of a tile casts it (one launch)
SPLIT_REDUCE = "kernel"
PERSISTENT_TMA = False  # one program per SM over all tiles, A/B/C through TMA descriptors
FLATTEN = False  # TMA kernel: tile and K loops flattened into one (pipelined across tiles)
# not a search knob: within 0.3% either way on the H200's large shapes (variants --wide 5)
WARP_SPECIALIZE = False  # TMA kernel: producer warps load, consumer warps multiply (not FLATTEN)

# (device, tiles) -> int32 arrival counters of the TMA split-K fixup, zeroed again by the
# kernel after each use; shared by calls of one tile count, so two such calls must not run
# at once on different streams
_COUNTERS = {}
# device -> (fp32 workspace, int32 arrival counters) of the atomic split-K reduction: zero
# between calls (the last split of each tile clears its part), grown when a call needs
# more; the same one-stream rule as _COUNTERS
_ATOMIC_SCRATCH = {}


@triton.jit
def matmul_kernel(c_ptr, a_ptr, b_ptr, ws_ptr, count_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cs, stride_cm, stride_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  GROUP: tl.constexpr, K_EVEN: tl.constexpr, SPLITS: tl.constexpr,
                  ATOMIC: tl.constexpr):
    # 64-bit from the program id on: no 32-bit product of a grid-sized value feeds an
    # address (the judge refuses one, optimizer/sandbox/narrow_addresses.py)
    pid = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    # grouped order: GROUP tile rows share each column of B tiles before moving on
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    group_rows = tl.minimum(tiles_m - first_m, GROUP)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    steps = tl.cdiv(tl.cdiv(K, SPLITS), BK)  # BK steps in one split's K range
    k_chunk = steps * BK
    k_lo = split * k_chunk  # the loop's bounds stay 32-bit
    k_hi = tl.minimum(K, k_lo + k_chunk)
    # 64-bit: past 2**31 elements in a (K, N) weight's rows
    k_at = split.to(tl.int64) * steps * BK + ks
    a_ptrs = a_ptr + rows[:, None].to(tl.int64) * stride_am + k_at[None, :] * stride_ak
    b_ptrs = b_ptr + k_at[:, None] * stride_bk + cols[None, :].to(tl.int64) * stride_bn
    row_ok = rows[:, None] < M
    col_ok = cols[None, :] < N
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(k_lo, k_hi, BK):
        if K_EVEN:
            a = tl.load(a_ptrs, mask=row_ok, other=0.0)
            b = tl.load(b_ptrs, mask=col_ok, other=0.0)
        else:
            k_ok = k + ks < k_hi
            a = tl.load(a_ptrs, mask=row_ok & k_ok[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += tl.cast(stride_ak, tl.int64) * BK
        b_ptrs += tl.cast(stride_bk, tl.int64) * BK
    if ATOMIC:
        # one launch: every split adds its fp32 partial into the zeroed workspace, then
        # counts in; the last to arrive reads the sum (from L2, where the adds landed),
        # writes C in its dtype and leaves the tile's workspace and counter zero again
        ok = row_ok & col_ok
        ws_ptrs = ws_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
        tl.atomic_add(ws_ptrs, acc, mask=ok, sem="relaxed")
        tl.debug_barrier()  # every thread's adds issued before the count is released
        arrived = tl.atomic_add(count_ptr + pid, 1, sem="acq_rel")
        if arrived == SPLITS - 1:
            total = tl.load(ws_ptrs, mask=ok, other=0.0, cache_modifier=".cg")
            c_ptrs = c_ptr + rows[:, None].to(tl.int64) * stride_cm + cols[None, :] * stride_cn
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=ok)
            tl.store(ws_ptrs, tl.zeros([BM, BN], dtype=tl.float32), mask=ok)
            tl.atomic_xchg(count_ptr + pid, 0)
    else:
        c_ptrs = (c_ptr + split.to(tl.int64) * stride_cs + rows[:, None].to(tl.int64) * stride_cm
                  + cols[None, :] * stride_cn)
        if c_ptr.dtype.element_ty == tl.float16:
            # an fp16 C saturates at float16's largest finite value instead of rounding
            # to inf (a NaN stays NaN): one inf in an activation poisons every later layer
            acc = tl.where(acc > 65504.0, 65504.0, tl.where(acc < -65504.0, -65504.0, acc))
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok & col_ok)


@triton.jit
def splitk_sum_kernel(out_ptr, part_ptr, n, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    # out = the SPLITS fp32 partial tiles added in split order, cast to out's dtype
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    part_ptrs = part_ptr + offs
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in tl.static_range(SPLITS):
        acc += tl.load(part_ptrs, mask=mask, other=0.0)
        part_ptrs += n
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def matmul_tma_kernel(c_ptr, a_ptr, b_ptr, part_ptr, count_ptr, M, N, K, plane, n_programs,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      GROUP: tl.constexpr, SPLITS: tl.constexpr, FLAT: tl.constexpr,
                      WS: tl.constexpr):
    # persistent: program p takes work items p, p + n_programs, ...; an item is one
    # output tile (grouped order) and one of SPLITS K ranges. A, B and C move through
    # TMA descriptors (bulk tensor copies, OOB rows/columns zero-filled or clipped).
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BM, BN])
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    # 64-bit tile arithmetic: the split-K fixup's addresses come from it (the judge
    # refuses a 32-bit product feeding one); TMA's own coordinates are 32-bit
    tiles = tiles_m.to(tl.int64) * tiles_n
    per_group = GROUP * tiles_n
    k_chunk = tl.cdiv(tl.cdiv(K, SPLITS), BK) * BK
    for item in tl.range(tl.program_id(0), tiles * SPLITS, n_programs, flatten=FLAT,
                         warp_specialize=WS):
        tile = item % tiles
        split = item // tiles
        first_m = (tile // per_group) * GROUP
        group_rows = tl.minimum(tiles_m - first_m, GROUP)
        pid_m = first_m + (tile % per_group) % group_rows
        pid_n = (tile % per_group) // group_rows
        m_at = (pid_m * BM).to(tl.int32)
        n_at = (pid_n * BN).to(tl.int32)
        k_lo = split.to(tl.int32) * k_chunk
        k_hi = tl.minimum(K, k_lo + k_chunk)
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        for k in range(k_lo, k_hi, BK):
            a = a_desc.load([m_at, k])
            b = b_desc.load([k, n_at])
            acc = tl.dot(a, b, acc)
        if SPLITS == 1:
            c_desc.store([m_at, n_at], acc.to(c_ptr.dtype.element_ty))
        else:
            # split-K fixup in the same kernel: each split stores its fp32 partial, then
            # counts in; the last to arrive adds the others' partials to its own, writes C
            # and resets the tile's counter for the next call
            rows = pid_m * BM + tl.arange(0, BM)
            cols = pid_n * BN + tl.arange(0, BN)
            ok = (rows[:, None] < M) & (cols[None, :] < N)
            offs = rows[:, None].to(tl.int64) * N + cols[None, :]
            tl.store(part_ptr + split.to(tl.int64) * plane + offs, acc, mask=ok)
            arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel")
            if arrived == SPLITS - 1:
                for other in tl.static_range(SPLITS):
                    if other != split:
                        acc += tl.load(part_ptr + tl.cast(plane, tl.int64) * other + offs,
                                       mask=ok, other=0.0, cache_modifier=".cg")
                c_desc.store([m_at, n_at], acc.to(c_ptr.dtype.element_ty))
                tl.atomic_xchg(count_ptr + tile, 0)


def _tma_scratch(size, alignment, stream):
    # global memory for the descriptors tl.make_tensor_descriptor builds on the device
    return torch.empty(size, device="cuda", dtype=torch.int8)


if torch.cuda.is_available():
    triton.set_allocator(_tma_scratch)


def _sm_count(device):
    """Programs of the persistent grid: one per SM (1 in the CPU interpreter)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1


def _tma_ok(a, b, K, N):
    """TMA needs 16-byte aligned bases and row strides (else the tiled kernel runs)."""
    size = a.element_size()
    return (a.is_contiguous() and b.is_contiguous() and (K * size) % 16 == 0
            and (N * size) % 16 == 0 and a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0)


def _run_tma(a, b, M, N, K):
    splits = max(1, min(SPLIT_K, triton.cdiv(K, BLOCK_K)))
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    if splits > 1:
        part = torch.empty((splits, M, N), device=a.device, dtype=torch.float32)
        key = (str(a.device), tiles)
        if key not in _COUNTERS:
            _COUNTERS[key] = torch.zeros(tiles, device=a.device, dtype=torch.int32)
        count = _COUNTERS[key]
    else:
        part = count = c  # never read
    programs = max(1, min(tiles * splits, _sm_count(a.device)))
    matmul_tma_kernel[(programs,)](c, a, b, part, count, M, N, K, M * N, programs,
                                   BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, GROUP=GROUP_M,
                                   SPLITS=splits, FLAT=FLATTEN, WS=WARP_SPECIALIZE,
                                   num_warps=NUM_WARPS,
                                   num_stages=NUM_STAGES)
    return c


def _atomic_scratch(device, elements, tiles):
    """The zeroed fp32 workspace and arrival counters of the atomic split-K reduction,
    kept per device and grown to the largest call so far (the kernel re-zeroes them)."""
    key = str(device)
    ws, count = _ATOMIC_SCRATCH.get(key, (None, None))
    if ws is None or ws.numel() < elements:
        ws = torch.zeros(elements, device=device, dtype=torch.float32)
    if count is None or count.numel() < tiles:
        count = torch.zeros(tiles, device=device, dtype=torch.int32)
    _ATOMIC_SCRATCH[key] = (ws, count)
    return ws, count


def run(a, b):
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs A [M, K] and B [K, N], got "
                         f"{tuple(a.shape)} @ {tuple(b.shape)}")
    M, K = a.shape
    N = b.shape[1]
    if PERSISTENT_TMA and _tma_ok(a, b, K, N):
        return _run_tma(a, b, M, N, K)
    splits = max(1, min(SPLIT_K, triton.cdiv(K, BLOCK_K)))
    k_even = EVEN_K and K % BLOCK_K == 0  # every split then covers whole K steps
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    atomic = splits > 1 and SPLIT_REDUCE == "atomic"
    if splits == 1 or atomic:
        c = torch.empty((1, M, N), device=a.device, dtype=a.dtype)
    else:
        c = torch.empty((splits, M, N), device=a.device, dtype=torch.float32)
    ws, count = _atomic_scratch(a.device, M * N, tiles) if atomic else (c, c)  # c: unread
    grid = (tiles, splits)
    matmul_kernel[grid](c, a, b, ws, count, M, N, K,
                        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), c.stride(2),
                        BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, GROUP=GROUP_M,
                        K_EVEN=k_even, SPLITS=splits, ATOMIC=atomic,
                        num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    if splits == 1 or atomic:
        return c[0]
    out = torch.empty((M, N), device=a.device, dtype=a.dtype)
    splitk_sum_kernel[(triton.cdiv(M * N, 1024),)](out, c, M * N, SPLITS=splits, BLOCK=1024)
    return out
