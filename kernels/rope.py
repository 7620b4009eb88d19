"""Rotary position embedding (RoPE) applied to q and k, rotate-half (NeoX / HF Llama) form.

Layout: q (batch, seq, n_heads, head_dim), k (batch, seq, n_kv_heads, head_dim), positions
int32 (batch, seq) — any non-negative positions, e.g. a per-sequence start offset plus
arange(seq) as in batched decoding. theta = 10000. With half = head_dim / 2 and
inv_freq[i] = theta^(-2i/head_dim), each head vector x = [x1, x2] becomes
[x1*cos - x2*sin, x2*cos + x1*sin] with angle = position * inv_freq. Returns new
(q_out, k_out) tensors in the input dtype. The reference computes in float64.

Search space: sin/cos computed in the kernel (from an fp32 hi/lo split of inv_freq, with
an fma-based argument reduction, so fp32 results stay within 1e-5 at position 4096+) vs
a precomputed cos/sin table built once in run() and cached by (table length, head_dim,
device) (the article's example; positions past the table fall back to the in-kernel
path, so no position is ever read out of bounds); q and k in one fused launch sharing
cos/sin vs two launches; heads per program; warps.
"""

from __future__ import annotations

import torch

from kernels.base import (
    DTYPES,
    ELEMENTWISE_TOLERANCES,
    Config,
    Knob,
    Launch,
    Regimes,
    Shape,
    Task,
    Variant,
    cdiv,
    next_pow2,
    register,
    vector_width,
)

THETA = 10000.0

TEMPLATE = '''\
import torch
import triton
import triton.language as tl

HEADS_PER_PROGRAM = 1  # heads rotated by one program (a [heads, head_dim/2] tile)
NUM_WARPS = 1
PRECOMPUTED_TABLE = False  # read cos/sin from a cached fp32 table instead of computing
FUSED_QK = False  # rotate q and k in one launch that shares cos/sin per token

_THETA = 10000.0
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
    offs = token.to(tl.int64) * stride_tok + heads[:, None] * stride_head + freqs[None, :]
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
    pos = tl.load(pos_ptr + token)
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
'''


def reference(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    head_dim = q.shape[-1]
    half = head_dim // 2
    inv = 1.0 / (THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = positions.double()[..., None] * inv.to(q.device)  # (batch, seq, half)
    cos = torch.cos(angles)[:, :, None, :]
    sin = torch.sin(angles)[:, :, None, :]

    def rotate(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.double()[..., :half], x.double()[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)

    return rotate(q), rotate(k)


def make_inputs(
    shape: Shape, dtype: torch.dtype, seed: int, device: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    batch, seq, n_heads, n_kv_heads, head_dim = shape
    gen = torch.Generator(device=device).manual_seed(seed)
    f32 = {"generator": gen, "dtype": torch.float32, "device": device}
    q = torch.randn((batch, seq, n_heads, head_dim), **f32)
    k = torch.randn((batch, seq, n_kv_heads, head_dim), **f32)
    # each sequence starts at its own offset, as in batched decoding with a KV cache
    start = torch.randint(0, 64, (batch, 1), generator=gen, dtype=torch.int32, device=device)
    positions = start + torch.arange(seq, dtype=torch.int32, device=device)[None, :]
    return (q.to(device=device, dtype=dtype), k.to(device=device, dtype=dtype),
            positions.to(device))


def bytes_moved(shape: Shape, dtype: torch.dtype) -> int:
    batch, seq, n_heads, n_kv_heads, head_dim = shape
    size = torch.finfo(dtype).bits // 8
    elements = batch * seq * (n_heads + n_kv_heads) * head_dim
    return 2 * elements * size + 4 * batch * seq  # read and write q and k, read positions


def flops(shape: Shape, dtype: torch.dtype) -> int:
    batch, seq, n_heads, n_kv_heads, head_dim = shape
    return 3 * batch * seq * (n_heads + n_kv_heads) * head_dim  # 2 mul + 1 add per output


def constraint(cfg: Config) -> str | None:
    # a [heads, 64] tile (head_dim 128) has 64 * heads elements: more threads than
    # elements only replicates work
    if cfg["NUM_WARPS"] * 32 > 64 * cfg["HEADS_PER_PROGRAM"]:
        return "more threads than elements of a [heads, head_dim/2] tile at head_dim 128"
    return None
def launch(cfg: Config, shape: Shape, dtype: str) -> Launch:
    """run()'s grids: per token, one program per HEADS_PER_PROGRAM heads, in one fused q+k
    launch or two (the programs of both counted); a [heads, head_dim / 2] tile of each
    half in fp32 plus a cos and a sin row."""
    batch, seq, n_q, n_k, head_dim = shape
    size = DTYPES[dtype].itemsize
    tokens = batch * seq
    heads = min(int(cfg["HEADS_PER_PROGRAM"]), next_pow2(max(n_q, n_k)))
    block_d = next_pow2(head_dim // 2)
    if cfg["FUSED_QK"]:
        programs = tokens * cdiv(max(n_q, n_k), heads)
    else:
        programs = tokens * (cdiv(n_q, heads) + cdiv(n_k, heads))
    threads = int(cfg["NUM_WARPS"]) * 32
    return Launch(programs=programs, threads_per_program=threads,
                  elements_per_program=tokens * (n_q + n_k) * head_dim / programs,
                  bytes_per_element=size, tile_bytes=(2 * heads + 2) * block_d * 4,
                  vector_width=vector_width(heads * block_d, threads, size))




TASK = register(
    Task(
        name="rope",
        op_type="rope",
        description=(
            "Rotary position embedding, rotate-half (NeoX / HF Llama) convention, theta=1e4, "
            "applied to q and k with per-token int32 positions; fp32 math."
        ),
        signature="run(q: Tensor[batch, seq, heads, head_dim], k: Tensor[batch, seq, "
        "kv_heads, head_dim], positions: int32 Tensor[batch, seq]) -> (q_out, k_out)",
        reference=reference,
        make_inputs=make_inputs,
        shape_names=("batch", "seq", "heads", "kv_heads", "head_dim"),
        # Llama-3-8B (32 q / 8 kv heads), Llama-2-7B (32/32), Llama-2-13B (40/40),
        # Llama-3-70B (64/8), Qwen2-7B (28/4); head_dim 128; batch 1..32, seq 128..4096
        sweep_shapes=(
            (1, 128, 32, 8, 128), (1, 4096, 32, 8, 128), (8, 1024, 32, 8, 128),
            (32, 512, 32, 32, 128), (4, 2048, 64, 8, 128), (16, 4096, 28, 4, 128),
            (2, 2048, 40, 40, 128), (32, 4096, 32, 8, 128),
        ),
        # one token with one 2-wide head; odd head counts; non-power-of-two head_dim;
        # a single decode token with many heads; head_dim 256
        edge_shapes=(
            (1, 1, 1, 1, 2), (1, 7, 3, 1, 64), (2, 5, 7, 3, 80), (1, 1, 32, 8, 128),
            (2, 9, 5, 5, 256),
        ),
        cpu_shapes=((1, 16, 8, 2, 128), (2, 8, 4, 4, 64)),
        dtypes=("float16", "bfloat16", "float32"),
        tolerances=ELEMENTWISE_TOLERANCES,
        bytes_moved=bytes_moved,
        flops=flops,
        template=TEMPLATE,
        knobs=(
            Knob("HEADS_PER_PROGRAM", (1, 4, 16), "launch_shape",
                 "heads rotated by one program: fewer, fatter programs share one cos/sin"),
            Knob("NUM_WARPS", (1, 2, 4, 8), "warps_stages"),
        ),
        variants=(
            Variant("PRECOMPUTED_TABLE", (False, True), "precompute",
                    "cos/sin from an fp32 table built once in run() and cached by (length, "
                    "head_dim, device), instead of sin/cos/fma per element in the kernel"),
            Variant("FUSED_QK", (False, True), "fusion",
                    "rotate q and k in one launch; each program computes cos/sin once for "
                    "both (saves a launch and half the cos/sin work)"),
        ),
        related_ops=("attention", "rmsnorm"),
        constraint=constraint,
        launch=launch,
        regimes=Regimes(dims=("batch", "seq"), inputs=((0, 0), (0, 1)), classes=(
            ("decode", 16), ("short", 2048), ("long", None)),
            reason="tokens per call: decode steps and short prompts are launch-bound "
                   "(heads per program matter), long prompts bandwidth-bound"),
    )
)
