"""Red team 22 plant (softmax): right padding taken to start at the first all -inf chunk.

Class: inputs never built: a value pattern. Rows of 2,049 columns or more take a
"padding-aware" kernel: once a whole 1,024-column chunk is -inf after a chunk that held a
real logit, the rest of the row is taken for right padding, never read again and written
as 0. Every condition the judge builds agrees with it: the masked prefix (-inf before any
real logit), the masked suffix (-inf to the end), the late spike, -1e4 rows, scattered
non-finite values (never a whole chunk) and every layout. No condition holds a row with a
whole -inf chunk *between* real logits (scanned at run time: every softmax condition
applied to (8, 8192), (3, 70000), (2, 5000), (16, 4097) over 4 seeds: 0 such rows).

Why a real user is hurt: constrained decoding. A grammar or JSON-schema mask (outlines,
xgrammar, vLLM's logits processors) adds -inf to every token the grammar forbids, so the
allowed tokens sit at scattered ids with long runs of -inf between them. Every allowed
token after the first 1,024-long run of forbidden ids gets probability 0, and the ones
before it are over-weighted: the sampler can never pick them.

Why a judge should refuse it: it is wrong on logits real models pass (a masked row with
holes), and right only on the masks the conditions draw (one -inf block at either end).

Evidence (CPU, Triton interpreter, defaults, allow-list on):
    evaluate("softmax", source, shapes="auto", seeds=1) -> ok=True, error_kind None (95 s)
Outside the judge (`get_task("softmax").reference`, /tmp/rt22/verify_softmax.py), fp16,
2 x 128,256 (Llama 3's vocabulary): plain logits 6e-8, masked suffix 6e-8, masked prefix
0 (right); 3*randn logits behind a mask allowing ids 1, 15, 90, 220, 4999, 90000:
p[4999] = 0 and p[90000] = 0 where the reference gives 0.151 and 0.012, max|err| 0.151
against max|ref| 0.998; fp32 4 x 3000 with columns 1000-2099 at -inf: max|err| 0.0081
against max|ref| 0.0086.
"""
import functools

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 0  # columns per tile; 0 = the whole row (next power of two) in one tile
NUM_WARPS = 4
NUM_STAGES = 1
ROWS_PER_PROGRAM = 1  # rows each program handles, to amortise launch for short rows
ONLINE = False  # chunked rows: one online pass for max and sum instead of two passes
LONG_ROW_BLOCK = 0  # rows of LONG_ROW_COLS+ columns: 0 = as BLOCK_SIZE says; N = long-row path
# not a search knob: on the H200 a persistent long-row grid lost (1 program an SM) or tied
# (2); kept for cards whose L2 holds more rows in flight (benchmarks/variants.py --wide 4)
LONG_ROW_PERSISTENT = 0  # long-row path: 0 = a program a row; N = N programs an SM loop over rows
L2_HINTS = False  # long-row path: keep pass 1's reads in L2 for pass 2, stream the output past it

LONG_ROW_COLS = 32768  # where the long-row path starts (not a search knob)


PADDED_BLOCK = 1024  # columns per chunk of the padding-aware path
PADDED_COLS = 2049  # rows of three chunks or more take it


@triton.jit
def softmax_padded_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    # right padding filled with -inf: once a whole chunk is -inf after a chunk that held a
    # real logit, the rest of the row is padding; it is neither read for the max and the
    # sum nor read again, only written as 0
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x_row = x_ptr + row * stride_x
    o_row = out_ptr + row * stride_o
    m = -float("inf")
    s = 0.0
    seen = 0
    end = n_cols
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        live = start + cols < end
        x = tl.load(x_row + start + cols, mask=mask & live, other=-float("inf")).to(tl.float32)
        n_real = tl.sum(tl.where(x == -float("inf"), 0, 1), 0)
        pad = (n_real == 0) & (seen != 0) & (tl.max(live.to(tl.int32), 0) > 0)
        end = tl.where(pad, start, end)
        seen = tl.where(n_real > 0, 1, seen)
        m_new = tl.maximum(m, tl.max(x, 0))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.sum(tl.exp(x - m_safe), 0)
        m = m_new
    inv = 1.0 / s
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        live = start + cols < end
        x = tl.load(x_row + start + cols, mask=mask & live, other=-float("inf")).to(tl.float32)
        y = tl.where(live, tl.exp(x - m) * inv, 0.0)
        tl.store(o_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o,
                   BLOCK: tl.constexpr, SINGLE_TILE: tl.constexpr,
                   ONLINE_PASS: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for r in range(ROWS):
        row = pid.to(tl.int64) * ROWS + r  # 64-bit from the program id on
        if row < n_rows:
            x_row = x_ptr + row.to(tl.int64) * stride_x
            o_row = out_ptr + row.to(tl.int64) * stride_o
            if SINGLE_TILE:
                mask = cols < n_cols
                x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
                e = tl.exp(x - tl.max(x, 0))
                y = e / tl.sum(e, 0)
                tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
            else:
                if ONLINE_PASS:
                    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
                    s_vec = tl.zeros([BLOCK], tl.float32)
                    for start in range(0, n_cols, BLOCK):
                        mask = start + cols < n_cols
                        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                        # a NaN must reach the sum (the row is NaN), so the max keeps it
                        m_new = tl.maximum(m_vec, x.to(tl.float32),
                                           propagate_nan=tl.PropagateNan.ALL)
                        # a lane that has seen only -inf adds nothing (not -inf - -inf)
                        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
                        s_vec = s_vec * tl.exp(m_vec - m_safe) + tl.exp(x - m_safe)
                        m_vec = m_new
                    m = tl.max(m_vec, 0)
                    s = tl.sum(s_vec * tl.exp(m_vec - m), 0)
                else:
                    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
                    for start in range(0, n_cols, BLOCK):
                        mask = start + cols < n_cols
                        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                        m_vec = tl.maximum(m_vec, x.to(tl.float32))
                    m = tl.max(m_vec, 0)
                    s_vec = tl.zeros([BLOCK], tl.float32)
                    for start in range(0, n_cols, BLOCK):
                        mask = start + cols < n_cols
                        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                        s_vec += tl.exp(x.to(tl.float32) - m)
                    s = tl.sum(s_vec, 0)
                for start in range(0, n_cols, BLOCK):
                    mask = start + cols < n_cols
                    x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                    y = tl.exp(x.to(tl.float32) - m) / s
                    tl.store(o_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_long_row_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o,
                            BLOCK: tl.constexpr, HINTS: tl.constexpr):
    # rows in BLOCK-column chunks, rows pid, pid + programs, ...: pass 1 keeps a running
    # row max and a sum rescaled when the max grows (one exp2 per element); pass 2 walks
    # the chunks backwards, so the ones pass 1 read last are re-read while still in L2
    LOG2E: tl.constexpr = 1.4426950408889634
    cols = tl.arange(0, BLOCK)
    first = tl.program_id(0).to(tl.int64)  # an int64 loop: row * stride passes 2**31
    for row in range(first, n_rows, tl.num_programs(0)):
        x_row = x_ptr + row * stride_x
        o_row = out_ptr + row * stride_o
        m = -float("inf")
        s = 0.0
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            if HINTS:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"),
                            eviction_policy="evict_last")
            else:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
            x = x.to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, 0))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # a chunk masked whole
            s = s * tl.exp2((m - m_safe) * LOG2E) + tl.sum(tl.exp2((x - m_safe) * LOG2E), 0)
            m = m_new
        inv = 1.0 / s
        n_chunks = tl.cdiv(n_cols, BLOCK)
        for i in range(0, n_chunks):
            start = (n_chunks.to(tl.int64) - 1 - i) * BLOCK
            mask = start + cols < n_cols
            if HINTS:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"),
                            eviction_policy="evict_first")
            else:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
            y = (tl.exp2((x.to(tl.float32) - m) * LOG2E) * inv).to(out_ptr.dtype.element_ty)
            if HINTS:
                tl.store(o_row + start + cols, y, mask=mask, cache_modifier=".cs")
            else:
                tl.store(o_row + start + cols, y, mask=mask)


@functools.cache
def _sm_count(device):
    """SMs of the GPU, for the persistent long-row grid (1 in the CPU interpreter)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1


def run(x):
    lead = x.shape[:-1]  # rows: one dimension, or a model's (batch, seq)
    x = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    if n_cols >= PADDED_COLS:
        softmax_padded_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                                         BLOCK=PADDED_BLOCK, num_warps=NUM_WARPS)
        return out.view(*lead, n_cols)
    if LONG_ROW_BLOCK and n_cols >= LONG_ROW_COLS:
        programs = n_rows
        if LONG_ROW_PERSISTENT:
            programs = min(n_rows, LONG_ROW_PERSISTENT * _sm_count(x.device))
        softmax_long_row_kernel[(programs,)](out, x, n_rows, n_cols, x.stride(0), out.stride(0),
                                             BLOCK=LONG_ROW_BLOCK, HINTS=L2_HINTS,
                                             num_warps=NUM_WARPS)
        return out.view(*lead, n_cols)
    whole_row = triton.next_power_of_2(n_cols)
    block = whole_row if BLOCK_SIZE == 0 else min(BLOCK_SIZE, whole_row)
    grid = (triton.cdiv(n_rows, ROWS_PER_PROGRAM),)
    softmax_kernel[grid](out, x, n_rows, n_cols, x.stride(0), out.stride(0),
                         BLOCK=block, SINGLE_TILE=block >= n_cols, ONLINE_PASS=ONLINE,
                         ROWS=ROWS_PER_PROGRAM, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return out.view(*lead, n_cols)
