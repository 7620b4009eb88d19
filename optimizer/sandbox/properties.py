"""The judge's property-based draw: shapes across every bucket of the task's bounds, rows
that are not i.i.d., layouts callers pass; a failure shrunk to its smallest draw and kept.

Why: every other draw of the evaluator is a fixed list (the task's shapes, its declared
conditions) or stays in the power-of-two bucket of a listed shape, so a kernel right on
exactly those cases passes. Hypothesis draws a ``Case`` (a shape, a drawn condition of
kernels/draws.py, a seed) from the whole space, and when one fails it shrinks it to the
simplest that still fails (the smallest shape, the plainest condition): the case the
result names, and the one the host keeps (regressions.py) and asks first next time.

Cost: ``examples`` cases an evaluation (a few: each is one call of the candidate, and a
shape outside the lists' buckets is a new compilation on a GPU), a few more for kept
cases, and at most ``SHRINK_CALLS`` more to shrink a failure; a case not yet run once
``budget_s`` is spent counts as passing, so shrinking stops at the smallest seen.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kernelkb.kernels.conditions import GENERIC_CONDITIONS as GENERIC_LAYOUTS
from kernelkb.kernels.drawn_shapes import _kind
from kernelkb.kernels.draws import Draw, space_of

Shape = tuple[int, ...]
SHRINK_CALLS = 40  # calls spent shrinking a failure to its smallest case
EXAMPLES_CPU = 2  # drawn cases an evaluation, on the interpreter
EXAMPLES_GPU = 6  # and on a GPU
KEPT_MAX = 8  # kept cases asked first
SHARES = (0.5, 1.0, 0.0, 0.25, 0.75, 0.9)  # where a pattern sits in a row (first: simplest)
EVERY = (1, 2, 3)


@dataclass(frozen=True)
class Case:
    shape: Shape
    draw: Draw
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "condition": self.draw.name, "seed": self.seed}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Case:
        return cls(tuple(int(d) for d in data["shape"]), Draw.parse(str(data["condition"])),
                   int(data["seed"]))


class Found(Exception):
    """A case failed: ``error`` is what its check raised."""

    def __init__(self, case: Case, error: BaseException) -> None:
        super().__init__(str(error))
        self.case, self.error = case, error


def shapes(among: Sequence[Shape], declared: Sequence[Shape], fits: Callable[[Shape], bool],
           accepts: Callable[[Shape], bool]) -> Any:
    """Every dimension across every power-of-two bucket between the least and the largest
    value ``among`` gives it, a multiple of the declared values' common divisor (a flag or
    power-of-two dimension: the values given; one never varied: its value), halved to
    ``fits``, kept where ``accepts``."""
    from hypothesis import strategies as st

    columns = list(zip(*among, strict=True))
    named = {tuple(s) for s in (*declared, *among)}
    dims = []
    for i, column in enumerate(columns):
        kind = _kind(column, [s[i] for s in named])
        lo, hi = min(column), max(column)
        if kind == "fixed":
            dims.append(st.just(column[0]))
        elif kind in ("flag", "pow2"):
            dims.append(st.sampled_from(sorted(set(column))))
        else:  # a multiple of what every declared value divides by (RoPE's even head_dim)
            step = math.gcd(*[s[i] for s in named])
            dims.append(_bucketed(lo, hi, step))
    free = [i for i, c in enumerate(columns) if _kind(c, [s[i] for s in named]) == "range"]

    def fitted(shape: Shape) -> Shape:
        dims_ = list(shape)
        while not fits(tuple(dims_)):
            big = [i for i in free if dims_[i] > max(min(columns[i]), 1)]
            if not big:
                break
            i = max(big, key=lambda j: dims_[j])
            dims_[i] = max(min(columns[i]), dims_[i] // 2, 1)
        return tuple(dims_)

    return st.tuples(*dims).map(fitted).filter(lambda s: fits(s) and accepts(s))


def cases(task: Any, shape_strategy: Any) -> Any:
    """A shape, then a drawn condition over what the op's users pass (draws.SPACES) and the
    task's declared conditions, then a seed."""
    from hypothesis import strategies as st

    space = space_of(task)
    conditions = getattr(task, "input_conditions", ()) or ()
    # padded rows are drawn below, with any pad
    # the task's own conditions of the values; the layouts every task gets (strided
    # rows, column-major, offset views, broadcast rows, grad inputs) are checked on their
    # own, and a drawn layout laid over one of them is no input a caller passes
    declared = [None, *(c.name for c in conditions if c.name not in GENERIC_LAYOUTS)]
    layouts = [None, "padded", *([space.layout] if space.layout else [])]

    @st.composite
    def one(draw: Any) -> Case:
        shape = draw(shape_strategy)
        pattern = draw(st.sampled_from([None, *space.patterns]))
        layout = draw(st.sampled_from(layouts))
        chosen = Draw(
            declared=draw(st.sampled_from(declared)),
            pattern=pattern, input=space.input or 0,
            share=draw(st.sampled_from(SHARES)) if pattern else 0.5,
            value=draw(st.sampled_from(space.values)) if pattern else 0.0,
            every=draw(st.sampled_from(EVERY)) if pattern else 1,
            layout=layout, pad=draw(st.integers(1, 64)) if layout == "padded" else 16,
            layout_inputs=space.layout_inputs if layout == space.layout and layout else ())
        return Case(shape, chosen, draw(st.integers(0, 2**30)))

    return one()


def search(strategy: Any, check: Callable[[Case], None], *, examples: int, budget_s: float,
           kept: Sequence[Case] = ()) -> tuple[Case | None, int]:
    """(the smallest failing case, or None; the calls made). Kept cases are checked first
    (each that fails ends the search as it is); then ``examples`` drawn ones, shrunk."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable

    for case in kept:
        try:
            check(case)
        except Exception as err:  # noqa: BLE001 - the judge's failure, or the kernel's
            raise Found(case, err) from err
    seen: dict[Case, BaseException | None] = {}
    calls, deadline = [0], time.monotonic() + budget_s
    shrinking = [0]

    def run(case: Case) -> None:
        if case in seen:
            error = seen[case]
        elif shrinking[0] >= SHRINK_CALLS or (time.monotonic() > deadline and seen):
            return  # out of budget: counts as passing, so the smallest seen stays
        else:
            calls[0] += 1
            if any(e is not None for e in seen.values()):
                shrinking[0] += 1
            try:
                check(case)
                error = None
            except Exception as err:  # noqa: BLE001 - the judge's failure, or the kernel's
                error = err
            seen[case] = error
        if error is not None:
            raise Found(case, error)

    @settings(max_examples=max(1, examples), deadline=None, database=None, derandomize=False,
              phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck),
              report_multiple_bugs=False, print_blob=False)
    @given(strategy)
    def prop(case: Case) -> None:
        run(case)

    try:
        prop()
    except Found as found:
        return found.case, calls[0]
    except Unsatisfiable:
        pass
    return None, calls[0]


def budget(examples: int, on_gpu: bool) -> float:
    """Wall seconds the search may take before shrinking stops drawing new cases."""
    return (20.0 if on_gpu else 10.0) + (6.0 if on_gpu else 4.0) * examples


def label_of(task: Any, case: Case) -> str:
    return f"{task.shape_label(case.shape)} [{case.draw.name}]"


def examples_for(request: dict[str, Any], on_gpu: bool) -> int:
    """Cases a judge draws: the request's ``property_examples``, else a few (the CPU
    interpreter's calls cost seconds; a GPU's off-bucket shapes cost compilations)."""
    asked = request.get("property_examples")
    return int(asked) if asked is not None else (EXAMPLES_GPU if on_gpu else EXAMPLES_CPU)


def judge_search(judge: Any, seen: dict[str, Any]) -> None:
    """The search with the judge's worker and reference: each case one call of the
    candidate under no_grad, compared by the judge, on shapes no larger than the largest
    asked (bytes and FLOPs). A failure raises the judge's own (JudgeFailure) for the
    smallest case, whose dict is left in ``seen["property"]``."""
    import torch

    from kernelkb.optimizer.sandbox.judge import (
        DRAWN_MAX_BYTES,
        NEW_SHAPE_TIMEOUT_S,
        JudgeFailure,
        _input_bytes,
    )

    task, request = judge.task, judge.request
    on_gpu = torch.cuda.is_available()
    asked = [tuple(int(d) for d in s) for s in request["shapes"]]
    max_bytes = min(DRAWN_MAX_BYTES, max(_input_bytes(task, s, judge.dtype) for s in asked))
    max_flops = max(int(task.flops(s, judge.dtype)) for s in asked)
    examples = examples_for(request, on_gpu)
    kept = [Case.from_dict(c) for c in request.get("regressions") or []
            if _valid(task, c)][:KEPT_MAX]
    if examples <= 0 and not kept:
        return
    declared = [*task.sweep_shapes, *task.edge_shapes, *task.cpu_shapes]
    among = list(dict.fromkeys([*(tuple(s) for s in asked), *task.edge_shapes]))

    def fits(shape: Shape) -> bool:
        return _input_bytes(task, shape, judge.dtype) <= max_bytes \
            and int(task.flops(shape, judge.dtype)) <= max_flops

    accepted: dict[Shape, bool] = {}

    def accepts(shape: Shape) -> bool:
        if shape not in accepted:
            accepted[shape] = judge.reference_accepts(shape)
        return accepted[shape]

    def check(case: Case) -> None:
        label = label_of(task, case)
        condition = case.draw.condition(task)
        answer = judge.ask({"op": "run", "shape": list(case.shape), "seed": case.seed,
                            "label": label, "grad": "no_grad", "condition": condition.name},
                           timeout_s=NEW_SHAPE_TIMEOUT_S)
        judge.compare(case.shape, label, case.seed, judge.tensors(answer), condition,
                      "on a drawn case (property-based: shape, rows, layout), under no_grad")
        if judge.exited():
            raise JudgeFailure("crash", f"the worker ended on ({label})", label)

    strategy = cases(task, shapes(among, declared, fits, accepts))
    began = time.perf_counter()
    try:
        smallest, calls = search(strategy, check, examples=examples, kept=kept,
                                 budget_s=budget(examples, on_gpu))
    except Found as found:  # a kept case failed again
        smallest, calls = found.case, len(kept)
    record = seen.setdefault("property", {})
    record.update(examples=examples, kept=len(kept), calls=calls,
                  seconds=round(time.perf_counter() - began, 3))
    if smallest is None:
        return
    record["shrunk"] = smallest.to_dict()
    label = label_of(task, smallest)
    try:
        check(smallest)  # its failure, as the judge words it
    except JudgeFailure as failure:
        raise JudgeFailure(failure.kind, f"{failure} (the smallest failing draw of "
                           f"{calls} calls: kept as a regression case)", label) from None
    raise JudgeFailure("wrong_result", f"({label}) failed on a drawn case and passed when "
                       "asked again: a kernel whose answer depends on its calls", label)


def _valid(task: Any, data: Any) -> bool:
    try:
        case = Case.from_dict(data)
        case.draw.condition(task)
    except (KeyError, TypeError, ValueError):
        return False
    return len(case.shape) == len(task.shape_names)


def _bucketed(lo: int, hi: int, step: int) -> Any:
    """A size in [lo, hi], its power-of-two bucket drawn first (so every bucket is as
    likely as another), then a multiple of ``step`` in it."""
    from hypothesis import strategies as st

    def in_bucket(e: int) -> Any:
        return st.integers(max(lo, (1 << e >> 1) + 1), min(hi, 1 << e))

    def on_step(v: int) -> int:
        return max(lo, v - v % step)

    return st.integers((lo - 1).bit_length(), (hi - 1).bit_length()).flatmap(
        in_bucket).map(on_step)
