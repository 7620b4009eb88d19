"""Fused decoder attention: RoPE + KV-cache write + causal attention (the article's case study).

The op, for the NEW tokens of one decoder step (prefill: cache_len = 0; decode or chunked
prefill: a few new tokens after cache_len cached ones), with n_kv_heads = n_heads (no GQA):
rotate q and k with RoPE (rotate-half, theta 10000) at positions cache_len + i, write the
rotated k and v into the KV cache at [cache_len, cache_len + seq_new), then attend causally
over cache[0 : cache_len + seq_new] with scale 1/sqrt(head_dim).

Convention: ``run(q, k, v, k_cache, v_cache, cache_len)`` returns the attention output AND
writes the caches in place; the reference does the same on its own copies. The task lists
the caches in ``mutated_inputs`` (indices 3 and 4): a checker runs reference and candidate
on separate clones of the inputs and compares those inputs afterwards, like outputs. The
caches hold a few slots past the new tokens, filled with random data, so a write out of
bounds is caught.

Search space: query / key tiles, warps, stages; and the article's three discoveries as
switches: RoPE sin/cos from a precomputed table (ROPE_TABLE), the key loop stopped at the
diagonal with the mask only on diagonal blocks (CAUSAL_SKIP), no bounds masks when the
sizes divide the tiles (EVEN_SEQ); plus the K/V cache write fused into the attention
kernel instead of a separate small kernel (FUSE_KV_WRITE); and a flash-style prefill
kernel (FLASH) that keeps RoPE and the cache write but reads the keys rotated once.
"""

from __future__ import annotations

import math

import torch

from kernelkb.kernels.base import Knob, Shape, Task, Tolerance, Variant, read_template
from kernelkb.kernels.conditions import InputCondition
from kernelkb.kernels.config import Config
from kernelkb.kernels.discovery import register
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, attention_unfused
from kernelkb.kernels.reach import Reach
from kernelkb.kernels.regimes import Regimes
from kernelkb.kernels.shared.launch import Launch, cdiv, vector_width

ROPE_THETA = 10000.0
CACHE_SLACK = 5  # cache slots past cache_len + seq_new that must stay untouched

TEMPLATE = read_template(__file__)  # kernels/templates/attention.py: the naive kernel


def rope_cos_sin(positions: torch.Tensor, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [len(positions), head_dim // 2] in fp64: the reference's exact angles."""
    half = head_dim // 2
    inv_freq = ROPE_THETA ** (
        -torch.arange(half, dtype=torch.float64, device=positions.device) / half
    )
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE of x [..., seq, head_dim] (fp32 in, fp32 out)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = cos.float(), sin.float()
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_len: int,
) -> torch.Tensor:
    """The op in plain fp32 PyTorch. Writes the caches in place, like the kernel."""
    seq, head_dim = q.shape[2], q.shape[3]
    total = cache_len + seq
    positions = torch.arange(cache_len, total, device=q.device)
    cos, sin = rope_cos_sin(positions, head_dim)
    q_rot = apply_rope(q.float(), cos, sin)
    k_cache[:, :, cache_len:total] = apply_rope(k.float(), cos, sin).to(k_cache.dtype)
    v_cache[:, :, cache_len:total] = v.to(v_cache.dtype)
    keys = k_cache[:, :, :total].float()
    values = v_cache[:, :, :total].float()
    scores = (q_rot @ keys.transpose(-1, -2)) / math.sqrt(head_dim)
    visible = torch.arange(total, device=q.device)[None, :] <= positions[:, None]
    scores = scores.masked_fill(~visible, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ values).to(q.dtype)


def make_inputs(shape: Shape, dtype: torch.dtype, seed: int, device: str) -> tuple:
    """q, k, v for the new tokens; caches with cache_len random (already rotated) entries
    and CACHE_SLACK slots past the new tokens; then cache_len itself. The slots past hold
    NaN, as a serving engine's unwritten cache memory may: a kernel that reads keys or
    values past cache_len + seq and trusts the causal mask to weigh them 0 computes
    0 * NaN there (red team 18: finite slots passed it)."""
    batch, heads, seq, cache_len, head_dim = shape
    gen = torch.Generator(device=device).manual_seed(seed)
    new = (batch, heads, seq, head_dim)
    cache = (batch, heads, cache_len + seq + CACHE_SLACK, head_dim)
    q, k, v = (torch.randn(new, generator=gen, device=device) for _ in range(3))
    k_cache, v_cache = (torch.randn(cache, generator=gen, device=device) for _ in range(2))
    for unwritten in (k_cache, v_cache):
        unwritten[:, :, cache_len + seq:] = float("nan")
    tensors = (q, k, v, k_cache, v_cache)
    return (*(t.to(device=device, dtype=dtype) for t in tensors), cache_len)


def _visible_pairs(seq: int, cache_len: int) -> int:
    """(query, key) pairs the causal mask keeps: query i sees cache_len + i + 1 keys."""
    return seq * cache_len + seq * (seq + 1) // 2


def bytes_moved(shape: Shape, dtype: torch.dtype) -> int:
    """Least traffic: read q, k, v and the cached prefix of K and V; write K and V of the
    new tokens into the cache and the output."""
    batch, heads, seq, cache_len, head_dim = shape
    elems = batch * heads * head_dim * (6 * seq + 2 * cache_len)
    return elems * torch.finfo(dtype).bits // 8


def flops(shape: Shape, dtype: torch.dtype) -> int:
    """Two matmuls (q k^T and p v) over the visible pairs; RoPE and softmax are minor."""
    batch, heads, seq, cache_len, head_dim = shape
    return 4 * batch * heads * head_dim * _visible_pairs(seq, cache_len)


def smem_bytes(cfg: Config, shape: Shape, dtype: torch.dtype) -> int:
    """Shared memory of one program: the Q tile, NUM_STAGES buffers of the K and V tiles
    read from the cache and, with the fused cache write, NUM_STAGES - 1 more of the new
    keys and values read from k and v (plus their fp32 cos / sin rows with the RoPE table).
    Fitted on the H200 (Triton 3.6, head_dim 128, benchmarks/space/attention_float16.json):
    exact on every point but the unfused 16-row tile, which it over-counts (that tile
    takes the mma.sync path with one K/V buffer); the infeasible point it predicts, 256
    KiB, is what Triton asked for."""
    head_dim, size = shape[4], dtype.itemsize
    bm, bn, stages = int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"]), int(cfg["NUM_STAGES"])
    need = bm * head_dim * size + stages * 2 * bn * head_dim * size
    if cfg["FUSE_KV_WRITE"]:
        table = 2 * bn * (head_dim // 2) * 4 if cfg["ROPE_TABLE"] else 0
        need += (stages - 1) * (2 * bn * head_dim * size + table)
    return need


def constraint(cfg: Config) -> str | None:
    """Prune to the points worth a GPU measurement (60)."""
    bm, bn = int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"])
    warps, stages = int(cfg["NUM_WARPS"]), int(cfg["NUM_STAGES"])
    if (bm == 128) != (warps == 8):
        return "16 query rows a warp: 8 warps for 128-row blocks, 4 below"
    if bm == 16 and bn != 64:
        return "the 16-row block is the decode tile: it steps 64 keys at a time"
    if bn < bm // 2:
        return "a key step under half the query block wastes the Q tile's reuse"
    if stages == 3 and (bm, bn) != (128, 64):
        return "3 K/V stages are measured on the 128x64 tile, where each stage feeds most math"
    if cfg["EVEN_SEQ"] and not cfg["CAUSAL_SKIP"]:
        return "EVEN_SEQ specialises the causal-skip loops; without skip every block is masked"
    if cfg["FLASH"] and (cfg["FUSE_KV_WRITE"] or not cfg["CAUSAL_SKIP"]):
        return "FLASH reads keys rotated once into the cache (no FUSE_KV_WRITE) and always " \
               "skips past the diagonal (CAUSAL_SKIP)"
    if cfg["FLASH"] and bm == 16:
        return "FLASH is the prefill tile; 16-row blocks are for decode"
    if bn == 128 and not (cfg["FLASH"] and bm == 128):
        return "128-key steps are measured on the flash kernel's 128-row tile"
    return None
def launch(cfg: Config, shape: Shape, dtype: str) -> Launch:
    """run()'s attention grid: one program per (BLOCK_M query rows, batch x head); K and V
    tiles staged in shared memory NUM_STAGES deep; the Q tile, the fp32 output accumulator
    and the [BLOCK_M, BLOCK_N] fp32 scores in registers. Without FUSE_KV_WRITE a cache-write
    kernel runs first on the same grid: its programs are counted too."""
    batch, heads, seq, _cache_len, head_dim = shape
    size = DTYPES[dtype].itemsize
    bm, bn = int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"])
    stages = int(cfg["NUM_STAGES"])
    grid = cdiv(seq, bm) * batch * heads
    smem = smem_bytes(cfg, shape, DTYPES[dtype])  # the fitted model the space uses
    threads = int(cfg["NUM_WARPS"]) * 32
    programs = grid if cfg["FUSE_KV_WRITE"] else 2 * grid
    return Launch(programs=programs, threads_per_program=threads,
                  elements_per_program=bm * head_dim, bytes_per_element=size,
                  tile_bytes=smem + bm * head_dim * (size + 4) + bm * bn * 4, smem_bytes=smem,
                  num_stages=stages, vector_width=vector_width(bn * head_dim, threads, size))




SCORE_SCALE = 2.0  # q and keys x2: scaled scores of std 4, past float16's exp at 11.09
CACHE_ROOM = 300  # a cache with room: slots past the keys, more than two key blocks of 128


def _large_scores(inputs: tuple, seed: int) -> tuple:
    """q, k and the cached keys at twice the scale: scaled scores reach 10-20, as sharp
    heads and attention sinks of trained models do (red team 22: an online softmax with
    no running max overflowed float16 there, and every input was unit-scale)."""
    q, k, v, k_cache, v_cache, cache_len = inputs
    k_cache = k_cache.clone()
    k_cache[:, :, :cache_len] *= SCORE_SCALE
    return q * SCORE_SCALE, k * SCORE_SCALE, v, k_cache, v_cache, cache_len


def _cache_with_room(inputs: tuple, seed: int) -> tuple:
    """Caches of CACHE_ROOM slots past the keys, unwritten (NaN), as a static cache or a
    server's per-slot cache holds them (red team 22: a decode that dropped its key masks
    where a whole block fit in the cache read the empty slots)."""
    q, k, v, k_cache, v_cache, cache_len = inputs
    batch, heads, _, head_dim = k_cache.shape
    keys = cache_len + q.shape[2]
    roomy = []
    for cache in (k_cache, v_cache):
        bigger = torch.full((batch, heads, keys + CACHE_ROOM, head_dim), float("nan"),
                            dtype=cache.dtype, device=cache.device)
        bigger[:, :, :keys] = cache[:, :, :keys]
        roomy.append(bigger)
    return q, k, v, roomy[0], roomy[1], cache_len


CONDITIONS = (
    InputCondition("large scores", "q and keys at twice the scale: scaled scores of 10-20, "
                   "past float16's exp (11.09) unless the running max is taken off first",
                   _large_scores),
    InputCondition("a cache with room", f"caches of {CACHE_ROOM} unwritten (NaN) slots past "
                   "the keys (a static cache): a decode must mask the slots past its keys",
                   _cache_with_room),
)


def peers() -> list[Peer]:
    """The unfused pipeline it replaces (RoPE, cache write, SDPA), eager and compiled."""
    return [Peer("unfused eager", attention_unfused,
                 "HF rotate-half RoPE in the input dtype, cache slice writes, SDPA"),
            Peer("unfused compiled", torch.compile(attention_unfused, dynamic=False),
                 "the same, torch.compile(dynamic=False)")]


TASK = register(
    Task(
        name="attention",
        op_type="attention",
        description=(
            "Fused decoder attention for the new tokens of a step: RoPE (rotate-half, theta "
            "10000) on q and k at positions cache_len + i, the rotated k and v written into "
            "the KV cache in place, causal attention over cache[0 : cache_len + seq_new] "
            "with scale 1/sqrt(head_dim). n_kv_heads = n_heads."
        ),
        signature=(
            "run(q, k, v: Tensor[batch, heads, seq_new, head_dim], k_cache, v_cache: "
            "Tensor[batch, heads, max_seq, head_dim], cache_len: int) -> Tensor[batch, heads, "
            "seq_new, head_dim]; writes k_cache and v_cache in place"
        ),
        reference=reference,
        make_inputs=make_inputs,
        shape_names=("batch", "heads", "seq_new", "cache_len", "head_dim"),
        # prefill at 128..4096 tokens, batch 1..32, 32 heads x 128 (Llama-7B/8B-like); a
        # chunked prefill after a long prefix; a batched decode step of a few tokens
        sweep_shapes=(
            (1, 32, 128, 0, 128), (32, 32, 128, 0, 128), (4, 32, 1024, 0, 128),
            (1, 32, 4096, 0, 128), (8, 32, 256, 3840, 128), (32, 32, 4, 1020, 128),
        ),
        # decode of one token (empty and odd cache), shorter than any block, non-power-of-
        # two lengths, odd cache lengths, head_dim 32 (the smallest the dot halves allow)
        edge_shapes=(
            (1, 2, 1, 0, 64), (2, 2, 1, 37, 64), (1, 2, 7, 0, 64), (2, 3, 100, 0, 64),
            (1, 2, 9, 13, 32), (1, 2, 33, 63, 128), (1, 1, 1000, 0, 64),
            # decode past 2048 cached keys: a kernel that looks at a window of the last
            # 1024 or 2048 keys (every other checked shape has fewer in view) is wrong
            (1, 2, 1, 2200, 64),
        ),
        cpu_shapes=((1, 2, 16, 0, 32), (1, 2, 40, 24, 64)),
        # a batch of 64 decodes over 8192 cached tokens, 32 heads of 128: the cache holds
        # 2.15e9 elements
        wide_shape=(64, 32, 1, 8192, 128),
        # decode and chunked prefill over a 64K-128K-token cache (Llama 3.1's context),
        # 1-16 sequences of 1-32 heads (red teams 18-21: a window only past 16K keys, only
        # with several heads, sequences or new tokens); under the interpreter, whose time
        # goes with programs x keys x head size, 1-2 x 1-2 x up to 256 new tokens over
        # 32K-64K keys. Head size 256 (Gemma) under the interpreter only: the space's
        # tiles are sized for 128 (Task.smem_need counts every listed shape), and a GPU
        # draw of 256 would refuse the larger ones for their shared memory
        reach=Reach(spans=(range(1, 17), range(1, 33), range(1, 8193), range(2**16, 2**17),
                           (64, 128)),
                    budget=((4, 8, 64, 131071, 128),)),
        cpu_reach=Reach(spans=(range(1, 3), range(1, 3), range(1, 257),
                               range(2**15 + 1, 2**16 + 2), (64, 128, 256)),
                        budget=((1, 1, 256, 32769, 64), (1, 1, 16, 65537, 256))),
        dtypes=("float16", "bfloat16"),
        torch_constants=True,  # RoPE's cos/sin of positions (the ROPE_TABLE path)
        tolerances={
            "float16": Tolerance(atol=5e-3, rtol=1e-2, max_bias=2e-3),
            "bfloat16": Tolerance(atol=3e-2, rtol=3e-2, max_bias=1e-2),
        },
        bytes_moved=bytes_moved,
        flops=flops,
        template=TEMPLATE,
        knobs=(
            Knob("BLOCK_M", (16, 64, 128), "tiling", "query rows per program"),
            Knob("BLOCK_N", (32, 64, 128), "tiling",
                 "keys per step of the key loop (128: the flash prefill tile only)"),
            Knob("NUM_WARPS", (4, 8), "warps_stages"),
            Knob("NUM_STAGES", (2, 3), "warps_stages", "software pipelining of K/V loads"),
        ),
        variants=(
            Variant("ROPE_TABLE", (False, True), "precompute",
                    "read RoPE cos/sin from a table built once per device and head_dim "
                    "instead of exp2/cos/sin in every program (the fused form recomputes "
                    "them for every key block it visits)"),
            Variant("CAUSAL_SKIP", (False, True), "causal_skip",
                    "stop the key loop at the diagonal block and mask only the diagonal "
                    "blocks, instead of visiting and masking every key block"),
            Variant("EVEN_SEQ", (False, True), "specialization",
                    "drop the bounds masks when seq_new % BLOCK_M == 0 and the key count "
                    "% BLOCK_N == 0 (checked at launch; masked path otherwise)"),
            Variant("FUSE_KV_WRITE", (False, True), "fusion",
                    "write rotated K and V to the cache inside the attention kernel (one "
                    "launch; new keys rotated from k directly) instead of a separate kernel"),
            Variant("FLASH", (False, True), "algorithm",
                    "flash-style prefill: the cache-write kernel rotates K once, then the "
                    "attention kernel rotates q at load with the softmax scale and log2(e) "
                    "folded in, takes one full-width QK^T product per key block (not two "
                    "half-width ones), exp2 online softmax, and runs the query blocks with "
                    "the most keys first (grid heads x blocks, last block first)"),
        ),
        related_ops=("softmax", "rope", "matmul"),
        constraint=constraint,
        mutated_inputs=(3, 4),
        input_conditions=CONDITIONS,
        smem_bytes=smem_bytes,
        launch=launch,
        peers=peers,
        regimes=Regimes(dims=("seq_new",), inputs=((0, 2),), classes=(
            ("decode", 16), ("prefill", 2048), ("long_prefill", None)),
            reason="new tokens per call: decode reads the cache with a handful of queries, "
                   "prefill tiles queries, long prefill needs flash-style tiling"),
    )
)
