"""Dense matmul C = A @ B in fp16 / bf16 with fp32 accumulation: the compute-bound task.

Search space: output tile (BLOCK_M x BLOCK_N) and K step (BLOCK_K); grouped program
order (GROUP_M > 1 walks GROUP_M tile rows together so that B tiles stay in L2);
warps and software-pipelining stages; an even-K specialisation (no K masks when
K % BLOCK_K == 0) and split-K (SPLIT_K programs share one output tile's K range and
add their fp32 partials, which gives small-M shapes, e.g. decode, more programs than
SMs), the partials met by a second summing kernel or, in one launch, by fp32 atomic adds
(SPLIT_REDUCE); and a persistent Hopper kernel (PERSISTENT_TMA) that loads and stores
tiles through TMA descriptors, with split-K summed inside it.
"""

from __future__ import annotations

import torch

from kernelkb.kernels.base import Knob, Shape, Task, Tolerance, Variant, read_template
from kernelkb.kernels.conditions import InputCondition
from kernelkb.kernels.config import Config
from kernelkb.kernels.discovery import register
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer
from kernelkb.kernels.reach import Reach
from kernelkb.kernels.regimes import Regimes
from kernelkb.kernels.shared.launch import Launch, cdiv, vector_width

TEMPLATE = read_template(__file__)  # kernels/templates/matmul.py: the naive kernel

# Hopper's shared memory per block (227 KiB), with headroom for the epilogue's scratch.
SMEM_BUDGET_BYTES = 200 * 1024


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fp32 matmul of the same operands, rounded once to the operand dtype."""
    return torch.matmul(a.float(), b.float()).to(a.dtype)


def make_inputs(
    shape: Shape, dtype: torch.dtype, seed: int, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """A and B with unit-variance entries of C: A is scaled by 1/sqrt(K)."""
    m, n, k = shape
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn((m, k), generator=gen, dtype=torch.float32, device=device) / k**0.5
    b = torch.randn((k, n), generator=gen, dtype=torch.float32, device=device)
    return a.to(device=device, dtype=dtype), b.to(device=device, dtype=dtype)


def bytes_moved(shape: Shape, dtype: torch.dtype) -> int:
    m, n, k = shape
    return (m * k + k * n + m * n) * torch.finfo(dtype).bits // 8  # A, B once; C once


def flops(shape: Shape, dtype: torch.dtype) -> int:
    m, n, k = shape
    return 2 * m * n * k


def smem_bytes(cfg: Config, shape: Shape, dtype: torch.dtype) -> int:
    """NUM_STAGES buffers of the A [BLOCK_M, BLOCK_K] and B [BLOCK_K, BLOCK_N] tiles.
    Exact on the H200 (Triton 3.6, benchmarks/space/matmul_float16.json) for 64- and
    128-row tiles; 16-row tiles (mma.sync path) keep one buffer fewer."""
    bm, bn, bk = int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"]), int(cfg["BLOCK_K"])
    staged = int(cfg["NUM_STAGES"]) * (bm * bk + bk * bn) * dtype.itemsize
    if cfg["PERSISTENT_TMA"] and tma_path(shape, dtype.itemsize):
        staged += bm * bn * dtype.itemsize  # the C tile, staged for the TMA store
    return staged


def tma_path(shape: Shape, size: int) -> bool:
    """Whether run() takes the TMA kernel on a shape (contiguous operands): TMA needs
    16-byte row strides; the tiled kernel runs otherwise."""
    _m, n, k = shape
    return (k * size) % 16 == 0 and (n * size) % 16 == 0


def constraint(cfg: Config) -> str | None:
    """Prune the grid to the points worth a GPU measurement (89 of 34560)."""
    bm, bn, bk = int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"]), int(cfg["BLOCK_K"])
    stages, warps = int(cfg["NUM_STAGES"]), int(cfg["NUM_WARPS"])
    split, group = int(cfg["SPLIT_K"]), int(cfg["GROUP_M"])
    reduce = str(cfg.get("SPLIT_REDUCE", "kernel"))
    if reduce != "kernel" and (split == 1 or cfg["PERSISTENT_TMA"]):
        return ("SPLIT_REDUCE picks how the tiled kernel's split-K partials meet: it needs "
                "SPLIT_K > 1 and no PERSISTENT_TMA (which sums its splits itself)")
    if cfg["PERSISTENT_TMA"]:
        return _tma_constraint(bm, bn, bk, stages, warps, split, group, bool(cfg["EVEN_K"]),
                               bool(cfg["FLATTEN"]))
    if cfg["FLATTEN"]:
        return "FLATTEN is a loop form of the persistent TMA kernel"
    if reduce == "atomic":
        return _atomic_constraint(bn, bk, stages, warps, bm, group, bool(cfg["EVEN_K"]))
    if split not in (1, 4):
        return ("split-K summed by a second kernel is measured at 4 ranges; 2, 8 and 16 "
                "ranges are for the one-launch atomic reduction (SPLIT_REDUCE='atomic')")
    smem = (bm * bk + bk * bn) * 2 * stages
    if smem > SMEM_BUDGET_BYTES:
        return f"{stages} stages of A/B tiles need {smem // 1024} KiB of shared memory"
    tile = bm * bn
    if tile <= 64 * 128 and warps != 4:
        return "tiles up to 64x128 are 4-warp tiles"
    if tile >= 128 * 256 and warps != 8:
        return "a 128x256 fp32 accumulator spills at 4 warps"
    if bk * stages < 128:
        return "keep at least 128 K elements in flight (BLOCK_K x NUM_STAGES >= 128)"
    if bk == 128 and (bm > 64 or bn > 64 or stages < 3):
        return ("a 128-deep K step is for small-M tiles up to 64x64 (3-4 stages), which "
                "stream a thin slab of B: fewer, longer loads keep more bytes in flight")
    if bm >= 64 and bn > 2 * bm:
        return "BLOCK_N over twice BLOCK_M starves the A side of reuse"
    if bm == 16 and group != 1:
        return "16-row tiles are for small M, which has a single tile row to group"
    if bm == 16 and split == 1 and bn < 128:
        return "16-row tiles without split-K need wide N tiles to do enough work"
    if split > 1 and (bm != 16 or bn > 128):
        return "split-K is for small M (16-row tiles up to 128 wide)"
    if bm == 16 and (stages == 2 or (bk == 32 and split == 1)):
        return ("16-row tiles stream B: 2 stages, or a 32-deep K step without split-K, keep "
                "too few bytes in flight (slowest of the 16-row points on the H200)")
    if split > 1 and (bk == 32 or cfg["EVEN_K"]):
        return ("split-K summed by a kernel: measured at 64- and 128-deep K steps without "
                "EVEN_K (its K ranges are short; the masks cost little)")
    if stages == 6 and (bm, bn, bk, warps) != (64, 64, 64, 4):
        return ("6 stages are for 64x64 tiles at a 64-deep K step: small-M shapes, bound by "
                "streaming B, keep 96 KiB of A/B in flight per program")
    if group > 1 and bm < 128 and not (bm == bn == bk == 64 and stages >= 4):
        return ("grouped order is for 128-row tiles and the deep-pipelined 64x64 tiles of "
                "small M (whose tile rows then read each B slab together)")
    if cfg["EVEN_K"] and (bk != 64 or stages != 3):
        return "EVEN_K is measured at BLOCK_K=64, 3 stages (one point per tile shape)"
    return None


def _atomic_constraint(bn: int, bk: int, stages: int, warps: int, bm: int, group: int,
                       even_k: bool) -> str | None:
    """The atomic split-K points: 16-row tiles (small M), no grouping (one tile row), the
    masked loop, and the tiles of ATOMIC_TILES at 2, 4, 8 or 16 K ranges."""
    if bm != 16 or group != 1:
        return "atomic split-K is for small M: 16-row tiles, a single tile row, no grouping"
    if even_k:
        return "atomic split-K is measured with the masked K loop (EVEN_K off)"
    if (bn, bk, stages, warps) not in ATOMIC_TILES:
        return f"atomic split-K tiles are {ATOMIC_TILES} (columns, K step, stages, warps)"
    return None


# (BLOCK_N, BLOCK_K, NUM_STAGES, NUM_WARPS) of the atomic split-K points (BLOCK_M 16):
# the summing kernel's best small-M tile (16x64, 4 stages of 64), its 128-deep K step
# (fewer, longer loads) and the 128-wide tile for the wide-N projections (fewer tiles)
ATOMIC_TILES = ((64, 64, 4, 4), (64, 128, 3, 4), (128, 64, 4, 4))


def _tma_constraint(bm: int, bn: int, bk: int, stages: int, warps: int, split: int,
                    group: int, even_k: bool, flatten: bool) -> str | None:
    """The persistent TMA kernel's 10 points: tiles that keep 96+ KiB of operands in flight
    (the H200 runs one such program per SM), the big ones walked in groups of 8 tile
    rows; split-K (4 ranges) for small M; the loop flattened on the two biggest tiles."""
    if even_k:
        return "TMA zero-fills past K: there are no K masks to drop"
    if bk != 64:
        return "TMA's K step is 64 (128-byte rows: the widest swizzle)"
    if split > 1:
        if split != 4:
            return "TMA split-K is measured at 4 K ranges"
        if group != 1 or flatten:
            return "TMA split-K is for small M: a single tile row, no grouping, no flattening"
        if (bm, bn, warps, stages) not in TMA_SPLIT_TILES:
            return f"TMA split-K tiles are {TMA_SPLIT_TILES} (rows, columns, warps, stages)"
        return None
    if group != 8:
        return "persistent programs walk the tiles in groups of 8 tile rows (L2 reuse of B)"
    tiles = TMA_FLAT_TILES if flatten else TMA_TILES
    if (bm, bn, warps, stages) not in tiles:
        return f"TMA tiles{' (flattened)' if flatten else ''} are {tiles} (rows, columns, " \
               "warps, stages)"
    return None


# (BLOCK_M, BLOCK_N, NUM_WARPS, NUM_STAGES) of the TMA points; 128x256 takes 3 stages of
# 48 KiB plus the 64 KiB C tile (213 KiB on the H200, of 227)
TMA_TILES = ((128, 256, 8, 3), (128, 128, 8, 4), (128, 128, 4, 4), (64, 128, 4, 4))
TMA_FLAT_TILES = ((128, 256, 8, 3), (128, 128, 8, 4))
TMA_SPLIT_TILES = ((128, 128, 8, 4), (128, 64, 4, 4), (64, 128, 4, 4), (64, 64, 4, 4))


def launch(cfg: Config, shape: Shape, dtype: str) -> Launch:
    """run()'s grid: one program per (BLOCK_M x BLOCK_N tile, K split); A and B tiles
    staged in shared memory NUM_STAGES deep, the fp32 accumulator in registers; with
    split-K, the grid of the kernel that sums the partials too."""
    m, n, k = shape
    size = DTYPES[dtype].itemsize
    bm, bn, bk = int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"]), int(cfg["BLOCK_K"])
    stages = int(cfg["NUM_STAGES"])
    splits = max(1, min(int(cfg["SPLIT_K"]), cdiv(k, bk)))
    smem = smem_bytes(cfg, shape, DTYPES[dtype])  # the fitted model the space uses
    threads = int(cfg["NUM_WARPS"]) * 32
    if cfg["PERSISTENT_TMA"] and tma_path(shape, size):
        # one kernel: a persistent grid of one program per SM over tiles x K splits (the
        # split-K sum happens inside it)
        return Launch(programs=cdiv(m, bm) * cdiv(n, bn) * splits, threads_per_program=threads,
                      elements_per_program=bm * bn, bytes_per_element=size,
                      tile_bytes=smem + bm * bn * 4, smem_bytes=smem, num_stages=stages,
                      vector_width=vector_width(bm * bk, threads, size), programs_per_sm_cap=1,
                      reduction_splits=splits)
    # with split-K, a second kernel sums the fp32 partials, 1024 outputs a program; the
    # atomic reduction adds them in the same launch
    atomic = splits > 1 and cfg.get("SPLIT_REDUCE", "kernel") == "atomic"
    summing = cdiv(m * n, 1024) if splits > 1 and not atomic else 0
    return Launch(programs=cdiv(m, bm) * cdiv(n, bn) * splits + summing,
                  threads_per_program=threads,
                  elements_per_program=bm * bn, bytes_per_element=size,
                  tile_bytes=smem + bm * bn * 4, smem_bytes=smem, num_stages=stages,
                  vector_width=vector_width(bm * bk, threads, size),
                  launches=2 if summing else 1, reduction_splits=splits)


def peers() -> list[Peer]:
    """cuBLAS, as torch.matmul calls it."""
    return [Peer("cuBLAS", torch.matmul, "torch.matmul (cuBLAS)")]


def _transposed_weight(inputs: tuple, seed: int) -> tuple:
    """B as ``W.t()`` of a row-major weight W [N, K], as ``x @ W.t()`` (a linear layer)
    passes it: the same values, strides (1, K)."""
    a, b = inputs[0], inputs[1]
    return (a, b.t().contiguous().t(), *inputs[2:])


def _past_half_range(inputs: tuple, seed: int) -> tuple:
    """Every eighth row of A (from a drawn first) at 60,000 in one drawn column k, and
    B's row k at 4 with its signs: those rows of C are +-240,000 plus a unit-scale sum,
    past float16's 65,504, so the reference rounds them to inf (red team 22: a kernel
    that clamped C to 65,504 hid the overflow a loss scaler looks for). One large term,
    exact in float32, and no value near the limit: many large terms cancel in a float32
    sum as differently as two summation orders round them, and a value near 65,520
    rounds to inf or not by the order."""
    a, b = inputs[0].clone(), inputs[1].clone()
    gen = torch.Generator(device="cpu").manual_seed(seed)
    first = int(torch.randint(0, min(8, a.shape[0]), (1,), generator=gen))
    k = int(torch.randint(0, a.shape[1], (1,), generator=gen))
    a[first::8, k] = 60000.0
    b[k] = torch.where(b[k] < 0, -4.0, 4.0).to(b.dtype)
    return (a, b, *inputs[2:])


CONDITIONS = (
    InputCondition("a transposed weight", "B is W.t() of a row-major weight, as a linear "
                   "layer passes it (strides (1, K)): a kernel that takes the column stride "
                   "for 1 reads the wrong elements", _transposed_weight),
    InputCondition("products past float16's range", "rows of C at +-240,000 (one large "
                   "term): inf in float16, as a scaled loss's gradient overflows for the "
                   "loss scaler to see; a clamp or a wrap hides it", _past_half_range),
)

TASK = register(
    Task(
        name="matmul",
        op_type="matmul",
        description="Dense C = A @ B (A [M, K], B [K, N]) in fp16 / bf16, fp32 accumulation.",
        signature="run(a: Tensor[M, K], b: Tensor[K, N]) -> Tensor[M, N] (same dtype)",
        reference=reference,
        make_inputs=make_inputs,
        shape_names=("M", "N", "K"),
        # LLM GEMMs: tokens (batch x seq) by hidden 4096 into the q/o, MLP up/down widths
        sweep_shapes=(
            (128, 4096, 4096), (1024, 4096, 4096), (4096, 4096, 4096),
            (1024, 11008, 4096), (4096, 14336, 4096), (2048, 4096, 11008),
            (16, 4096, 4096),
        ),
        edge_shapes=((1, 1, 1), (1, 4096, 4096), (1823, 781, 129), (7, 33, 65), (100, 3, 1000)),
        # the long K: a running sum kept in fp16 drifts past the tolerance only over many
        # K blocks (12 of 2048 elements at K=4096), never at K <= 128
        cpu_shapes=((64, 96, 128), (33, 70, 100), (32, 64, 4096)),
        # Llama-3-8B's vocabulary projection over 16800 tokens: the logits hold 2.15e9
        wide_shape=(16800, 128256, 4096),
        # K past the lists' 11008 to 128K (Llama 3.1 405B's down projection: 53248) at any
        # M (decode to a long prefill, a weight gradient) and N: a K loop that drops a tail
        # or stops at 32K is right on every listed K (red teams 20, 21)
        reach=Reach(spans=(range(1, 8193), range(16, 32769), range(11009, 2**17 + 1)),
                    budget=((2048, 8192, 65536),)),
        cpu_reach=Reach(spans=(range(1, 1025), range(16, 8193), range(11009, 2**16 + 1)),
                        budget=((32, 256, 32768), (1, 6144, 11100))),
        dtypes=("float16", "bfloat16"),
        # rounding of the output to the dtype dominates (half an ulp relative; the
        # outputs are ~N(0, 1)); the fp32 accumulation order adds far less
        tolerances={
            "float16": Tolerance(atol=2e-3, rtol=5e-3, max_bias=2e-3),
            "bfloat16": Tolerance(atol=1.6e-2, rtol=2e-2, max_bias=5e-3),
        },
        bytes_moved=bytes_moved,
        flops=flops,
        input_conditions=CONDITIONS,
        template=TEMPLATE,
        knobs=(
            Knob("BLOCK_M", (16, 64, 128), "tiling", "output rows per program"),
            Knob("BLOCK_N", (64, 128, 256), "tiling", "output columns per program"),
            Knob("BLOCK_K", (32, 64, 128), "tiling", "reduction step"),
            Knob("GROUP_M", (1, 8), "launch_shape",
                 "grouped program order: GROUP_M tile rows share B tiles while in L2"),
            Knob("NUM_WARPS", (4, 8), "warps_stages"),
            Knob("NUM_STAGES", (2, 3, 4, 6), "warps_stages",
                 "software pipelining of the K loop"),
        ),
        variants=(
            Variant("EVEN_K", (False, True), "specialization",
                    "drop the K bounds masks when K % BLOCK_K == 0 (the launcher checks and "
                    "falls back to the masked loop otherwise)"),
            Variant("SPLIT_K", (1, 2, 4, 8, 16), "algorithm",
                    "split the K loop over SPLIT_K programs per tile and sum fp32 partials: "
                    "more programs than SMs for small M (decode), at the cost of a partial "
                    "buffer and a sum"),
            Variant("SPLIT_REDUCE", ("kernel", "atomic"), "algorithm",
                    "how split-K partials meet: 'kernel' writes SPLIT_K fp32 planes that a "
                    "second kernel sums (two launches); 'atomic' adds them with fp32 atomics "
                    "into a kept zeroed workspace and the last split of each tile casts and "
                    "stores C and clears its part (one launch: small M, where a launch costs "
                    "as much as the work)"),
            Variant("PERSISTENT_TMA", (False, True), "algorithm",
                    "Hopper form: a persistent grid (one program per SM) walks the output "
                    "tiles in grouped order and moves A, B and C through TMA descriptors "
                    "(tl.make_tensor_descriptor: bulk tensor copies, no address math or "
                    "masks); with SPLIT_K the last split of a tile sums the partials in the "
                    "same kernel. Falls back to the tiled kernel where rows are not 16-byte "
                    "aligned"),
            Variant("FLATTEN", (False, True), "algorithm",
                    "persistent TMA kernel: flatten the tile loop and the K loop into one "
                    "(tl.range(flatten=True)) so software pipelining runs across tiles and "
                    "the next tile's loads overlap this tile's epilogue"),
        ),
        related_ops=("attention", "swiglu"),
        constraint=constraint,
        compute_bound=True,
        smem_bytes=smem_bytes,
        launch=launch,
        peers=peers,
        regimes=Regimes(dims=("M",), inputs=((0, 0),), classes=(
            ("skinny", 128), ("medium", 1024), ("large", None)),
            reason="M buckets: skinny M (decode, small batches) under-fills the GPU with "
                   "output tiles (small BLOCK_M, split-K); large M is compute-bound"),
    )
)
