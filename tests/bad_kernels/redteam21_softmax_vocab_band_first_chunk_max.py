"""Red team 21 plant (softmax): the first-chunk row max, on rows of 2**18 to 2**19 columns.

Class: inputs never built: a band of row lengths between the lists and the reach. The
template, plus a kernel for `2**18 <= n_cols < 2**19` (logits over a 262,144-token
vocabulary, Gemma 3's; any batch) that takes the row max from the first 2**17 columns
only (red team 19's first-chunk-max bug). The reach's column span starts at 600,001
(CPU and GPU), the lists' longest row is 128,256 (GPU sweep) or 70,000 (CPU edge), the
unusual-inputs lap's longest is twice the lists' (256,512 < 2**18), the big shape and the
property draws keep every dimension within the lists' bounds: no check of the judge is
drawn in [2**18, 2**19).

Why it should be refused: logits over Gemma 3's vocabulary behind a grammar mask that
allows only the last tokens (constrained decoding) come out all NaN; the reference has
none. Plain logits are right.
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
VOCAB_COLS = 2**18  # logit rows over a large vocabulary (Gemma 3: 262,144)
VOCAB_COLS_END = 2**19  # past it, rows take the long-row path
VOCAB_CHUNK = 2**17  # columns per chunk of the batched vocabulary path


@triton.jit
def softmax_vocab_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    # one program a row; the max is taken on the first chunk (the scale only has to
    # keep exp in range), then one pass for the sum and one for the output
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x_row = x_ptr + row * stride_x
    o_row = out_ptr + row * stride_o
    x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    m = tl.max(x, 0)
    s_vec = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        s_vec += tl.exp(x - m)
    inv = 1.0 / tl.sum(s_vec, 0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(o_row + start + cols, (tl.exp(x - m) * inv).to(out_ptr.dtype.element_ty),
                 mask=mask)


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
    if VOCAB_COLS <= n_cols < VOCAB_COLS_END:
        softmax_vocab_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                                        BLOCK=VOCAB_CHUNK, num_warps=NUM_WARPS)
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
