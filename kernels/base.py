"""The task model: what defines a kernel task, and nothing that finds or runs one.

A task is everything an optimizer needs to work on one op: the PyTorch reference (slow
but right), a correct naive Triton kernel (the starting point), an input maker, shapes
(a normal sweep and edge shapes) and their regimes, tolerances per dtype, a bytes / FLOPs
model for the roofline, and the knobs and structural variants an optimizer may turn.

A *candidate* is the source text of a Python module that defines ``run(*inputs)``, with
the same signature and result as the task's reference. Module-level constants in the
candidate's header (``BLOCK_SIZE = 1024``) are its configuration (``kernels.config``);
``Task.render`` builds a candidate for any point of the task's search space, so every
offline edit is a real source edit with a real diff.

The other jobs have their own modules, none of which imports this one: the registry and
where tasks come from (``discovery``), input conditions (``conditions``), scalar
arguments (``scalar_args``), shape regimes (``regimes``), dtypes (``dtypes``), what a
stored record says through its task (``records``), loading a candidate
(``candidate_loading``). Imports only torch: it runs on a bare GPU host.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelkb.kernels.conditions import (
    FLOAT32_INPUTS,
    NONFINITE,
    InputCondition,
    broadcast_rows,
    column_major,
    float32_weights,
    fused_apart,
    fused_buffer,
    grad_inputs,
    nonfinite_values,
    offset_views,
    strided_rows,
)
from kernelkb.kernels.config import Config, ConfigValue, header_constants, set_header_constants
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.reach import Reach
from kernelkb.kernels.regimes import SINGLE_REGIME, Regimes
from kernelkb.kernels.scalar_args import SCALAR_ARGS, ScalarArg, scalar_arguments
from kernelkb.kernels.shared.launch import Launch, vector_width
from kernelkb.kernels.validation import MISSING, TaskDefinitionError, validate

Shape = tuple[int, ...]

SCRATCH_PER_WARP = 1024  # shared memory of reductions / layout conversions, per warp


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    # Largest |signed mean error| / mean |reference| allowed: catches a small systematic
    # bias that stays under atol/rtol elementwise (the article's section 5.1).
    max_bias: float = 1e-3


# Row-wise and elementwise ops computed in fp32 and stored in the input dtype: the error
# is one rounding of the output, so the bounds follow each dtype's resolution.
ELEMENTWISE_TOLERANCES = {
    "float32": Tolerance(atol=1e-5, rtol=1e-5, max_bias=1e-5),
    "float16": Tolerance(atol=1e-3, rtol=1e-2, max_bias=2e-3),
    "bfloat16": Tolerance(atol=8e-3, rtol=2e-2, max_bias=1e-2),
}


@dataclass(frozen=True)
class Knob:
    """A numeric launch or tile parameter with its legal values (the grid to search)."""

    name: str
    values: tuple[ConfigValue, ...]
    category: str  # a KNOB_CATEGORIES entry: tiling, warps_stages, launch_shape, ...
    help: str = ""

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError(f"knob {self.name}: no legal values")


@dataclass(frozen=True)
class Variant:
    """A structural alternative, switched by a header constant (a tl.constexpr inside)."""

    name: str  # the header constant, e.g. ONLINE_SOFTMAX
    # first value = the naive kernel's choice; for a variant added to a task later, also
    # the kernel as it was before (Task.complete: stored configurations without it mean it)
    values: tuple[ConfigValue, ...]
    category: str  # a KNOB_CATEGORIES entry (kernels/shared/vocabulary.py)
    help: str  # what it does and why it may help, shown to agents and in reports


def generic_launch(task: Task, config: Config, shape: Shape, dtype: str = "float16") -> Launch:
    """A Launch from common knob names, for a task that does not define its own.

    Assumes: NUM_WARPS warps of 32 threads (4 if absent); each program produces the
    product of the positive BLOCK_* values (BLOCK_K excluded: a reduction step) times
    ROWS_PER_PROGRAM / HEADS_PER_PROGRAM elements, and the op writes as many elements as it
    reads (bytes_moved / 2 / element size), so programs = ceil(that / work per program);
    the tile (those elements in fp32, times NUM_STAGES) lives in registers. A BLOCK_* of 0
    ("whole row") counts as the last shape dimension. Wrong for ops whose output is not
    their input's size (a matmul): such a task should pass its own ``launch``.
    """
    cfg = {**task.default_config, **config}
    size = DTYPES[dtype].itemsize
    warps = int(cfg.get("NUM_WARPS", 4))
    stages = int(cfg.get("NUM_STAGES", 1))
    tile = 1
    for name, value in cfg.items():
        if name.startswith("BLOCK") and name != "BLOCK_K" and isinstance(value, int) \
                and not isinstance(value, bool):
            tile *= value if value > 0 else int(shape[-1])
    per_program = tile * int(cfg.get("ROWS_PER_PROGRAM", 1)) * int(cfg.get("HEADS_PER_PROGRAM", 1))
    total = max(1, task.bytes_moved(shape, DTYPES[dtype]) // (2 * size))
    return Launch(programs=max(1, math.ceil(total / per_program)), threads_per_program=warps * 32,
                  elements_per_program=min(per_program, total), bytes_per_element=size,
                  tile_bytes=tile * 4 * stages, num_stages=stages,
                  vector_width=vector_width(tile, warps * 32, size))


@dataclass(frozen=True)
class Task:
    """One op to optimize, declared in one file (README "Adding a task"). Every field is
    checked when the task is built (kernels/validation.py): a required one left out or a
    wrong one raises TaskDefinitionError naming the task and the field."""

    name: str = MISSING
    op_type: str = MISSING
    description: str = MISSING
    signature: str = MISSING  # run()'s signature as the agent should keep it, "run(x) -> y"
    reference: Callable[..., Any] = MISSING
    # make_inputs(shape, dtype, seed, device): seeded, drawn on the device itself (a CPU
    # draw of a 100M-element input costs seconds per input set on a GPU host)
    make_inputs: Callable[[Shape, torch.dtype, int, str], tuple[Any, ...]] = MISSING
    shape_names: tuple[str, ...] = MISSING  # e.g. ("rows", "cols")
    sweep_shapes: tuple[Shape, ...] = MISSING  # what a GPU run tunes and sweeps
    edge_shapes: tuple[Shape, ...] = MISSING  # size 1, non-powers of two, under a block
    cpu_shapes: tuple[Shape, ...] = MISSING  # small ones for the CPU interpreter
    dtypes: tuple[str, ...] = MISSING
    tolerances: Mapping[str, Tolerance] = MISSING
    bytes_moved: Callable[[Shape, torch.dtype], int] = MISSING
    flops: Callable[[Shape, torch.dtype], int] = MISSING
    # candidate module source (read_template: a real .py file); header constants = config
    template: str = MISSING
    knobs: tuple[Knob, ...] = MISSING
    variants: tuple[Variant, ...] = ()
    related_ops: tuple[str, ...] = ()  # for cross-task transfer in retrieval
    # A configuration is legal unless this says why not (e.g. a tile over smem budget).
    constraint: Callable[[Config], str | None] = field(default=lambda cfg: None)
    compute_bound: bool = False  # roofline: compare against FLOP/s rather than bytes/s
    # Indices of inputs the op writes on purpose (e.g. a KV cache): a checker runs the
    # reference and the candidate on separate clones and compares these inputs afterwards.
    mutated_inputs: tuple[int, ...] = ()
    # Shared memory one program of a configuration needs on a shape, in bytes, predicted
    # from its tiles, stages and dtype (0: a kernel that stages nothing there). Compared
    # with a GPU's per-block limit (kernels/resources.py) it marks points that cannot run.
    smem_bytes: Callable[[Config, Shape, torch.dtype], int] = field(
        default=lambda cfg, shape, dtype: 0)
    # launch(config, shape, dtype="float16") -> Launch: grid, threads, work and tile of a
    # configuration on a shape, for the learned ranker; None = generic_launch (knob names)
    launch: Callable[..., Launch] | None = field(default=None, repr=False, compare=False)
    # peers() -> [kernels.peers.Peer]: what a user would call instead of this kernel, timed
    # at the end of a GPU run; None = the reference eager and under torch.compile
    peers: Callable[[], Sequence[Any]] | None = field(default=None, repr=False, compare=False)
    # How shapes fall into regimes (row-length classes, M buckets, prefill vs decode): the
    # loop tunes each regime of the sweep and the exported kernel dispatches on it
    regimes: Regimes = SINGLE_REGIME
    # A sweep shape's weight in a round's objective (the weighted geometric mean of GPU
    # times): how often a model calls it, say. Edge shapes are checked, never timed.
    objective_weight: Callable[[Shape], float] = field(default=lambda shape: 1.0,
                                                       repr=False, compare=False)
    # Input conditions the op's users meet that the plain draw hides (large logits, a
    # zero row, positions that are not contiguous): every evaluation checks each one on
    # every shape besides the seeds (optimizer/sandbox/worker.py)
    input_conditions: tuple[InputCondition, ...] = ()
    # run()'s arguments past the tensors make_inputs gives (RMSNorm's eps), in run()'s order:
    # every evaluation also calls run() with them drawn over their legal range
    # (scalar_arguments), a condition added to the declared ones
    scalar_args: tuple[ScalarArg, ...] = ()
    # the op is also checked on rows of a wider buffer (strided_rows), a condition added to
    # the declared ones; False only for an op whose signature takes contiguous tensors
    strided_rows: bool = True
    # the judge also checks one shape no list names, drawn within the lists' bounds
    # (kernels/drawn_shapes.py); False only for an op whose shapes are a closed set
    drawn_shapes: bool = True
    # non-finite values the op's first float input may hold, with a result the reference
    # defines (nonfinite_values, a condition added to the declared ones): NaN by default;
    # () for an op whose answer there depends on the algorithm (attention: a NaN in a
    # key block a causal kernel skips)
    nonfinite: tuple[float, ...] = (math.nan,)
    # the judge also calls run() once with zero rows (the first shape dimension 0) where
    # the reference takes them; False only for an op whose first dimension is no batch
    empty_batch: bool = True
    # inputs callers may keep in float32 beside half-precision activations (a norm's
    # weight), which the reference takes: checked so (float32_weights, a condition
    # added to the declared ones)
    float32_inputs: tuple[int, ...] = ()
    # inputs whose rows the op takes as any leading dimensions (a model's (batch, seq,
    # hidden) activations), which the reference takes: the judge's last check calls the
    # op so (leading_dims)
    leading_dims: tuple[int, ...] = ()
    # the op takes input-free factors callers compute in PyTorch (RoPE's inverse
    # frequencies, cos/sin of positions), which a kernel may read as constants; elsewhere
    # a constant PyTorch computed that reaches an output is compute (the Triton-only rule)
    torch_constants: bool = False
    # one shape of a real model whose largest tensor holds more than 2**31 elements
    # (logits over a vocabulary, a long prefill, a deep KV cache), where 32-bit offset
    # arithmetic wraps: the GPU's judge checks the rows past that element there
    # (optimizer/sandbox/wide_offsets.py); None for an op no model takes that wide
    wide_shape: Shape | None = None
    # where the judge draws one shape past every list per evaluation (kernels/reach.py):
    # the op's longest dimension at the reach of the models it serves (a decode step over
    # a 128K-token cache, a row past every vocabulary, a K past the lists), the others
    # free; a kernel that stops short there or takes its short path only for some form
    # passes every shorter check (judge.check_reach)
    reach: Reach | None = None
    # the same under the interpreter, where a call costs seconds per 10K keys (None: the
    # reach as it is)
    cpu_reach: Reach | None = None
    # where the template was read from (read_template; None: written inline)
    template_path: str | None = field(default=None, init=False, compare=False)

    @property
    def params(self) -> tuple[Knob | Variant, ...]:
        """Every parameter of the space: the knobs, then the variants."""
        return (*self.knobs, *self.variants)

    def __post_init__(self) -> None:
        object.__setattr__(self, "template_path", getattr(self.template, "path", None))
        named = {c.name for c in self.input_conditions}
        generic = [make(self.mutated_inputs) for make in (
            (strided_rows, column_major, offset_views, broadcast_rows, fused_buffer,
             fused_apart)
            if self.strided_rows else ()) + (grad_inputs,)
            if make(self.mutated_inputs).name not in named]
        if self.nonfinite and NONFINITE not in named:
            # before the layouts: the latest call's inputs, which the partly repeated
            # check writes half of again, hold plain values (grad inputs come last)
            generic.insert(0, nonfinite_values(tuple(self.nonfinite), self.mutated_inputs))
        if self.float32_inputs and FLOAT32_INPUTS not in named:
            generic.append(float32_weights(tuple(self.float32_inputs)))
        if self.scalar_args and SCALAR_ARGS not in named:
            generic.insert(0, scalar_arguments(tuple(self.scalar_args),
                                               tuple(self.input_conditions)))
        object.__setattr__(self, "input_conditions", (*self.input_conditions, *generic))
        validate(self, DTYPES, header_constants)
        own = self.launch  # the task's launch sees a whole config (defaults filled in)
        object.__setattr__(self, "launch", lambda config, shape, dtype="float16": (
            own({**self.default_config, **config}, tuple(shape), dtype) if own else
            generic_launch(self, config, tuple(shape), dtype)))

    # -- search space -------------------------------------------------------------
    @property
    def default_config(self) -> dict[str, ConfigValue]:
        """The naive kernel's configuration, as written in the template."""
        header = header_constants(self.template)
        return {p.name: header[p.name] for p in self.params}

    def complete(self, config: Config) -> dict[str, ConfigValue] | None:
        """A stored configuration as a whole point of the space: a variant missing from it
        (added to the task after it was measured) takes its first value, which is the
        kernel as it was; None if a knob is missing or a name is not the task's."""
        names = {p.name for p in self.params}
        knobs = {k.name for k in self.knobs}
        if not set(config) <= names or not knobs <= set(config):
            return None
        return {**{v.name: v.values[0] for v in self.variants}, **config}

    def space(self, smem_limit: int | None = None) -> Iterator[dict[str, ConfigValue]]:
        """Every legal point of variants x knobs (the exhaustive grid); with a GPU's
        shared-memory limit per block, only the points that fit it."""
        params: tuple[Knob | Variant, ...] = (*self.variants, *self.knobs)
        for values in itertools.product(*(p.values for p in params)):
            cfg = dict(zip((p.name for p in params), values, strict=True))
            if self.why_illegal(cfg, smem_limit) is None:
                yield cfg

    def smem_need(self, config: Config, shapes: tuple[Shape, ...] | None = None,
                  dtypes: tuple[str, ...] | None = None) -> int:
        """The most shared memory ``config`` needs over shapes x dtypes (default: every
        shape and dtype of the task: a candidate must run them all): the task's model plus
        the scratch that reductions and layout conversions take (up to 1 KiB a warp, seen
        on the H200 for row reductions over unaligned rows)."""
        cfg = {**self.default_config, **config}
        shapes = shapes or (*self.edge_shapes, *self.sweep_shapes, *self.cpu_shapes)
        staged = max(self.smem_bytes(cfg, shape, DTYPES[d])
                     for shape in shapes for d in (dtypes or self.dtypes))
        return staged + SCRATCH_PER_WARP * int(cfg.get("NUM_WARPS", 4))

    def infeasible(self, config: Config, smem_limit: int | None,
                   shapes: tuple[Shape, ...] | None = None,
                   dtypes: tuple[str, ...] | None = None) -> str | None:
        """Why ``config`` cannot run on a GPU with ``smem_limit`` bytes of shared memory per
        block (None: it fits, or the limit is unknown)."""
        if smem_limit is None:
            return None
        need = self.smem_need(config, shapes, dtypes)
        if need <= smem_limit:
            return None
        return (f"needs {need // 1024} KiB of shared memory per program (predicted from its "
                f"tiles and stages), over the GPU's {smem_limit // 1024} KiB per block")

    def why_illegal(self, config: Config, smem_limit: int | None = None) -> str | None:
        """The task's constraint, then the GPU's shared memory: None if ``config`` may run."""
        return self.constraint(config) or self.infeasible(config, smem_limit)

    def render(self, config: Config) -> str:
        """Candidate source for a configuration: the template with its header rewritten."""
        known = {p.name: p for p in self.params}
        for name, value in config.items():
            if name not in known:
                raise KeyError(f"task {self.name}: unknown parameter {name}")
            if value not in known[name].values:
                raise ValueError(f"task {self.name}: {name}={value!r} not in {known[name].values}")
        reason = self.constraint({**self.default_config, **config})
        if reason:
            raise ValueError(f"task {self.name}: illegal config: {reason}")
        return set_header_constants(self.template, config)

    def shapes(self, which: str) -> tuple[Shape, ...]:
        """Shape sets by name: sweep, edge, cpu, all (= edge + sweep), representative
        (smallest, median and largest sweep shape by bytes moved) and tune (= edge +
        representative: what each optimizer round checks and times on a GPU, the whole
        sweep being kept for the end of a run)."""
        sets = {"sweep": self.sweep_shapes, "edge": self.edge_shapes, "cpu": self.cpu_shapes}
        if which == "all":
            return (*self.edge_shapes, *self.sweep_shapes)
        if which == "representative":
            by_size = sorted(self.sweep_shapes, key=lambda s: self.bytes_moved(s, torch.float16))
            return tuple(dict.fromkeys((by_size[0], by_size[len(by_size) // 2], by_size[-1])))
        if which == "tune":
            return (*self.edge_shapes, *self.shapes("representative"))
        return sets[which]

    def timed(self, shapes: list[Shape]) -> list[Shape]:
        """Of ``shapes``, those an evaluation times: edge shapes are for correctness (a few
        microseconds of launch overhead, they would outvote the shapes that matter in the
        geomean), timed only when asked alone."""
        edge = {tuple(s) for s in self.edge_shapes}
        return [s for s in shapes if tuple(s) not in edge] or list(shapes)

    def regime(self, shape: Shape) -> str:
        """The regime a shape falls in (``Regimes``: product of its dims vs the bounds)."""
        value = 1
        for dim in self.regimes.dims:
            value *= int(shape[self.shape_names.index(dim)])
        return self.regimes.of_value(value)

    def shapes_by_regime(self, shapes: tuple[Shape, ...] | list[Shape]) -> dict[str, list[Shape]]:
        """``shapes`` grouped by regime, in the task's regime order (empty ones left out)."""
        groups: dict[str, list[Shape]] = {name: [] for name in self.regimes.names}
        for shape in shapes:
            groups[self.regime(tuple(shape))].append(tuple(shape))
        return {name: group for name, group in groups.items() if group}

    def shape_label(self, shape: Shape) -> str:
        return ",".join(f"{n}={v}" for n, v in zip(self.shape_names, shape, strict=True))

    def parse_shape(self, label: str) -> Shape:
        """The inverse of shape_label: "rows=4,cols=128" -> (4, 128); ValueError else."""
        pairs = dict(part.split("=", 1) for part in label.split(",") if "=" in part)
        try:
            return tuple(int(pairs[name]) for name in self.shape_names)
        except (KeyError, ValueError):
            raise ValueError(f"task {self.name}: {label!r} is not a {self.shape_names} shape"
                             ) from None



# -- templates ------------------------------------------------------------------------
class TemplateText(str):
    """A kernel template's source text that remembers the file it was read from."""

    path: str

    def __new__(cls, text: str, path: str) -> TemplateText:
        made = super().__new__(cls, text)
        made.path = path
        return made

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]  # pickling
        return str(self), self.path


def read_template(anchor: str, name: str | None = None) -> TemplateText:
    """The kernel template of the task defined in file ``anchor`` (pass ``__file__``):
    ``templates/<name>.py`` beside it, ``name`` defaulting to that file's own name. A real
    .py file, so linters and editors see the kernel; read as text, its header constants
    rewritten for each configuration (``Task.render``)."""
    base = os.path.dirname(os.path.abspath(anchor))
    stem = name or os.path.splitext(os.path.basename(anchor))[0]
    path = os.path.join(base, "templates", stem if stem.endswith(".py") else f"{stem}.py")
    try:
        with open(path, encoding="utf-8") as handle:
            return TemplateText(handle.read(), path)
    except OSError as err:
        raise TaskDefinitionError(stem, "template", f"cannot read {path}: {err.strerror}"
                                  ) from None

