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

import math
from typing import Any, cast

import torch

from kernelkb.kernels.base import ELEMENTWISE_TOLERANCES, Knob, Shape, Task, Variant, read_template
from kernelkb.kernels.conditions import InputCondition
from kernelkb.kernels.config import Config
from kernelkb.kernels.discovery import register
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, _rope_hf, liger_rope_peer, optional, rope_hf
from kernelkb.kernels.reach import Reach
from kernelkb.kernels.regimes import Regimes
from kernelkb.kernels.shared.launch import Launch, cdiv, next_pow2, vector_width

THETA = 10000.0

TEMPLATE = read_template(__file__)  # kernels/templates/rope.py: the naive kernel


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
    f32: dict[str, Any] = {"generator": gen, "dtype": torch.float32, "device": device}
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
    if cast(int, cfg["NUM_WARPS"]) * 32 > 64 * cast(int, cfg["HEADS_PER_PROGRAM"]):  # int knobs
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




def peers() -> list[Peer]:
    """HF Llama's apply_rotary_pos_emb eager and compiled, and Liger-Kernel's RoPE."""
    return [Peer("eager", rope_hf(), "HF Llama apply_rotary_pos_emb in the input dtype on "
                 "the (batch, heads, seq, dim) views, cos/sin cache gathered at the "
                 "positions"),
            Peer("compiled", rope_hf(torch.compile(_rope_hf, dynamic=False)),
                 "the same, torch.compile(dynamic=False)"),
            *optional(liger_rope_peer)]


def _packed(inputs: tuple, seed: int) -> tuple:
    """Several short documents packed in a row: positions restart at each document."""
    q, k, positions = inputs
    seq = positions.shape[1]
    gen = torch.Generator(device="cpu").manual_seed(seed)
    length = int(torch.randint(1, max(2, seq // 3 + 1), (1,), generator=gen))
    packed = (torch.arange(seq, dtype=torch.int32) % length).to(positions.device)
    return q, k, packed[None, :].expand_as(positions).contiguous()


def _left_padded(inputs: tuple, seed: int) -> tuple:
    """Left-padded batch: each sequence's first tokens are padding at position 0."""
    q, k, positions = inputs
    batch, seq = positions.shape
    gen = torch.Generator(device="cpu").manual_seed(seed)
    pad = torch.randint(0, seq, (batch, 1), generator=gen, dtype=torch.int32)
    steps = torch.arange(seq, dtype=torch.int32)[None, :] - pad
    return q, k, steps.clamp(min=0).to(positions.device)


def _long_context(inputs: tuple, seed: int) -> tuple:
    """Positions deep in a long context, up to an 8M-token one: the first sequence ends
    within the top half of the range, the others start anywhere from 32K on (log-uniform). A kernel
    that wraps positions, or keeps a cos/sin table of the first N, is wrong wherever
    positions pass N: with every start at 32,768, a table of 65,536 passed (red team 18)."""
    q, k, positions = inputs
    batch, seq = positions.shape
    gen = torch.Generator(device="cpu").manual_seed(seed)
    low, high = LONG_CONTEXT
    last = max(low, high - seq - 64)  # make_inputs' own starts reach 63
    exponents = math.log2(low) + (math.log2(last) - math.log2(low)) * \
        torch.rand((batch, 1), generator=gen, dtype=torch.float64)
    starts = (2**exponents).long()
    starts[0] = int(torch.randint(max(low, last // 2), last + 1, (1,), generator=gen))
    return q, k, (positions.long() + starts.to(positions.device)).to(positions.dtype)


# the positions a long context reaches: 32K to 8M tokens (red team 22 clamped positions
# past 2**21 when the draw stopped at 1M). Under 2**23, so a drawn offset of 1M on top
# stays where float32 holds every integer (2**24)
LONG_CONTEXT = (2**15, 2**23)

CONDITIONS = (
    InputCondition("a long context", "positions from 32K to 8M, as long prompts' last tokens "
                   "have them", _long_context),
    InputCondition("packed positions", "documents packed in a row restart their positions",
                   _packed),
    InputCondition("left-padded positions", "padding tokens of a batch sit at position 0",
                   _left_padded),
)

TASK = register(
    Task(
        name="rope",
        input_conditions=CONDITIONS,
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
        # 17 sequences of 32k tokens at Llama-3-8B's 32 query heads: q holds 2.28e9
        wide_shape=(17, 32768, 32, 8, 128),
        # one long sequence or a few, past the lists' 4,096 tokens (a long prompt's
        # prefill, a packed training row), any heads: a path for long rows that assumes
        # running positions or a table's length is right on every listed row (red team 21)
        reach=Reach(spans=(range(1, 5), range(8193, 131073), range(1, 65), range(1, 9),
                           (64, 128, 256)),
                    budget=((1, 65536, 32, 8, 128),)),
        cpu_reach=Reach(spans=(range(1, 3), range(4097, 32769), range(1, 5), range(1, 3),
                               (64, 128)),
                        budget=((1, 16384, 2, 1, 64),)),
        dtypes=("float16", "bfloat16", "float32"),
        tolerances=ELEMENTWISE_TOLERANCES,
        bytes_moved=bytes_moved,
        flops=flops,
        template=TEMPLATE,
        torch_constants=True,  # inverse frequencies, cos/sin of positions
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
        peers=peers,
        regimes=Regimes(dims=("batch", "seq"), inputs=((0, 0), (0, 1)), classes=(
            ("decode", 16), ("short", 2048), ("long", None)),
            reason="tokens per call: decode steps and short prompts are launch-bound "
                   "(heads per program matter), long prompts bandwidth-bound"),
    )
)
