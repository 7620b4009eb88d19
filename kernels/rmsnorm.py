"""RMSNorm with a weight: y = x / sqrt(mean(x^2) + eps) * w, row-wise, fp32 accumulation.

Layout: x is (rows, hidden) with rows = batch * seq tokens; weight is (hidden,); eps is
1e-6 (Llama). The reference multiplies by the weight in fp32 (the precise form); the
NATIVE_WEIGHT_MUL variant rounds the normalised row to the input dtype first and
multiplies in that dtype, as Hugging Face's Llama does.

Search space: whole row in one tile (BLOCK_SIZE = 0; x is read once) or a chunked
two-pass loop (sum of squares, then normalise; x is read twice); rows per program; a
persistent grid (one program per SM slot, the weight row loaded once per program and
kept in registers across rows); the weight multiply in fp32 or the native dtype; warps;
stages for the chunk loop.
"""

from __future__ import annotations

import math

import torch

from kernelkb.kernels.base import ELEMENTWISE_TOLERANCES, Knob, Shape, Task, Variant, read_template
from kernelkb.kernels.conditions import InputCondition
from kernelkb.kernels.config import Config
from kernelkb.kernels.discovery import register
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, eager_and_compiled, liger_rmsnorm, optional, rmsnorm_eager
from kernelkb.kernels.reach import Reach
from kernelkb.kernels.regimes import Regimes
from kernelkb.kernels.scalar_args import ScalarArg
from kernelkb.kernels.shared.launch import Launch, cdiv, next_pow2, vector_width

EPS = 1e-6

TEMPLATE = read_template(__file__)  # kernels/templates/rmsnorm.py: the naive kernel


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)


def make_inputs(
    shape: Shape, dtype: torch.dtype, seed: int, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    rows, hidden = shape
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((rows, hidden), generator=gen, dtype=torch.float32, device=device) * 2.0
    weight = 1.0 + 0.5 * torch.randn((hidden,), generator=gen, dtype=torch.float32, device=device)
    return x.to(device=device, dtype=dtype), weight.to(device=device, dtype=dtype)


def bytes_moved(shape: Shape, dtype: torch.dtype) -> int:
    rows, hidden = shape
    size = torch.finfo(dtype).bits // 8
    return (2 * rows * hidden + hidden) * size  # read x, write y, read the weight once


def flops(shape: Shape, dtype: torch.dtype) -> int:
    rows, hidden = shape
    return 4 * rows * hidden  # square, add, scale by rstd, multiply by weight


def constraint(cfg: Config) -> str | None:
    chunked = cfg["BLOCK_SIZE"] != 0
    if cfg["PERSISTENT"] and chunked:
        return "PERSISTENT keeps the weight row in registers: whole-row tiles only"
    if cfg["PERSISTENT"] and cfg["ROWS_PER_PROGRAM"] != 1:
        return "PERSISTENT programs loop over rows themselves; ROWS_PER_PROGRAM is moot"
    if chunked and cfg["ROWS_PER_PROGRAM"] != 1:
        return "ROWS_PER_PROGRAM amortises launch for short rows; chunked rows are long"
    if not chunked and cfg["NUM_STAGES"] != 1:
        return "NUM_STAGES only pipelines the chunk loop (BLOCK_SIZE > 0)"
    return None
def launch(cfg: Config, shape: Shape, dtype: str) -> Launch:
    """run()'s grid: one program per ROWS_PER_PROGRAM rows, or a persistent grid of
    PROGRAMS_PER_SM (4) programs per SM for whole-row tiles; a [block] fp32 row tile and
    the weight tile beside it."""
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
                  tile_bytes=2 * block * 4, num_stages=1 if single else int(cfg["NUM_STAGES"]),
                  vector_width=vector_width(block, threads, size),
                  programs_per_sm_cap=4 if persistent else 0)




def peers() -> list[Peer]:
    """The HF Llama formulation eager and compiled, and Liger-Kernel's RMSNorm."""
    return [*eager_and_compiled(rmsnorm_eager), *optional(liger_rmsnorm)]


def _zero_row(inputs: tuple, seed: int) -> tuple:
    x = inputs[0].clone()
    x[seed % x.shape[0]] = 0
    return (x, inputs[1])


def _quiet_row(inputs: tuple, seed: int) -> tuple:
    x = inputs[0].clone()
    row = seed % x.shape[0]
    x[row] = x[row] * 1e-3
    return (x, inputs[1])


def _late_outlier(inputs: tuple, seed: int) -> tuple:
    """One element x300 at each row's end (an outlier channel): its square passes fp16's
    range, and it sits in the last chunk a chunked kernel reads."""
    x = inputs[0].clone()
    x[:, -1] = x[:, -1] * 300
    return (x, inputs[1])


CONDITIONS = (
    InputCondition("a zero row", "padding tokens are all zero: without eps, 0/0 is NaN",
                   _zero_row),
    InputCondition("large values", "100·randn: squares past fp16's 65504 unless accumulated "
                   "in fp32", lambda inputs, seed: (inputs[0] * 50, inputs[1])),
    InputCondition("a near-silent row", "one row at 1e-3 of the others: its mean square is "
                   "near eps, so eps must be added as the reference adds it, not only where "
                   "the row is exactly zero", _quiet_row),
    InputCondition("an outlier late in a row", "one element x300 in each row's last column "
                   "(an outlier channel): the mean square must be accumulated in fp32 over "
                   "every chunk, the last included", _late_outlier),
)

TASK = register(
    Task(
        name="rmsnorm",
        input_conditions=CONDITIONS,
        # the reference defines a NaN or an inf anywhere in x: a NaN row (an inf squared is
        # inf, its rsqrt 0, inf * 0 NaN)
        nonfinite=(math.nan, math.inf, -math.inf),
        float32_inputs=(1,),  # the weight, which mixed-precision models keep in float32
        leading_dims=(0,),  # x as a model passes it: (batch, seq, hidden)
        # eps as models set it: Llama 2/3 and Mistral 1e-5, Llama 1, Qwen2 and Gemma 1e-6,
        # BERT-style norms down to 1e-12
        scalar_args=(ScalarArg("eps", default=EPS, low=1e-12, high=1e-3, log=True,
                               typical=(1e-5, 1e-8)),),
        op_type="rmsnorm",
        description=(
            "RMSNorm with weight over the last dim of x (rows = batch*seq tokens, hidden), "
            "eps=1e-6, fp32 accumulation; y = x * rsqrt(mean(x^2) + eps) * weight."
        ),
        signature="run(x: Tensor[rows, hidden], weight: Tensor[hidden], eps=1e-6) -> "
        "Tensor[rows, hidden] (same dtype as x); rows may be several leading dimensions "
        "(batch, seq)",
        reference=reference,
        make_inputs=make_inputs,
        shape_names=("rows", "hidden"),
        # tokens = batch (1..32) x seq (128..4096); hidden of Llama-7B/8B (4096),
        # 13B (5120), 70B (8192), Qwen2-7B (3584), 1B-class (2048)
        sweep_shapes=(
            (128, 4096), (128, 2048), (1024, 5120), (4096, 4096),
            (4096, 8192), (16384, 3584), (32768, 4096), (65536, 8192),
        ),
        edge_shapes=((1, 1), (1, 7), (3, 1500), (7, 3584), (5, 4097), (2, 20000)),
        cpu_shapes=((8, 4096), (32, 5120)),
        # a 128k-token prefill at Llama-3.1-405B's hidden 16384: 2.15e9 elements
        wide_shape=(131200, 16384),
        # hidden sizes past the lists' 20000, to 64K, one row (decode) to many: a
        # reduction over a row's first chunks only is right on every listed row
        reach=Reach(spans=(range(1, 4097), range(20001, 2**16 + 1)), budget=((256, 65536),)),
        cpu_reach=Reach(spans=(range(1, 65), range(20001, 2**16 + 1)), budget=((8, 65536),)),
        dtypes=("float16", "bfloat16", "float32"),
        tolerances=ELEMENTWISE_TOLERANCES,
        bytes_moved=bytes_moved,
        flops=flops,
        template=TEMPLATE,
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
                    "persistent grid (SMs x 4 programs, grid-stride over rows): the weight "
                    "row is loaded once per program instead of once per row"),
            Variant("NATIVE_WEIGHT_MUL", (False, True), "precision",
                    "round the normalised row to the input dtype and multiply by the weight "
                    "in that dtype (HF Llama style): fewer fp32 registers, one more rounding"),
        ),
        related_ops=("softmax", "layernorm", "swiglu"),
        constraint=constraint,
        launch=launch,
        peers=peers,
        regimes=Regimes(dims=("rows",), inputs=((0, 0),), classes=(
            ("few_rows", 1024), ("many_rows", None)),
            reason="up to ~8 rows per SM a row per program leaves SMs idle (rows per "
                   "program and warps trade for occupancy); past that bandwidth decides"),
    )
)
