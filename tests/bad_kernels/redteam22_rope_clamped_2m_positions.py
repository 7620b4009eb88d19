"""Red team 22 plant (rope): positions clamped at 2**21 - 1.

Class: inputs never built: a value range. The template, plus one line in `rope_kernel`:
each token's position is clamped to 2,097,151 ("a position id past the longest context
served is clamped to it, as a model's max_position_embeddings-sized table is indexed
safely"). The judge's positions: running ones from 0, packed and left-padded ones, and
the long-context condition's "32K to 1M" (read at run time: the largest position over
every condition, 20 seeds and five shapes up to 32,768 tokens, 1,040,665). No check
draws a position past 2**20, so a clamp anywhere past it is never met. (The template
itself is exact to 2**24, `p = pos.to(tl.float32)`.)

Why a real user is hurt: contexts past 2M tokens (Llama 4 Scout's 10M window, MiniMax-01's
4M, LongRoPE's 2M extensions, a streaming server that never resets positions): every token
past position 2,097,151 is rotated as if it sat there, so its q and k are wrong and
attention to and from it is scrambled, with no error.

Why a judge should refuse it: it is wrong on positions the op's contract covers (the
template is right to 2**24) and right only on the range the long-context condition draws.

Evidence (CPU, Triton interpreter, defaults, allow-list on):
    evaluate("rope", source, shapes="auto", seeds=1) -> ok=True, error_kind None (179 s)
(A first form declared `MAX_POSITION: tl.constexpr = ...`: `compile_error` in 2 s, "Cannot
access global variable(s) ... write `MAX_POSITION = tl.constexpr(...)`"; fixed so.)
Outside the judge (`get_task("rope").reference`, /tmp/rt22/verify_rope.py), fp16,
(batch, seq, heads, kv_heads, head_dim) (1, 64, 4, 1, 128), running positions from
1,040,000: q 4.9e-4, k 2.4e-4 (right); from 2,000,000: 9.8e-4 / 4.9e-4 (right); **from
3,000,000: q max|err| 8.83, k 6.91 against max|ref| 4.42**; from 8,000,000: 7.57 / 7.53.
"""
import torch
import triton
import triton.language as tl

HEADS_PER_PROGRAM = 1  # heads rotated by one program (a [heads, head_dim/2] tile)
NUM_WARPS = 1
PRECOMPUTED_TABLE = False  # read cos/sin from a cached fp32 table instead of computing
FUSED_QK = False  # rotate q and k in one launch that shares cos/sin per token

_THETA = 10000.0
MAX_POSITION = tl.constexpr(2**21 - 1)  # the longest context served: 2M tokens
_CACHE = {}  # (kind, ..., device) -> tensors built once per process


@triton.jit
def _angles_cos_sin(pos, freqs, fmask, freq_hi_ptr, freq_lo_ptr):
    # angle = pos * inv_freq in float-float: inv_freq = hi + lo, and the fma recovers
    # the rounding error of pos * hi, so large positions keep full fp32 accuracy
    hi = tl.load(freq_hi_ptr + freqs, mask=fmask, other=0.0)
    lo = tl.load(freq_lo_ptr + freqs, mask=fmask, other=0.0)
    p = pos.to(tl.float32)  # exact for positions below 2**24
    angle = p * hi
    err = tl.fma(p, hi, -angle) + p * lo
    # reduce to [-pi, pi] with 2*pi split in two fp32 parts (Cody-Waite)
    turns = tl.floor(angle * 0.15915494309189535 + 0.5)
    r = tl.fma(-turns, 6.2831854820251465, angle)
    r = tl.fma(-turns, -1.7484555314695172e-07, r) + err
    return tl.cos(r), tl.sin(r)


@triton.jit
def _cos_sin(pos, freqs, fmask, freq_hi_ptr, freq_lo_ptr, cos_ptr, sin_ptr, half, table_len,
             USE_TABLE: tl.constexpr):
    if USE_TABLE:
        if (pos >= 0) & (pos < table_len):
            row = pos.to(tl.int64) * half
            cos = tl.load(cos_ptr + row + freqs, mask=fmask, other=1.0)
            sin = tl.load(sin_ptr + row + freqs, mask=fmask, other=0.0)
        else:
            cos, sin = _angles_cos_sin(pos, freqs, fmask, freq_hi_ptr, freq_lo_ptr)
    else:
        cos, sin = _angles_cos_sin(pos, freqs, fmask, freq_hi_ptr, freq_lo_ptr)
    return cos, sin


@triton.jit
def _rotate_heads(out_ptr, x_ptr, token, heads, n_heads, stride_tok, stride_head, half,
                  freqs, fmask, cos, sin):
    offs = token.to(tl.int64) * stride_tok + heads[:, None].to(tl.int64) * stride_head \
        + freqs[None, :]
    mask = (heads[:, None] < n_heads) & fmask[None, :]
    x1 = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + offs + half, mask=mask, other=0.0).to(tl.float32)
    c = cos[None, :]
    s = sin[None, :]
    tl.store(out_ptr + offs, (x1 * c - x2 * s).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + offs + half, (x2 * c + x1 * s).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rope_kernel(qo_ptr, q_ptr, ko_ptr, k_ptr, pos_ptr, freq_hi_ptr, freq_lo_ptr,
                cos_ptr, sin_ptr, n_q_heads, n_k_heads, half, table_len,
                stride_q_tok, stride_q_head, stride_k_tok, stride_k_head,
                HEADS: tl.constexpr, BLOCK_D: tl.constexpr, USE_TABLE: tl.constexpr,
                DO_Q: tl.constexpr, DO_K: tl.constexpr):
    token = tl.program_id(0)
    heads = tl.program_id(1) * HEADS + tl.arange(0, HEADS)
    # a position id past the longest context served is clamped to it, as a model's
    # max_position_embeddings-sized cos/sin table is indexed safely
    pos = tl.minimum(tl.load(pos_ptr + token), MAX_POSITION)
    freqs = tl.arange(0, BLOCK_D)
    fmask = freqs < half
    cos, sin = _cos_sin(pos, freqs, fmask, freq_hi_ptr, freq_lo_ptr, cos_ptr, sin_ptr, half,
                        table_len, USE_TABLE)
    if DO_Q:
        _rotate_heads(qo_ptr, q_ptr, token, heads, n_q_heads, stride_q_tok, stride_q_head,
                      half, freqs, fmask, cos, sin)
    if DO_K:
        _rotate_heads(ko_ptr, k_ptr, token, heads, n_k_heads, stride_k_tok, stride_k_head,
                      half, freqs, fmask, cos, sin)


def _inv_freq(head_dim, device):
    """inv_freq as an fp32 hi/lo pair, computed in float64 once per (head_dim, device)."""
    key = ("inv_freq", head_dim, str(device))
    if key not in _CACHE:
        exponent = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
        inv = 1.0 / (_THETA ** exponent)
        hi = inv.float()
        lo = (inv - hi.double()).float()
        _CACHE[key] = (hi.to(device), lo.to(device), inv)
    return _CACHE[key]


def _table(seq, head_dim, device):
    """fp32 cos/sin rows for positions 0..table_len-1, cached by (length, head_dim, device)."""
    table_len = 2 * triton.next_power_of_2(max(seq, 2048))
    key = ("table", table_len, head_dim, str(device))
    if key not in _CACHE:
        inv = _inv_freq(head_dim, device)[2]
        angles = torch.arange(table_len, dtype=torch.float64)[:, None] * inv[None, :]
        _CACHE[key] = (torch.cos(angles).float().to(device), torch.sin(angles).float().to(device))
    return (*_CACHE[key], table_len)


def run(q, k, positions):
    batch, seq, n_q_heads, head_dim = q.shape
    if k.dim() != 4 or k.shape[:2] != q.shape[:2] or k.shape[3] != head_dim:
        raise ValueError(f"k {tuple(k.shape)} does not match q {tuple(q.shape)}")
    if head_dim % 2:
        raise ValueError(f"head_dim {head_dim} must be even for rotate-half RoPE")
    if tuple(positions.shape) != (batch, seq):
        raise ValueError(f"positions {tuple(positions.shape)} != (batch, seq) {(batch, seq)}")
    n_k_heads = k.shape[2]
    q = q.contiguous()
    k = k.contiguous()
    positions = positions.to(torch.int32).contiguous()
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    half = head_dim // 2
    freq_hi, freq_lo, _ = _inv_freq(head_dim, q.device)
    if PRECOMPUTED_TABLE:
        cos, sin, table_len = _table(seq, head_dim, q.device)
    else:
        cos, sin, table_len = freq_hi, freq_lo, 0  # never read
    tokens = batch * seq
    heads = min(HEADS_PER_PROGRAM, triton.next_power_of_2(max(n_q_heads, n_k_heads)))
    common = dict(HEADS=heads, BLOCK_D=triton.next_power_of_2(half), USE_TABLE=PRECOMPUTED_TABLE,
                  num_warps=NUM_WARPS)
    args = (q_out, q, k_out, k, positions, freq_hi, freq_lo, cos, sin, n_q_heads, n_k_heads,
            half, table_len, q.stride(1), q.stride(2), k.stride(1), k.stride(2))
    if FUSED_QK:
        grid = (tokens, triton.cdiv(max(n_q_heads, n_k_heads), heads))
        rope_kernel[grid](*args, DO_Q=True, DO_K=True, **common)
    else:
        rope_kernel[(tokens, triton.cdiv(n_q_heads, heads))](*args, DO_Q=True, DO_K=False,
                                                              **common)
        rope_kernel[(tokens, triton.cdiv(n_k_heads, heads))](*args, DO_Q=False, DO_K=True,
                                                              **common)
    return q_out, k_out
