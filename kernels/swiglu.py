"""SwiGLU activation: y = silu(gate) * up, elementwise, computed in fp32.

Layout: two tensors gate and up of shape (tokens, intermediate), as they come out of two
projections (or as the two halves of a fused [tokens, 2*I] projection, split by the
caller with views; run() makes them contiguous). The output has their shape and dtype.

Search space: 1-D flat tiling over all elements vs a 2-D grid (row, column block); the
sigmoid as g / (1 + exp(-g)) or tl.sigmoid; an even-size specialisation that drops the
masks when the size divides the block; contiguity hints (tl.multiple_of /
tl.max_contiguous) that let the compiler emit wide vector loads; block size; warps.
"""

from __future__ import annotations

import torch

from kernelkb.kernels.base import ELEMENTWISE_TOLERANCES, Knob, Shape, Task, Variant, read_template
from kernelkb.kernels.conditions import InputCondition
from kernelkb.kernels.config import Config
from kernelkb.kernels.discovery import register
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, eager_and_compiled, liger_swiglu, optional, swiglu_eager
from kernelkb.kernels.reach import Reach
from kernelkb.kernels.regimes import Regimes
from kernelkb.kernels.shared.launch import Launch, cdiv, next_pow2, vector_width

TEMPLATE = read_template(__file__)  # kernels/templates/swiglu.py: the naive kernel


def reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return (torch.nn.functional.silu(gate.float()) * up.float()).to(gate.dtype)


def _past_half_range(inputs: tuple, seed: int) -> tuple:
    """Every eighth row (from a drawn first) with gate at 300 (silu(300) is 300 in float32)
    and up at 300 with its signs: silu(g) * u is +-90,000, past float16's 65,504, which
    the reference rounds to inf (red team 22 clamped a float16 matmul's overflow; a
    feed-forward layer's overflows the same way). No value near the limit, where two
    float32 silu's a rounding apart would round to inf or not."""
    gate, up = inputs[0].clone(), inputs[1].clone()
    gen = torch.Generator(device="cpu").manual_seed(seed)
    first = int(torch.randint(0, min(8, gate.shape[0]), (1,), generator=gen))
    gate[first::8] = 300.0
    up[first::8] = torch.where(up[first::8] < 0, -300.0, 300.0).to(up.dtype)
    return gate, up


def make_inputs(
    shape: Shape, dtype: torch.dtype, seed: int, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(seed)
    # x3: both tails of silu
    gate = torch.randn(shape, generator=gen, dtype=torch.float32, device=device) * 3.0
    up = torch.randn(shape, generator=gen, dtype=torch.float32, device=device)
    return gate.to(device=device, dtype=dtype), up.to(device=device, dtype=dtype)


def bytes_moved(shape: Shape, dtype: torch.dtype) -> int:
    tokens, inter = shape
    return 3 * tokens * inter * torch.finfo(dtype).bits // 8  # read gate and up, write y


def flops(shape: Shape, dtype: torch.dtype) -> int:
    tokens, inter = shape
    return 5 * tokens * inter  # negate, exp, add, divide, multiply
def launch(cfg: Config, shape: Shape, dtype: str) -> Launch:
    """run()'s grid: flat, one program per BLOCK_SIZE elements; 2-D, one per (row, column
    block), the block cut to the row (a partial block at each row end); gate and up
    tiles in fp32."""
    rows, cols = shape
    size = DTYPES[dtype].itemsize
    threads = int(cfg["NUM_WARPS"]) * 32
    if cfg["TILING_2D"]:
        block = min(int(cfg["BLOCK_SIZE"]), next_pow2(cols))
        programs = rows * cdiv(cols, block)
    else:
        block = int(cfg["BLOCK_SIZE"])
        programs = cdiv(rows * cols, block)
    return Launch(programs=programs, threads_per_program=threads,
                  elements_per_program=rows * cols / programs, bytes_per_element=size,
                  tile_bytes=2 * block * 4, vector_width=vector_width(block, threads, size))




def peers() -> list[Peer]:
    """silu(gate) * up eager and compiled, and Liger-Kernel's SiLU-mul."""
    return [*eager_and_compiled(swiglu_eager), *optional(liger_swiglu)]


TASK = register(
    Task(
        name="swiglu",
        op_type="swiglu",
        description=(
            "SwiGLU activation silu(gate) * up over two (tokens, intermediate) tensors, "
            "computed in fp32, output in the input dtype."
        ),
        signature="run(gate: Tensor[tokens, inter], up: Tensor[tokens, inter]) -> "
        "Tensor[tokens, inter] (same dtype); tokens may be several leading dimensions "
        "(batch, seq)",
        leading_dims=(0, 1),
        reference=reference,
        make_inputs=make_inputs,
        shape_names=("tokens", "inter"),
        # tokens = batch (1..32) x seq (128..4096); intermediate sizes of Llama-2-7B (11008),
        # Llama-2-13B (13824), Llama-3-8B / Mistral-7B (14336), Qwen2-7B (18944),
        # Llama-3-70B (28672)
        sweep_shapes=(
            (128, 11008), (512, 14336), (2048, 11008), (4096, 14336),
            (8192, 13824), (16384, 18944), (32768, 14336), (4096, 28672),
        ),
        edge_shapes=((1, 1), (1, 7), (3, 1000), (4, 4096), (5, 4097), (1, 14336)),
        cpu_shapes=((4, 11008), (16, 14336)),
        # a 75k-token prefill through Llama-3-70B's MLP (28672): 2.15e9 elements a side
        wide_shape=(74944, 28672),
        # intermediate sizes past the lists' 28672, to 64K (Qwen2-72B: 29568; Llama 3.1
        # 405B: 53248), one token (decode; red team 21) to many
        reach=Reach(spans=(range(1, 4097), range(28673, 2**16 + 1)), budget=((256, 65536),)),
        cpu_reach=Reach(spans=(range(1, 17), range(28673, 2**16 + 1)), budget=((4, 65536),)),
        input_conditions=(
            InputCondition("large gates", "30·randn gates: exp(g) overflows past 88, so "
                           "silu as g·exp(g) / (1 + exp(g)) is inf/inf; g / (1 + exp(-g)) "
                           "is not", lambda inputs, seed: (inputs[0] * 10, inputs[1])),
            InputCondition("products past float16's range", "rows of gate and up at 300: "
                           "silu(g) * u at +-90,000 is inf in float16, as an overflowing "
                           "feed-forward layer's is; a clamp hides it", _past_half_range),
        ),
        dtypes=("float16", "bfloat16", "float32"),
        tolerances=ELEMENTWISE_TOLERANCES,
        bytes_moved=bytes_moved,
        flops=flops,
        template=TEMPLATE,
        knobs=(
            Knob("BLOCK_SIZE", (1024, 4096), "tiling",
                 "elements (1-D) or columns (2-D) per program"),
            Knob("NUM_WARPS", (4, 8), "warps_stages"),
        ),
        variants=(
            Variant("TILING_2D", (False, True), "launch_shape",
                    "2-D grid over (row, column block): per-row pointers and no 64-bit flat "
                    "index math, at the cost of a partial block at every row end"),
            Variant("SIGMOID", ("exp", "tl"), "algorithm",
                    "sigmoid as g / (1 + exp(-g)) or tl.sigmoid(g) * g"),
            Variant("EVEN_SPECIALIZATION", (False, True), "specialization",
                    "when the size divides the block, launch a kernel without masks"),
            Variant("CONTIGUITY_HINTS", (False, True), "vectorization",
                    "tl.multiple_of / tl.max_contiguous on the offsets so loads and stores "
                    "become 128-bit vector accesses"),
        ),
        related_ops=("rmsnorm", "gelu", "matmul"),
        launch=launch,
        peers=peers,
        regimes=Regimes(dims=("tokens", "inter"), inputs=((0, 0), (0, 1)), classes=(
            ("small", 1 << 23), ("large", None)),
            reason="elementwise: under ~8M elements a call is bound by launch and tail "
                   "(fewer, wider programs); above it by bandwidth"),
    )
)
