"""GeGLU activation: y = gelu_tanh(gate) * up, elementwise, computed in fp32.

A task the project does not ship, written as a user would (README "Adding a task"), for
benchmarks/retrieval_ab.py. Layout: gate and up of shape (tokens, intermediate), the two
projections of a gated MLP (Gemma, T5 v1.1); GELU in its tanh form, as Gemma uses it. The
output has their shape and dtype.

Search space, named as swiglu's so its experiences speak for these edits: flat 1-D tiling
vs a 2-D (row, column block) grid; the sigmoid behind the tanh form as tl.sigmoid or
1 / (1 + exp(-z)); an even-size specialisation without masks; contiguity hints; block
size; warps. The naive kernel is flat with 4096-element blocks on 4 warps and
tl.sigmoid: correct, not tuned.
"""

from __future__ import annotations

import torch

from kernelkb.kernels.base import ELEMENTWISE_TOLERANCES, Knob, Task, Variant, read_template
from kernelkb.kernels.conditions import InputCondition
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, eager_and_compiled
from kernelkb.kernels.shared.launch import Launch, cdiv, next_pow2, vector_width

GELU_K = 1.5957691216057308  # 2 * sqrt(2 / pi): 0.5 * (1 + tanh(u)) = sigmoid(2 u)


def reference(gate, up):
    """F.gelu(gate, approximate="tanh") * up, in float64 and in its sigmoid form: torch's
    0.5 * g * (1 + tanh(u)) cancels in the negative tail (1 + tanh(u) -> 0), so in fp32 it
    is wrong by 1e-4 relative at g = -5, which the bias check of one element catches."""
    g = gate.double()
    gelu = g * torch.sigmoid(GELU_K * (g + 0.044715 * g * g * g))
    return (gelu * up.double()).to(gate.dtype)


def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator(device=device).manual_seed(seed)
    gate = torch.randn(shape, generator=gen, device=device) * 3.0  # both tails of gelu
    up = torch.randn(shape, generator=gen, device=device)
    return gate.to(dtype), up.to(dtype)


def bytes_moved(shape, dtype):
    tokens, inter = shape
    return 3 * tokens * inter * dtype.itemsize  # read gate and up, write y


def flops(shape, dtype):
    tokens, inter = shape
    return 9 * tokens * inter  # cube, scale, add, exp, add, divide, multiply


def launch(cfg, shape, dtype):
    """run()'s grid: flat, a program per BLOCK_SIZE elements; 2-D, one per (row, column
    block), the block cut to the row; gate and up tiles in fp32."""
    rows, cols = shape
    size = DTYPES[dtype].itemsize
    threads = int(cfg["NUM_WARPS"]) * 32
    if cfg["TILING_2D"]:
        block = min(int(cfg["BLOCK_SIZE"]), next_pow2(cols))
        programs = rows * cdiv(cols, block)
    else:
        block = int(cfg["BLOCK_SIZE"])
        programs = cdiv(rows * cols, block)
    return Launch(programs=max(1, programs), threads_per_program=threads,
                  elements_per_program=rows * cols / max(1, programs),
                  bytes_per_element=size, tile_bytes=2 * block * 4,
                  vector_width=vector_width(block, threads, size))


def _geglu(gate, up):  # what a user calls instead
    return torch.nn.functional.gelu(gate, approximate="tanh") * up


def peers() -> list[Peer]:
    return eager_and_compiled(_geglu, "F.gelu(gate, approximate='tanh') * up")


CONDITIONS = (
    InputCondition("large gates", "30·randn gates: far in the negative tail exp(-z) is inf "
                   "and gelu must come out 0, not NaN (tanh as a ratio of exps gives inf/inf)",
                   lambda inputs, seed: (inputs[0] * 10, inputs[1])),
)

TASK = Task(
    name="geglu",
    op_type="geglu",
    description=("GeGLU activation gelu_tanh(gate) * up over two (tokens, intermediate) "
                 "tensors, computed in fp32, output in the input dtype."),
    signature="run(gate: Tensor[tokens, inter], up: Tensor[tokens, inter]) -> "
              "Tensor[tokens, inter] (same dtype)",
    reference=reference,
    make_inputs=make_inputs,
    shape_names=("tokens", "inter"),
    # tokens = batch x seq; intermediate sizes of Gemma-2B (16384), Gemma-7B (24576),
    # Gemma-2-9B (14336), T5 v1.1 XL (5120) and XXL (10240)
    sweep_shapes=((128, 16384), (512, 14336), (2048, 5120), (4096, 10240),
                  (8192, 14336), (16384, 16384), (4096, 24576), (32768, 5120)),
    edge_shapes=((1, 1), (1, 7), (3, 1000), (4, 4096), (5, 4097), (1, 24576)),
    cpu_shapes=((4, 5120), (16, 14336)),
    dtypes=("float16", "bfloat16", "float32"),
    tolerances=ELEMENTWISE_TOLERANCES,
    bytes_moved=bytes_moved,
    flops=flops,
    template=read_template(__file__),
    knobs=(
        Knob("BLOCK_SIZE", (1024, 4096), "tiling",
             "elements (1-D) or columns (2-D) per program"),
        Knob("NUM_WARPS", (4, 8), "warps_stages"),
    ),
    variants=(
        Variant("TILING_2D", (False, True), "launch_shape",
                "2-D grid over (row, column block): per-row pointers and no 64-bit flat "
                "index math, at the cost of a partial block at every row end"),
        Variant("SIGMOID", ("tl", "exp"), "algorithm",
                "the sigmoid of the tanh form as tl.sigmoid(z) or 1 / (1 + exp(-z))"),
        Variant("EVEN_SPECIALIZATION", (False, True), "specialization",
                "when the size divides the block, launch a kernel without masks"),
        Variant("CONTIGUITY_HINTS", (False, True), "vectorization",
                "tl.multiple_of / tl.max_contiguous on the offsets so loads and stores "
                "become 128-bit vector accesses"),
    ),
    related_ops=("swiglu",),
    launch=launch,
    peers=peers,
    input_conditions=CONDITIONS,
)
