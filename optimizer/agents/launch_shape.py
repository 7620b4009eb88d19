"""Launch-shape moves: what to try first when the tuned shapes leave SMs idle.

Why: on small problems (a matmul at decode's M = 1..128, a few rows of softmax) the
naive tiling launches fewer programs than the GPU has SMs, and no single knob step
fixes that: split-K needs 16-row tiles, a deeper pipeline and a reduction that costs no
extra launch, each refused alone by the task's constraint. The offline agent's catalog
walks single edits (with one enabling change), so it reached those points late or never.

This module reads only the task's own ``launch(config, shape)`` (programs, kernels a
call launches) over the shapes the run tunes: a legal point of the space whose grid
fills the GPU better is a *fill move*, and the agent tries the best of them first, as a
whole jump, while the current best under-fills. Measurements still decide; after
``FILL_TRIES`` fill moves that did not win, the agent stops preferring them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kernelkb.kernels.base import Knob, Shape, Task, Variant
from kernelkb.kernels.config import Config, ConfigValue

FILLED = 2.0  # programs per SM at which a grid counts as full (one loads, one computes)
UNDER_FILLED = 0.75  # mean fill (FILLED = 1) under which the GPU idles: fill moves first
LAUNCH_COST = 0.25  # fill lost per extra kernel launch (on small shapes a launch costs
#                     about as much as the work)
MIN_GAIN = 0.1  # a fill move must raise the fill by at least this much
FILL_TRIES = 2  # fill moves that did not win, after which they are no longer preferred
TAG = "launch shape: "  # the summary prefix that marks a fill move in the run's history


@dataclass(frozen=True)
class FillMove:
    config: dict[str, ConfigValue]
    changes: dict[str, ConfigValue]  # the parameters it changes, catalog order
    fill: float  # the move's fill, after the cost of extra launches
    gain: float  # over the current best's


def programs_per_sm(task: Task, config: Config, shape: Shape, dtype: str, sms: int) -> float:
    """Programs per SM one call keeps busy (a persistent grid counts its cap)."""
    launch = task.launch(config, shape, dtype) if task.launch else None
    if launch is None:
        return 0.0
    programs = launch.programs
    if launch.programs_per_sm_cap:
        programs = min(programs, launch.programs_per_sm_cap * sms)
    return programs / sms


def fill(task: Task, config: Config, shapes: Sequence[Shape], dtype: str, sms: int) -> float:
    """Mean over shapes of min(programs per SM, FILLED) / FILLED, less LAUNCH_COST per
    kernel launched beyond the first."""
    total = 0.0
    for shape in shapes:
        per_sm = programs_per_sm(task, config, shape, dtype, sms)
        launches = getattr(task.launch(config, shape, dtype), "launches", 1) if task.launch \
            else 1
        total += min(per_sm, FILLED) / FILLED - LAUNCH_COST * (launches - 1)
    return total / len(shapes) if shapes else 0.0


def under_filled(task: Task, config: Config, shapes: Sequence[Shape], dtype: str,
                 sms: int | None) -> bool:
    """True when the config's mean fill over the shapes, each capped at FILLED programs
    per SM (a wide LM head must not hide idle SMs on the other projections), is under
    UNDER_FILLED."""
    if not shapes or not sms or task.launch is None:
        return False
    capped = [min(programs_per_sm(task, config, s, dtype, sms), FILLED) / FILLED
              for s in shapes]
    return sum(capped) / len(capped) < UNDER_FILLED


def fill_moves(task: Task, best: Config, shapes: Sequence[Shape], dtype: str,
               sms: int | None, smem_limit: int | None = None) -> list[FillMove]:
    """Legal points of the space that fill the GPU better than ``best`` on ``shapes``,
    best first: highest fill (in steps of 0.05), then fewest changes, then the nearest
    values (the catalog's distance, parameter by parameter). Empty when
    ``best`` does not under-fill."""
    if not under_filled(task, best, shapes, dtype, sms):
        return []
    assert sms is not None  # under_filled said so
    base = fill(task, best, shapes, dtype, sms)
    # the catalog's order: variants (split-K, its reduction) before knobs (tiles, stages)
    params: tuple[Knob | Variant, ...] = (*task.variants, *task.knobs)
    order = {p.name: i for i, p in enumerate(params)}
    moves = []
    for point in _space(task, smem_limit):
        if point == dict(best):
            continue
        gained = fill(task, point, shapes, dtype, sms)
        if gained - base < MIN_GAIN:
            continue
        changes = {k: point[k] for k in sorted(point, key=order.__getitem__)
                   if best.get(k) != point[k]}
        moves.append(FillMove(dict(point), changes, gained, gained - base))
    moves.sort(key=lambda m: (-round(m.fill * 20), len(m.changes),  # fill in 0.05 steps
                              [_distance(task, k, best.get(k), v) for k, v in m.changes.items()]))
    return moves


_SPACES: dict[tuple[int, int | None], tuple[Task, list[dict[str, ConfigValue]]]] = {}


def _space(task: Task, smem_limit: int | None) -> list[dict[str, ConfigValue]]:
    """The task's legal points, listed once per task and limit (the grid walk through
    the constraint takes a quarter second on matmul's 34560 points)."""
    key = (id(task), smem_limit)
    if key not in _SPACES or _SPACES[key][0] is not task:  # the task kept: ids stay unique
        _SPACES[key] = (task, list(task.space(smem_limit)))
    return _SPACES[key][1]


def failed_tries(history: Sequence[object]) -> int:
    """Fill moves of this run that did not win (their summaries carry TAG)."""
    return sum(1 for note in history if TAG in str(getattr(note, "summary", ""))
               and getattr(note, "verdict", "") != "improved")


def _distance(task: Task, name: str, old: ConfigValue | None, new: ConfigValue) -> int:
    values = next(p.values for p in task.params if p.name == name)
    here = values.index(old) if old in values else 0
    return abs(values.index(new) - here)
