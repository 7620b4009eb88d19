"""LayerNorm with weight and bias over the last dim: y = (x - mean) * rstd * w + b.

A task the project does not ship, written as a user would (README "Adding a task"), for
benchmarks/retrieval_ab.py. Layout: x is (rows, hidden) with rows = batch * seq tokens;
weight and bias are (hidden,); eps 1e-5 (GPT-2, OPT, Falcon, BLOOM); statistics in fp32.

Search space, named as rmsnorm's so its experiences speak for these edits: whole row in
one tile (BLOCK_SIZE = 0) or a chunked loop; for chunked rows the statistics in two
reads of the row (mean, then variance) or one (shifted sums); rows per program; a
persistent grid; warps; stages for the chunk loop. The naive kernel is a chunked loop
reading each row three times with 4 warps: correct for any hidden size, not tuned.
"""

from __future__ import annotations

import torch

from kernelkb.kernels.base import ELEMENTWISE_TOLERANCES, Knob, Task, Variant, read_template
from kernelkb.kernels.conditions import InputCondition
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, eager_and_compiled
from kernelkb.kernels.shared.launch import Launch, cdiv, next_pow2, vector_width

EPS = 1e-5


def reference(x, weight, bias, eps=EPS):
    hidden = x.shape[-1]
    return torch.nn.functional.layer_norm(x.float(), (hidden,), weight.float(), bias.float(),
                                          eps).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    rows, hidden = shape
    gen = torch.Generator(device=device).manual_seed(seed)
    # a mean away from 0, so a kernel that skips the mean subtraction is wrong
    x = torch.randn(shape, generator=gen, device=device) * 2.0 + 0.5
    weight = 1.0 + 0.5 * torch.randn((hidden,), generator=gen, device=device)
    bias = 0.5 * torch.randn((hidden,), generator=gen, device=device)
    return x.to(dtype), weight.to(dtype), bias.to(dtype)


def bytes_moved(shape, dtype):
    rows, hidden = shape
    return (2 * rows * hidden + 2 * hidden) * dtype.itemsize  # x, y, weight and bias once


def flops(shape, dtype):
    rows, hidden = shape
    return 7 * rows * hidden  # sum, subtract, square, add, scale, weight, bias


def constraint(cfg):
    chunked = cfg["BLOCK_SIZE"] != 0
    if cfg["PERSISTENT"] and chunked:
        return "PERSISTENT keeps weight and bias in registers: whole-row tiles only"
    if cfg["PERSISTENT"] and cfg["ROWS_PER_PROGRAM"] != 1:
        return "PERSISTENT programs loop over rows themselves; ROWS_PER_PROGRAM is moot"
    if chunked and cfg["ROWS_PER_PROGRAM"] != 1:
        return "ROWS_PER_PROGRAM amortises launch for short rows; chunked rows are long"
    if not chunked and cfg["NUM_STAGES"] != 1:
        return "NUM_STAGES only pipelines the chunk loop (BLOCK_SIZE > 0)"
    if not chunked and cfg["ONE_PASS_STATS"]:
        return "ONE_PASS_STATS saves a read of chunked rows; a whole-row tile is read once"
    return None


def launch(cfg, shape, dtype):
    """run()'s grid: a program per ROWS_PER_PROGRAM rows, or a persistent grid of 4
    programs per SM for whole-row tiles; a [block] fp32 row tile beside weight and bias."""
    rows, cols = shape
    size = DTYPES[dtype].itemsize
    whole = next_pow2(cols)
    block = whole if cfg["BLOCK_SIZE"] == 0 else min(int(cfg["BLOCK_SIZE"]), whole)
    single = block >= cols
    persistent = bool(cfg["PERSISTENT"]) and single
    rows_per = 1 if persistent else int(cfg["ROWS_PER_PROGRAM"])
    threads = int(cfg["NUM_WARPS"]) * 32
    return Launch(programs=max(1, cdiv(rows, rows_per)), threads_per_program=threads,
                  elements_per_program=min(rows, rows_per) * cols, bytes_per_element=size,
                  tile_bytes=3 * block * 4, num_stages=1 if single else int(cfg["NUM_STAGES"]),
                  vector_width=vector_width(block, threads, size),
                  programs_per_sm_cap=4 if persistent else 0)


def _layer_norm(x, weight, bias, eps=EPS):  # what a user calls instead
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def peers() -> list[Peer]:
    return eager_and_compiled(_layer_norm, "torch.nn.functional.layer_norm")


def _zero_row(inputs, seed):
    x = inputs[0].clone()
    x[seed % x.shape[0]] = 0
    return (x, *inputs[1:])


CONDITIONS = (
    InputCondition("a zero row", "padding tokens are all zero: variance 0, only eps keeps "
                   "rstd finite (y = bias)", _zero_row),
    InputCondition("offset rows", "x + 30: the mean dwarfs the spread, so E[x^2] - E[x]^2 "
                   "cancels in fp32 unless the sums are shifted or taken about the mean",
                   lambda inputs, seed: (inputs[0] + 30, *inputs[1:])),
)

TASK = Task(
    name="layernorm",
    op_type="layernorm",
    description=("LayerNorm with weight and bias over the last dim of x (rows = batch*seq "
                 "tokens, hidden), eps=1e-5, fp32 statistics; "
                 "y = (x - mean) * rsqrt(var + eps) * weight + bias."),
    signature="run(x: Tensor[rows, hidden], weight: Tensor[hidden], bias: Tensor[hidden], "
              "eps=1e-5) -> Tensor[rows, hidden] (same dtype as x)",
    reference=reference,
    make_inputs=make_inputs,
    shape_names=("rows", "hidden"),
    # tokens = batch x seq; hidden of GPT-2 XL (1600), OPT-1.3B (2048), OPT-6.7B / BLOOM-7B
    # (4096), Falcon-7B (4544), OPT-13B (5120), OPT-66B (9216), GPT-3 175B (12288)
    sweep_shapes=((1024, 2048), (256, 4544), (4096, 4096), (8192, 1600),
                  (4096, 5120), (16384, 8192), (8192, 9216), (2048, 12288)),
    edge_shapes=((1, 1), (1, 7), (3, 1500), (7, 4544), (5, 4097), (2, 20000)),
    cpu_shapes=((8, 2048), (16, 4544)),
    dtypes=("float16", "bfloat16", "float32"),
    tolerances=ELEMENTWISE_TOLERANCES,
    bytes_moved=bytes_moved,
    flops=flops,
    template=read_template(__file__),
    knobs=(
        Knob("BLOCK_SIZE", (0, 1024, 4096), "tiling",
             "columns per tile: 0 = whole row in registers, else a chunked loop"),
        Knob("NUM_WARPS", (2, 4, 8, 16), "warps_stages"),
        Knob("NUM_STAGES", (1, 2), "warps_stages", "software pipelining of the chunk loop"),
        Knob("ROWS_PER_PROGRAM", (1, 4), "launch_shape",
             "rows per program, to amortise launch and index math for short rows"),
    ),
    variants=(
        Variant("PERSISTENT", (False, True), "launch_shape",
                "persistent grid (SMs x 4 programs, grid-stride over rows): weight and bias "
                "are loaded once per program instead of once per row"),
        Variant("ONE_PASS_STATS", (False, True), "algorithm",
                "chunked rows: mean and variance from shifted sums in one read of the row "
                "instead of two (the mean, then the variance about it)"),
    ),
    related_ops=("rmsnorm",),
    constraint=constraint,
    launch=launch,
    peers=peers,
    input_conditions=CONDITIONS,
)
