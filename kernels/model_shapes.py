"""The shapes each shipped task runs in a user's model, for prefill and decode.

Why: a kernel tuned on a task's round shapes can lose on the shapes a model calls (issue
48: the exported matmul at 0.65x cuBLAS on M=1, softmax at 0.47x on one row of a 128256
vocabulary). From a model's sizes (``model_config.ModelFacts``) and the batch sizes and
sequence lengths a user names, each task gets the shapes it runs there, labelled with the
step they come from, or one line saying why the model has none for it.

Prefill is ``batch x seq`` new tokens; decode one new token per sequence over a KV cache
of ``seq``. A matmul is the task's (M, N, K) = A [M, K] @ B [K, N], for the projections as
a serving engine fuses them (qkv, gate_up), and the LM head on the sampled token only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kernelkb.kernels.model_config import ModelFacts

Shape = tuple[int, ...]
MAY_BE_ZERO = ("cache_len",)  # dimensions a real call may have at 0 (a prefill's cache)


@dataclass(frozen=True)
class Use:
    """One shape of a task in the model and the step that calls it."""

    shape: Shape
    phase: str  # "prefill" or "decode"
    what: str  # e.g. "b=8 kv=2048", "qkv b=1 s=2048"


@dataclass(frozen=True)
class ModelShapes:
    """A task's shapes in one model; ``reason`` says why there are none."""

    task: str
    model: str
    uses: tuple[Use, ...] = ()
    reason: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def shapes(self) -> list[Shape]:
        """Each shape once, in the order of its first use (what the run tunes on)."""
        return list(dict.fromkeys(use.shape for use in self.uses))

    def labels(self, shape: Shape) -> list[str]:
        return list(dict.fromkeys(f"{u.phase} {u.what}" for u in self.uses if u.shape == shape))


@dataclass(frozen=True)
class Step:
    phase: str
    batch: int
    seq: int  # prefill: new tokens per sequence; decode: the KV cache's length
    tokens: int  # new tokens of the step (rows of the activations)
    label: str


def steps(batches: Sequence[int], seqs: Sequence[int]) -> Iterator[Step]:
    for phase in ("prefill", "decode"):
        for b in batches:
            for s in seqs:
                if phase == "prefill":
                    yield Step(phase, b, s, b * s, f"b={b} s={s}")
                else:
                    yield Step(phase, b, s, b, f"b={b} kv={s}")


def mlp_tokens(m: ModelFacts, tokens: int) -> int:
    """Rows one MLP (one expert's, under even routing) sees for ``tokens`` tokens."""
    return tokens if m.experts <= 1 else math.ceil(tokens * m.experts_per_token / m.experts)


def _rope_reason(m: ModelFacts) -> str | None:
    if not m.rope:
        return "the model has no rotary embedding (its config names no rope_theta or " \
               "rope_scaling)"
    if m.rope < 1:
        return f"the model rotates {m.rope:.0%} of each head; the task rotates all of it"
    return None


def _rmsnorm(m: ModelFacts, run: list[Step]) -> list[Use] | str:
    if not m.rms_norm:
        return "the model normalises with LayerNorm (its config names a LayerNorm " \
               "epsilon), not RMSNorm"
    return [Use((s.tokens, m.hidden), s.phase, s.label) for s in run]


def _swiglu(m: ModelFacts, run: list[Step]) -> list[Use] | str:
    if not m.gated:
        return f"the model's MLP activation is {m.activation}, not a SiLU gate (SwiGLU)"
    if m.intermediate is None:
        return "the config names no intermediate size"
    return [Use((mlp_tokens(m, s.tokens), m.intermediate), s.phase, s.label) for s in run]


def _softmax(m: ModelFacts, run: list[Step]) -> list[Use] | str:
    """Sampling (one row of the vocabulary per sequence), then an eager attention's score
    rows (a fused attention never writes them)."""
    uses = [Use((s.batch, m.vocab), s.phase, f"sampling b={s.batch}") for s in run]
    return uses + [Use((s.tokens * m.heads, s.seq), s.phase, f"attention scores {s.label}")
                   for s in run]


def _rope(m: ModelFacts, run: list[Step]) -> list[Use] | str:
    new = {"prefill": lambda s: s.seq, "decode": lambda s: 1}
    return _rope_reason(m) or [
        Use((s.batch, new[s.phase](s), m.heads, m.kv_heads, m.head_dim), s.phase, s.label)
        for s in run]


def _attention(m: ModelFacts, run: list[Step]) -> list[Use] | str:
    reason = _rope_reason(m)
    if reason:
        return f"the task applies RoPE inside attention; {reason}"
    return [Use((s.batch, m.heads, s.seq, 0, m.head_dim) if s.phase == "prefill" else
                (s.batch, m.heads, 1, s.seq, m.head_dim), s.phase, s.label) for s in run]


def _matmul(m: ModelFacts, run: list[Step]) -> list[Use] | str:
    q = m.heads * m.head_dim
    uses = []
    for s in run:
        rows = mlp_tokens(m, s.tokens)
        projections = [("qkv", (s.tokens, q + 2 * m.kv_heads * m.head_dim, m.hidden)),
                       ("o", (s.tokens, m.hidden, q))]
        if m.intermediate is not None:
            up = 2 * m.intermediate if m.gated else m.intermediate
            projections += [("gate_up" if m.gated else "up", (rows, up, m.hidden)),
                            ("down", (rows, m.hidden, m.intermediate))]
        uses += [Use(shape, s.phase, f"{name} {s.label}") for name, shape in projections]
        uses.append(Use((s.batch, m.vocab, m.hidden), s.phase, f"lm_head b={s.batch}"))
    return uses


def _notes(task: str, m: ModelFacts) -> tuple[str, ...]:
    notes = []
    if task == "attention" and m.kv_heads != m.heads:
        notes.append(f"the task keeps one KV head per query head (no GQA): the model's "
                     f"{m.kv_heads} KV heads run as {m.heads}")
    if task in ("swiglu", "matmul") and m.experts > 1:
        notes.append(f"{m.experts} experts, {m.experts_per_token} per token: the MLP shapes "
                     f"are one expert's even share, tokens x {m.experts_per_token} / "
                     f"{m.experts}")
    if task == "matmul" and m.intermediate is None:
        notes.append("the config names no intermediate size: no MLP projections")
    return tuple(notes)


# task name -> (the shape_names the derivation writes, the derivation)
DERIVE: dict[str, tuple[tuple[str, ...], Callable[[ModelFacts, list[Step]], list[Use] | str]]] = {
    "softmax": (("rows", "cols"), _softmax),
    "rmsnorm": (("rows", "hidden"), _rmsnorm),
    "swiglu": (("tokens", "inter"), _swiglu),
    "rope": (("batch", "seq", "heads", "kv_heads", "head_dim"), _rope),
    "attention": (("batch", "heads", "seq_new", "cache_len", "head_dim"), _attention),
    "matmul": (("M", "N", "K"), _matmul),
}


def model_shapes(task: Any, model: ModelFacts, batches: Sequence[int],
                 seqs: Sequence[int]) -> ModelShapes:
    """``task``'s shapes in ``model`` at each batch size and sequence length, each checked
    against the task (``check_shape``)."""
    known = DERIVE.get(task.name)
    if known is None or tuple(task.shape_names) != known[0]:
        return ModelShapes(task.name, model.name, reason=(
            f"no derivation for task {task.name} (shapes {' x '.join(task.shape_names)}); "
            f"kernelkb derives {', '.join(DERIVE)}: give shapes with --shapes"))
    found = known[1](model, list(steps(batches, seqs)))
    if isinstance(found, str):
        return ModelShapes(task.name, model.name, reason=found)
    for use in found:
        check_shape(task, use.shape)
    return ModelShapes(task.name, model.name, tuple(found), notes=_notes(task.name, model))


def check_shape(task: Any, shape: Shape) -> Shape:
    """``shape`` if the task can run it: its arity, whole sizes (above 0 but a cache's
    length), and the task's own regime and bytes-moved model accept it; ValueError else."""
    names = tuple(task.shape_names)
    if len(shape) != len(names) or not all(
            isinstance(v, int) and (v > 0 or (v == 0 and n in MAY_BE_ZERO))
            for n, v in zip(names, shape, strict=False)):
        raise ValueError(f"{'x'.join(map(str, shape))} is not a {' x '.join(names)} shape of "
                         f"{task.name} (whole sizes above 0)")
    import torch

    task.regime(shape)
    task.bytes_moved(shape, torch.float16)
    return shape


def parse_shapes(text: str, task: Any) -> list[Shape]:
    """"1x4096,2048x4096" -> [(1, 4096), (2048, 4096)], each checked; ValueError else."""
    shapes = []
    for part in text.split(","):
        if not re.fullmatch(r"\s*\d+(\s*x\s*\d+)*\s*", part):
            raise ValueError(f"{part.strip()!r} is not a shape: sizes joined by x, e.g. "
                             f"{'x'.join(str(s) for s in task.sweep_shapes[0])}")
        shapes.append(check_shape(task, tuple(int(v) for v in part.split("x"))))
    return list(dict.fromkeys(shapes))


def is_shape_list(text: str) -> bool:
    """A --shapes value that lists shapes rather than naming a set (sets have no digits)."""
    return any(c.isdigit() for c in text)


def sizes(text: str) -> list[int]:
    """"1,8,32" -> [1, 8, 32]: batch sizes or sequence lengths; ValueError else."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"{text!r}: whole numbers joined by commas, e.g. 1,8,32") from None
    if not values or min(values) <= 0:
        raise ValueError(f"{text!r}: sizes must be above 0")
    return list(dict.fromkeys(values))
