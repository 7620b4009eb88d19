"""Row-wise fused softmax with fp32 accumulation.

Search space: whole row in registers (BLOCK_SIZE = 0) or a loop over column chunks,
with the chunked form either three passes (max, sum, write) or online (running max and
sum in one pass, then the write pass); rows per program; warps and stages; and a long-row
path (LONG_ROW_BLOCK): whole-row tiles for ordinary rows, while rows of 32768+ columns
(a vocabulary's logits), whose whole-row tile spills, go to a chunked two-pass kernel,
optionally with L2 residency hints (L2_HINTS) so the second pass re-reads from L2.
"""

from __future__ import annotations

import math
from typing import cast

import torch

from kernelkb.kernels.base import (
    ELEMENTWISE_TOLERANCES,
    Knob,
    Shape,
    Task,
    Tolerance,
    Variant,
    read_template,
)
from kernelkb.kernels.conditions import InputCondition
from kernelkb.kernels.config import Config, header_constants
from kernelkb.kernels.discovery import register
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, eager_and_compiled, liger_softmax, optional, softmax_eager
from kernelkb.kernels.reach import Reach
from kernelkb.kernels.regimes import Regimes
from kernelkb.kernels.shared.launch import Launch, cdiv, next_pow2, vector_width

TEMPLATE = read_template(__file__)  # kernels/templates/softmax.py: the naive kernel


# rows this long take the long-row path (when LONG_ROW_BLOCK > 0): the template's constant
LONG_ROW_COLS = int(header_constants(TEMPLATE)["LONG_ROW_COLS"])


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def make_inputs(shape: Shape, dtype: torch.dtype, seed: int, device: str) -> tuple[torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float32, device=device) * 3.0
    return (x.to(device=device, dtype=dtype),)


def bytes_moved(shape: Shape, dtype: torch.dtype) -> int:
    rows, cols = shape
    return 2 * rows * cols * torch.finfo(dtype).bits // 8  # read x once, write y once


def flops(shape: Shape, dtype: torch.dtype) -> int:
    rows, cols = shape
    return 5 * rows * cols  # max, sub, exp, sum, div per element


def constraint(cfg: Config) -> str | None:
    if cfg["BLOCK_SIZE"] == 0 and cfg["ONLINE"]:
        return "ONLINE only applies to chunked rows (BLOCK_SIZE > 0)"
    if cfg["BLOCK_SIZE"] == 0 and cfg["NUM_WARPS"] == 1:
        # the longest rows (128256 columns) would be 4096 fp32 values a thread, spilled;
        # on the H200 it did not finish compiling and running a 70000-column row in 240 s
        return "a whole row of the longest rows is too much for one warp's registers"
    if cfg["BLOCK_SIZE"] == 0 and cfg["NUM_STAGES"] != 1:
        return "NUM_STAGES only pipelines the chunk loop (BLOCK_SIZE > 0)"
    # the knobs compared below are integers (their Knob values); Config types any value
    if cast(int, cfg["BLOCK_SIZE"]) > 0 and cfg["ROWS_PER_PROGRAM"] != 1:
        return "chunking is for long rows, which fill a program each"
    if cfg["LONG_ROW_BLOCK"] and cfg["BLOCK_SIZE"] != 0:
        return "LONG_ROW_BLOCK switches whole-row tiles to chunks on long rows; BLOCK_SIZE " \
               "already chunks every row"
    if cfg["L2_HINTS"] and not cfg["LONG_ROW_BLOCK"]:
        return "L2_HINTS marks the long-row path's two passes (LONG_ROW_BLOCK > 0)"
    if cfg["LONG_ROW_BLOCK"] and cast(int, cfg["NUM_WARPS"]) < 8:
        return "a long-row chunk of 4096+ columns wants 8+ warps"
    if cfg["LONG_ROW_BLOCK"] and \
            cast(int, cfg["LONG_ROW_BLOCK"]) < 8 * 32 * cast(int, cfg["NUM_WARPS"]):
        return "a long-row chunk under 8 columns a thread leaves the loads too narrow"
    return None


def launch(cfg: Config, shape: Shape, dtype: str) -> Launch:
    """run()'s grid: one program per ROWS_PER_PROGRAM rows; a [block] fp32 row tile (the
    chunked forms keep running max / sum vectors beside it, online one more)."""
    rows, cols = shape
    size = DTYPES[dtype].itemsize
    threads = int(cfg["NUM_WARPS"]) * 32
    long_block = int(cfg["LONG_ROW_BLOCK"])
    if long_block and cols >= LONG_ROW_COLS:
        # softmax_long_row_kernel: one program a row; a [block] fp32 chunk in registers
        block = min(long_block, next_pow2(cols))
        return Launch(programs=rows, threads_per_program=threads, elements_per_program=cols,
                      bytes_per_element=size, tile_bytes=block * 4,
                      vector_width=vector_width(block, threads, size))
    whole = next_pow2(cols)
    block = whole if cfg["BLOCK_SIZE"] == 0 else min(int(cfg["BLOCK_SIZE"]), whole)
    single = block >= cols
    per_row = 2 if single or not cfg["ONLINE"] else 3
    return Launch(programs=cdiv(rows, int(cfg["ROWS_PER_PROGRAM"])), threads_per_program=threads,
                  elements_per_program=min(rows, int(cfg["ROWS_PER_PROGRAM"])) * cols,
                  bytes_per_element=size, tile_bytes=per_row * block * 4,
                  num_stages=1 if single else int(cfg["NUM_STAGES"]),
                  vector_width=vector_width(block, threads, size))




def peers() -> list[Peer]:
    """PyTorch eager and compiled, and Liger-Kernel's softmax."""
    return [*eager_and_compiled(softmax_eager), *optional(liger_softmax)]


def _masked_prefix(inputs: tuple, seed: int) -> tuple:
    """The first half of every row at -inf, as ``masked_fill(mask, -inf)`` leaves it."""
    x = inputs[0].clone()
    x[:, : x.shape[1] // 2] = float("-inf")
    return (x,)


def _masked_suffix(inputs: tuple, seed: int) -> tuple:
    """The last half of every row at -inf, as right padding filled with -inf leaves it."""
    x = inputs[0].clone()
    x[:, (x.shape[1] + 1) // 2:] = float("-inf")
    return (x,)


def _late_spike(inputs: tuple, seed: int) -> tuple:
    """One logit +100 in each row's last column: the row max is set late."""
    x = inputs[0].clone()
    x[:, -1] = 100.0
    return (x,)


def _grammar_mask(inputs: tuple, seed: int) -> tuple:
    """A constrained decoder's mask: eight allowed ids spread over each row (from a drawn
    offset), the rest -inf, so runs of -inf a row's eighth long lie between real logits
    (red team 22: a kernel that took the first all -inf chunk for the start of right
    padding zeroed every allowed id after it)."""
    x = inputs[0]
    n = x.shape[-1]
    gen = torch.Generator(device="cpu").manual_seed(seed)
    step = max(1, n // 8)
    first = int(torch.randint(0, step, (1,), generator=gen))
    allowed = torch.arange(first, n, step, device=x.device)
    masked = torch.full_like(x, float("-inf"))
    masked[..., allowed] = x[..., allowed]
    return (masked,)


CONDITIONS = (
    InputCondition("large logits", "40·randn logits: exp overflows fp32 past 88 unless the "
                   "row max is subtracted first", lambda inputs, seed: (inputs[0] * (40 / 3),)),
    InputCondition("offset logits", "every logit +100: softmax does not move, exp does",
                   lambda inputs, seed: (inputs[0] + 100,)),
    InputCondition("negative logits", "every logit -1e4, as an additive mask leaves a row: a "
                   "row max that counts the masked padding as 0 is 1e4 too high, every exp "
                   "underflows to 0 and the row divides 0 by 0 (at -100 the denormals hide it)",
                   lambda inputs, seed: (inputs[0] - 1e4,)),
    InputCondition("a masked prefix", "the first half of each row at -inf (a padding or "
                   "causal mask filled with -inf): exp(-inf - max) must be 0, and a row max "
                   "taken before the first real logit must not stay -inf", _masked_prefix),
    InputCondition("a masked suffix", "the last half of each row at -inf (right padding "
                   "filled with -inf): a row max read from the last columns is -inf there",
                   _masked_suffix),
    InputCondition("a spike late in a row", "one logit +100 in the last column: a chunked "
                   "pass whose running max and sum are not rescaled when a later chunk "
                   "raises the max is wrong", _late_spike),
    InputCondition("a grammar's mask", "eight allowed ids spread over each row, -inf "
                   "between them (constrained decoding: a grammar or JSON schema): runs of "
                   "-inf between real logits are no right padding", _grammar_mask),
)

TASK = register(
    Task(
        name="softmax",
        # the reference defines a NaN or +inf anywhere in a row (the row comes out NaN)
        # and a -inf (that entry is 0)
        nonfinite=(math.nan, math.inf, -math.inf),
        input_conditions=CONDITIONS,
        op_type="softmax",
        description="Row-wise softmax of a 2-D tensor (rows, cols), accumulating in fp32.",
        signature="run(x: Tensor[rows, cols]) -> Tensor[rows, cols] (same dtype); rows may be "
        "several leading dimensions (batch, seq)",
        leading_dims=(0,),
        reference=reference,
        make_inputs=make_inputs,
        shape_names=("rows", "cols"),
        # batch*seq rows (1..32 x 128..4096 tokens) by realistic widths (hidden / vocab)
        sweep_shapes=(
            (128, 4096), (1024, 4096), (4096, 4096), (8192, 8192),
            (32 * 1024, 1024), (4096, 32768), (1024, 128256), (1, 32000),
        ),
        edge_shapes=((1, 1), (1, 7), (3, 1823), (1823, 781), (5, 4097), (2, 70000)),
        cpu_shapes=((4, 128), (16, 1000)),
        # Llama 3's logits (vocabulary 128256) over 16800 tokens: 2.15e9 elements
        wide_shape=(16800, 128256),
        # rows from past the lists' longest to past every vocabulary (Gemma's 262,144), as
        # attention scores over a long context are, one row to a batch of them: a max over
        # a row's first 2**17 or 2**18 columns only is wrong there on the masked prefix's
        # row (red teams 19-21); the rows take the conditions of the values in turn from a
        # drawn one (every_condition.mixed)
        reach=Reach(spans=(range(1, 257), range(128257, 786433)), budget=((32, 786432),)),
        cpu_reach=Reach(spans=(range(1, 33), range(70001, 786433)), budget=((16, 786432),)),
        dtypes=("float16", "bfloat16", "float32"),
        # probabilities are small: float32 gets a tighter absolute bound than the others
        tolerances={**ELEMENTWISE_TOLERANCES,
                    "float32": Tolerance(atol=1e-6, rtol=1e-5, max_bias=1e-5)},
        bytes_moved=bytes_moved,
        flops=flops,
        template=TEMPLATE,
        knobs=(
            Knob("BLOCK_SIZE", (0, 1024, 4096), "tiling", "columns per tile (0 = whole row)"),
            Knob("NUM_WARPS", (1, 2, 4, 8, 16), "warps_stages"),
            Knob("NUM_STAGES", (1, 2), "warps_stages", "software pipelining of the chunk loop"),
            Knob("ROWS_PER_PROGRAM", (1, 2, 4), "launch_shape", "rows per program"),
        ),
        variants=(
            Variant("ONLINE", (False, True), "algorithm",
                    "online softmax: running max and rescaled sum in one pass over a chunked "
                    "row, so the row is read twice instead of three times"),
            Variant("LONG_ROW_BLOCK", (0, 4096, 8192, 16384), "algorithm",
                    "long rows (32768+ columns, e.g. a 128256-token vocabulary) leave the "
                    "whole-row tile, which spills there, for a chunked two-pass path: a "
                    "running row max and rescaled sum (one exp2 per element), then the "
                    "write pass over the chunks backwards (the last read are still in L2); "
                    "shorter rows keep the whole-row tile"),
            Variant("L2_HINTS", (False, True), "memory_layout",
                    "cache residency on the long-row path: pass 1's loads marked evict-last "
                    "so pass 2 re-reads the row from L2, pass 2's loads evict-first and its "
                    "stores streaming (.cs), so the output does not push the row out; on the "
                    "H200 4096x32768 went from 84% to 99% of the copy bandwidth"),
        ),
        related_ops=("rmsnorm", "attention"),
        constraint=constraint,
        launch=launch,
        peers=peers,
        # a whole row fits one program's registers up to a few thousand columns; past
        # ~16k it spills and a chunked (online) pass over the row wins
        regimes=Regimes(dims=("cols",), inputs=((0, 1),), classes=(
            ("short_rows", 2048), ("medium_rows", 16384), ("long_rows", None)),
            reason="row length decides whole-row tile vs chunked/online passes and how "
                   "many warps a row needs"),
    )
)
