"""The fast door into measurement: code the project generates, measured at GPU speed.

A configuration rendered from a task's own template (a point of its space) is the
project's code, not a model's or a user's: it needs the correctness checks and the
interleaved comparison, not the adversarial layers (jail, provenance, tamper, judge
process) that make the full judge cost 20 s a candidate. So a sweep:

1. **checks** every configuration in a pool of processes on every CPU core at once
   (compiling it into Triton's cache as it goes): the edge shapes, every shape of every
   regime, and each of the task's input conditions (strided rows, large or negative
   values, ...) on the edge and smallest shapes, against the task's reference;
2. **compares** each configuration that passed with its parent (the neighbour one knob
   closer to the naive kernel; the naive kernel where that neighbour failed), per shape
   regime, in this process on an otherwise idle GPU, one CUDA context for the whole
   space: every configuration of a regime is timed in shared rounds, in a fresh random
   order each pass (space_timing.py), and each pair's paired rounds give its ratio and
   95% interval by the judge's own rule (kernels/shared/comparison.py), so a point's
   verdict is the same rule as an agent's round; a parent is timed once for all its
   children.

Each point (configuration x regime x dtype) is one line of a JSONL journal, written as
it is measured: an interrupted sweep resumes where it stopped, and
``benchmarks/sweep_to_seeds.py`` turns journals into seed experiences. Without a GPU the
sweep checks correctness under the interpreter and times nothing.
"""

from __future__ import annotations

import functools
import json
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelkb.kernels.base import Knob, Shape, Task, Variant
from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.shared.comparison import Comparison
from kernelkb.optimizer import space_timing

if TYPE_CHECKING:
    from kernelkb.optimizer.compile_ahead import CompileAhead

log = logging.getLogger(__name__)

SEEDS = (0, 1, 2)  # input sets each shape is timed on (rotated call by call)
# the comparison's settings for generated code: the judge's calls a round and least
# rounds (with three calls a round, tiny kernels' quantised event times read 14 of 30
# A/A comparisons of swiglu as a change on the H200), fewer rounds at most; a regime's
# rounds stop after TIME_CAP_S a pair at most (then each interval is the one so far)
CALLS_PER_ROUND = 5
MIN_ROUNDS = 6
MAX_ROUNDS = 16
TIME_CAP_S = 3.0
# before a plan's rounds, seconds to wait for the GPU to hold no other process; then it is
# timed anyway (no more waits in that plan) and each point says the GPU was shared
QUIET_WAIT_S = 20.0
# GPU memory one check process may take, in multiples of the largest shape's bytes moved:
# the inputs, the output, the reference's output and its float32 intermediates (conditions
# run on the smallest shapes, float64 comparisons in bounded chunks). At 12 the H200 held
# 3-4 check processes for rmsnorm, swiglu and rope, and the checks were the sweep's
# bottleneck; a check that runs out of memory beside others is run again with fewer
CHECK_MEMORY_FACTOR = 6


def key(config: dict[str, Any]) -> str:
    """One configuration's stable name: its knobs, sorted."""
    return ",".join(f"{k}={v}" for k, v in sorted(config.items()))


def parent_of(task: Task, config: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """The neighbour one knob closer to the naive kernel and the knob that differs (the
    variants first, then the knobs, in the task's order); None for the naive kernel."""
    default = task.default_config
    order: tuple[Knob | Variant, ...] = (*task.variants, *task.knobs)
    changed = [p.name for p in order if config[p.name] != default[p.name]]
    if not changed:
        return None
    for name in changed:
        parent = {**config, name: default[name]}
        if task.constraint(parent) is None:
            return parent, name
    return dict(default), changed[0]


# -- phase 1: checks, in a pool (one process per core) -----------------------------------
def _fresh(task: Task, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Clones of the inputs the op writes (a KV cache), so every call starts alike."""
    return tuple(x.clone() if i in task.mutated_inputs else x for i, x in enumerate(inputs))


def check_config(task_name: str, dtype: str, config: dict[str, Any],
                 shapes: list[Shape], condition_shapes: list[Shape]) -> dict[str, Any]:
    """Correctness of one configuration of the task's template (``check_source``)."""
    return check_source(task_name, dtype, get_task(task_name).render(config), shapes,
                        condition_shapes)


def check_source(task_name: str, dtype: str, source: str, shapes: list[Shape],
                 condition_shapes: list[Shape]) -> dict[str, Any]:
    """Correctness of one kernel on ``shapes`` (plain inputs) and on ``condition_shapes``
    under each of the task's input conditions. Runs in a pool process: compiling here
    fills Triton's cache for the timing phase."""
    import torch

    task = get_task(task_name)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tol = task.tolerances[dtype]
    began = time.perf_counter()
    try:
        module = load_candidate(source, "sweep_candidate")
    except Exception as err:  # noqa: BLE001 - a template point that fails to import
        return {"ok": False, "error_kind": "compile_error", "error_message": str(err)[:400]}
    try:
        return _checked(task, module, tol, dtype, device, shapes, condition_shapes, began)
    finally:
        if device == "cuda":
            torch.cuda.empty_cache()  # the pool's processes share the GPU's memory


def _checked(task: Task, module: Any, tol: Any, dtype: str, device: str, shapes: list[Shape],
             condition_shapes: list[Shape], began: float) -> dict[str, Any]:
    from kernelkb.optimizer.sandbox import checks

    worst = 0.0
    for shape in shapes:
        label = task.shape_label(shape)
        base = task.make_inputs(shape, DTYPES[dtype], 0, device)
        cases = [("plain", base)]
        if shape in condition_shapes:
            cases += [(c.name, c.apply(base, 0)) for c in task.input_conditions]
        for name, inputs in cases:
            try:
                out = module.run(*_fresh(task, inputs))
                ref = task.reference(*_fresh(task, inputs))
                stats = checks.compare_outputs(out, ref, tol.atol, tol.rtol)
            except Exception as err:  # noqa: BLE001 - a compile or launch failure there
                kind = "out_of_memory" if "out of memory" in str(err) else \
                    "compile_error" if "compil" in type(err).__name__.lower() else \
                    "runtime_error"
                return {"ok": False, "error_kind": kind, "failing_shapes": [label],
                        "error_message": f"on ({label}, {name}): {err}"[:400]}
            problem = stats if isinstance(stats, str) else checks.shape_verdict(
                stats, tol.max_bias)
            if problem:  # said as the judge says it: how many elements, where, how far
                said = problem if isinstance(stats, str) else checks.describe_failure(
                    problem, f"{label}, {name}", stats, tol.max_bias)
                return {"ok": False, "error_kind": "wrong_result", "failing_shapes": [label],
                        "error_message": f"on {said}"[:400]}
            assert not isinstance(stats, str)
            worst = max(worst, stats.max_rel_err)
    return {"ok": True, "max_rel_err": worst, "check_s": round(time.perf_counter() - began, 3)}


def _pool_start(interpret: bool) -> None:
    """A pool process: quiet; on a host without a GPU the checks run in Triton's CPU
    interpreter (without it, every kernel failed with "0 active drivers")."""
    logging.basicConfig(level=logging.WARNING)
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"


# -- phase 2: the comparison, in this process --------------------------------------------
@dataclass
class Point:
    """One line of the journal: a configuration on one regime in one dtype."""

    task: str
    dtype: str
    regime: str
    config: dict[str, Any]
    parent: dict[str, Any] | None
    changed: str | None
    ok: bool
    error_kind: str | None = None
    error_message: str | None = None
    failing_shapes: list[str] | None = None
    max_rel_err: float | None = None
    comparison: Comparison | None = None
    shapes: list[str] | None = None
    measured_at: str = ""
    gpu_shared: str | None = None  # other processes on the GPU while it was timed
    # the code measured, the configuration's and its parent's (kernels.shared.hashing): a
    # point whose template renders other code now is stale (None: journaled before)
    source_hash: str | None = None
    parent_hash: str | None = None

    @property
    def id(self) -> str:
        return point_id(self.task, self.dtype, self.regime, self.config)

    def stale(self, task: Task) -> bool:
        """The template renders other code for this configuration or its parent than was
        measured (a fixed bug, a new knob's default): the point must be measured again."""
        return (self.source_hash is not None and self.source_hash != _code(task, self.config)) \
            or (self.parent_hash is not None and self.parent is not None
                and self.parent_hash != _code(task, self.parent))

    def to_json(self) -> str:
        row = {**self.__dict__,
               "comparison": self.comparison.to_dict() if self.comparison else None}
        return json.dumps(row, sort_keys=True)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Point:
        comparison = row.get("comparison")
        return cls(**{**row, "comparison": Comparison.from_dict(comparison)
                      if comparison else None})


@functools.lru_cache(maxsize=4096)
def _rendered_hash(task_name: str, config_json: str) -> str:
    from kernelkb.kernels.shared.hashing import source_hash

    return source_hash(get_task(task_name).render(json.loads(config_json)))


def _code(task: Task, config: dict[str, Any]) -> str:
    """The hash of the code ``config`` renders to now (cached: a journal asks per point)."""
    return _rendered_hash(task.name, json.dumps(config, sort_keys=True))


def measured(journal: Path, task: Task) -> tuple[dict[str, Any], dict[str, Point]]:
    """``read_journal`` less the stale points (``Point.stale``), which a sweep measures
    again and the seeds leave out."""
    header, done = read_journal(journal)
    return header, {pid: p for pid, p in done.items() if not p.stale(task)}


def read_journal(path: Path) -> tuple[dict[str, Any], dict[str, Point]]:
    """(the header, the points measured so far by id); a torn last line is dropped."""
    header: dict[str, Any] = {}
    points: dict[str, Point] = {}
    if not path.exists():
        return header, points
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line a killed sweep was writing
        if "header" in row:
            header = row["header"]
        else:
            point = Point.from_row(row)
            points[point.id] = point
    return header, points


class _Timer:
    """Modules by configuration and input sets by shape, loaded once for the sweep."""

    def __init__(self, task: Task, dtype: str) -> None:
        import torch

        from kernelkb.optimizer.sandbox.compare import GpuClock, settle

        self.task, self.dtype = task, dtype
        self.settled = settle()
        self.clock = GpuClock()
        self.modules: dict[str, Any] = {}
        self.timed_calls = 0
        self.inputs: dict[Shape, list[tuple[Any, ...]]] = {}
        self.torch_dtype = DTYPES[dtype]
        self.torch = torch

    def module(self, config: dict[str, Any]) -> Any:
        name = key(config)
        if name not in self.modules:
            self.modules[name] = load_candidate(self.task.render(config), "sweep_point")
        return self.modules[name]

    def calls(self, config: dict[str, Any], shapes: list[Shape]) -> dict[str, Callable[[], Any]]:
        from kernelkb.optimizer.sandbox.timing import rotating

        run = self.module(config).run
        out = {}
        for shape in shapes:
            if shape not in self.inputs:  # one set of copies for every arm: a call writes
                # its new tokens into the cache at the same places each time, and a copy
                # per arm held 80 configurations x 3 seeds of a long prefill's cache (out
                # of the H200's memory while timing attention)
                self.inputs[shape] = [
                    _fresh(self.task, self.task.make_inputs(shape, self.torch_dtype, s, "cuda"))
                    for s in SEEDS]
            out[self.task.shape_label(shape)] = rotating(run, self.inputs[shape])
        for call in out.values():  # loaded and launched once: no first-call cost timed
            call()
        self.torch.cuda.synchronize()
        return out

    def compare(self, config: dict[str, Any], incumbent: dict[str, Any],
                shapes: list[Shape]) -> Comparison:
        """One configuration against one incumbent, pairwise (the judge's comparison)."""
        from kernelkb.optimizer.sandbox.compare import compare

        return compare(self.calls(config, shapes), self.calls(incumbent, shapes),
                       self.weights(shapes), self.clock, calls=CALLS_PER_ROUND,
                       min_rounds=MIN_ROUNDS, max_rounds=MAX_ROUNDS, time_cap_s=TIME_CAP_S)

    def weights(self, shapes: list[Shape]) -> dict[str, float]:
        return {self.task.shape_label(s): self.task.objective_weight(s) for s in shapes}

    def time_regime(self, regime: str, points: list[Point], shapes: list[Shape]) -> None:
        """Every point of one regime that passed its checks against its parent, in shared
        rounds (space_timing.py): fills each point's comparison, or marks the point
        failed where its own configuration would not run on a timed shape."""
        wanted = [p for p in points if p.ok and p.parent is not None]
        configs = {key(c): c for p in wanted for c in (p.config, p.parent) if c is not None}
        arms: dict[str, dict[str, Callable[[], Any]]] = {}
        failed: dict[str, str] = {}
        for name, config in configs.items():
            try:
                arms[name] = self.calls(config, shapes)
            except Exception as err:  # noqa: BLE001 - fails on a timed shape only
                failed[name] = f"{type(err).__name__}: {err}"[:400]
        pairs = [(key(p.config), key(p.parent)) for p in wanted if p.parent is not None]

        def progress(done: int, still: int, total: int) -> None:
            log.info("%s %s %s: round %d, %d of %d pairs still open", self.task.name,
                     self.dtype, regime, done, still, total)

        timed = space_timing.measure(
            arms, [p for p in pairs if p[0] in arms and p[1] in arms], self.weights(shapes),
            self.clock, calls=CALLS_PER_ROUND, min_rounds=MIN_ROUNDS, max_rounds=MAX_ROUNDS,
            time_cap_s=TIME_CAP_S * max(1, len(pairs)), on_round=progress)
        failed.update(timed.failed)
        self.timed_calls += timed.calls
        for point, pair in zip(wanted, pairs, strict=True):
            point.comparison = timed.comparisons.get(pair)
            if pair[0] in failed:
                point.ok, point.error_kind = False, "runtime_error"
                point.error_message = f"while timing: {failed[pair[0]]}"[:400]


@dataclass
class SweepPlan:
    """What one sweep measures: a task's configurations x regimes in one dtype."""

    task: Task
    dtype: str
    configs: list[dict[str, Any]]
    regimes: dict[str, list[Shape]]
    edge_shapes: list[Shape] | None = None  # checked, never timed (default: the task's)

    @classmethod
    def of(cls, task_name: str, dtype: str, regimes: Iterable[str] | None = None,
           limit: int | None = None, shapes: str = "sweep") -> SweepPlan:
        task = get_task(task_name)
        if dtype not in task.dtypes:
            raise ValueError(f"task {task.name} has no dtype {dtype!r} (it has "
                             f"{', '.join(task.dtypes)})")
        groups = task.shapes_by_regime(task.shapes(shapes))
        wanted = list(regimes) if regimes else list(groups)
        unknown = [r for r in wanted if r not in groups]
        if unknown:
            raise ValueError(f"task {task.name}: no shapes in regime(s) {unknown} (it has "
                             f"{', '.join(groups)})")
        configs = list(task.space())
        if limit is not None:  # the naive kernel first: every point's last resort
            default = task.default_config
            configs = [default, *[c for c in configs if c != default][:max(0, limit - 1)]]
        return cls(task, dtype, configs, {r: groups[r] for r in wanted})

    @property
    def points(self) -> int:
        return len(self.configs) * len(self.regimes)


def _check_shapes(plan: SweepPlan) -> tuple[list[Shape], list[Shape]]:
    """Every shape a point must be right on, and those checked under each condition
    (the edge shapes and each regime's smallest: a condition's bug shows on any size)."""
    task = plan.task
    timed = [s for shapes in plan.regimes.values() for s in shapes]
    edges = list(task.edge_shapes if plan.edge_shapes is None else plan.edge_shapes)
    every = list(dict.fromkeys([*edges, *timed]))
    smallest = [min(shapes, key=lambda s: task.bytes_moved(s, DTYPES[plan.dtype]))
                for shapes in plan.regimes.values()]
    return every, list(dict.fromkeys([*edges, *smallest]))


def run_sweep(plan: SweepPlan, journal: Path, *, workers: int | None = None,
              on_point: Callable[[Point, int, int], None] | None = None) -> list[Point]:
    """Check every configuration of ``plan`` in a pool, then compare each that passed
    with its parent on each regime (on a GPU). Appends each point to ``journal`` as it is
    measured and skips points already there. Returns every point of the plan."""
    return measure(prepare(plan, journal, workers=workers), on_point)


def run_sweeps(jobs: list[tuple[SweepPlan, Path]], *, workers: int | None = None,
               on_point: Callable[[Point, int, int], None] | None = None
               ) -> Iterator[list[Point]]:
    """``run_sweep`` for each (plan, journal) in turn, each plan's points as it ends. On a
    GPU the next plan's configurations compile on the cores this plan's checks leave
    (their number is bounded by the GPU's memory) while it is checked and timed
    (compile_ahead.py): its checks then find Triton's cache warm."""
    import torch

    ahead: CompileAhead | None = None
    for n, (plan, journal) in enumerate(jobs):
        if ahead is not None:
            ahead.stop()  # what it has not compiled, the checks compile
        ahead = None
        if n + 1 < len(jobs) and torch.cuda.is_available():
            ahead = _compile_ahead(*jobs[n + 1], spare=_cores() - 1 - _fit_workers(
                plan.task, plan.dtype, _check_shapes(plan)[0], workers or _cores() - 1))
        yield measure(prepare(plan, journal, workers=workers), on_point)
    if ahead is not None:
        ahead.stop()


def _compile_ahead(plan: SweepPlan, journal: Path, spare: int) -> CompileAhead | None:
    """The plan's configurations not yet journaled, compiling in ``spare`` processes (one
    at least)."""
    from kernelkb.optimizer.compile_ahead import CompileAhead

    every, conditioned = _check_shapes(plan)
    configs = _todo(plan, measured(journal, plan.task)[1])
    if not configs:
        return None
    return CompileAhead(plan.task.name, plan.dtype, configs, every, conditioned,
                        max(1, spare))


@dataclass
class Prepared:
    """A plan after its checks: what is left to time, and where it goes."""

    plan: SweepPlan
    journal: Path
    done: dict[str, Point]
    todo: list[dict[str, Any]]
    checked: dict[str, dict[str, Any]]


def _todo(plan: SweepPlan, done: dict[str, Point]) -> list[dict[str, Any]]:
    """The plan's configurations with a regime not yet in the journal."""
    return [c for c in plan.configs
            if any(point_id(plan.task.name, plan.dtype, r, c) not in done for r in plan.regimes)]


def prepare(plan: SweepPlan, journal: Path, *, workers: int | None = None) -> Prepared:
    """Phase 1: the journal's header (once), then the checks of every configuration not
    yet measured, its parent and the naive kernel."""
    import torch

    task, dtype = plan.task, plan.dtype
    timed_here = torch.cuda.is_available()
    from kernelkb.optimizer.sandbox import detect_environment, neighbours

    header, done = measured(journal, task)
    env = detect_environment()
    _same_device(journal, header, env)
    journal.parent.mkdir(parents=True, exist_ok=True)
    if not header:
        with journal.open("a") as handle:
            handle.write(json.dumps({"header": {
                "task": task.name, "dtype": dtype, "env": env,
                "timed": timed_here, "started_at": _now(),
                "gpu_shared": neighbours.shared_note() if timed_here else None,
                "settings": {"calls_per_round": CALLS_PER_ROUND, "min_rounds": MIN_ROUNDS,
                             "max_rounds": MAX_ROUNDS, "time_cap_s": TIME_CAP_S,
                             "rounds": "shared by the regime's configurations"}}}) + "\n")
    todo = _todo(plan, done)
    every, conditioned = _check_shapes(plan)
    checked = dict(_checked_from(done, task.name, dtype, plan))
    default = task.default_config
    # a configuration's parent and the naive kernel are checked too, measured or not: a
    # share of the space (one GPU's of several) compares with the same incumbents
    parents = [step[0] for step in map(functools.partial(parent_of, task), todo) if step]
    needed = {key(c): c for c in [*todo, default, *parents]}
    checked.update(_check_all(task.name, dtype,
                              [c for k, c in needed.items() if k not in checked],
                              every, conditioned, workers))
    if not checked.get(key(default), {}).get("ok"):
        raise RuntimeError(f"{task.name}: the naive kernel fails its own checks: "
                           f"{checked.get(key(default))}")
    return Prepared(plan, journal, done, todo, checked)


def check_resumable(journal: Path) -> None:
    """ValueError where ``journal`` was begun on another device (before anything runs)."""
    from kernelkb.optimizer.sandbox import detect_environment

    _same_device(journal, read_journal(journal)[0], detect_environment())


def _same_device(journal: Path, header: dict[str, Any], env: dict[str, Any]) -> None:
    """A journal resumes only on the device that began it: its points are compared with
    parents timed there, and one journal is one GPU's landscape to the seeds."""
    began_on = (header.get("env") or {}).get("gpu_name")
    if began_on and began_on != env.get("gpu_name"):
        raise ValueError(f"{journal} was measured on {began_on}; this is "
                         f"{env.get('gpu_name')}: give this device its own --out folder")


def measure(prepared: Prepared, on_point: Callable[[Point, int, int], None] | None = None
            ) -> list[Point]:
    """Phase 2: every point left, compared with its parent per regime (on a GPU; without
    one, journaled correct and untimed)."""
    import torch

    plan, journal, done = prepared.plan, prepared.journal, prepared.done
    task, dtype = plan.task, plan.dtype
    timer = _Timer(task, dtype) if torch.cuda.is_available() else None
    total, count = plan.points, len(done)
    wait_s = QUIET_WAIT_S
    with journal.open("a") as handle:
        if journal.stat().st_size and not journal.read_bytes().endswith(b"\n"):
            handle.write("\n")  # end the line a killed sweep left torn
        for regime, shapes in plan.regimes.items():
            points = [_point(task, dtype, regime, shapes, config, prepared.checked)
                      for config in prepared.todo
                      if point_id(task.name, dtype, regime, config) not in done]
            if timer is not None and points:
                from kernelkb.optimizer.sandbox import neighbours

                shared = neighbours.quiet_window(wait_s)
                wait_s = 0.0 if shared else wait_s
                timer.time_regime(regime, points, shapes)
                shared = shared or neighbours.shared_note()  # one that came while it ran
                for point in points:
                    point.gpu_shared = shared
            for point in points:
                handle.write(point.to_json() + "\n")
                handle.flush()
                done[point.id] = point
                count += 1
                if on_point:
                    on_point(point, count, total)
    return [p for p in done.values() if p.task == task.name and p.dtype == dtype]


def _point(task: Task, dtype: str, regime: str, shapes: list[Shape], config: dict[str, Any],
           checked: dict[str, dict[str, Any]]) -> Point:
    """A point with its check's outcome and its incumbent: the parent, or the naive
    kernel where the parent failed its checks."""
    verdict = checked[key(config)]
    step = parent_of(task, config)
    parent, changed = step if step else (None, None)
    if parent is not None and not checked.get(key(parent), {}).get("ok"):
        parent = dict(task.default_config)
    return Point(task.name, dtype, regime, config, parent, changed,
                 ok=bool(verdict.get("ok")), error_kind=verdict.get("error_kind"),
                 error_message=verdict.get("error_message"),
                 failing_shapes=verdict.get("failing_shapes"),
                 max_rel_err=verdict.get("max_rel_err"),
                 shapes=[task.shape_label(s) for s in shapes], measured_at=_now(),
                 source_hash=_code(task, config),
                 parent_hash=_code(task, parent) if parent is not None else None)


def merge_points(journal: Path, header: dict[str, Any], part_header: dict[str, Any],
                 points: Iterable[Point], done: dict[str, Point]) -> dict[str, Any]:
    """A worker's points (a GPU's, a cluster share's) into the sweep's journal, each point
    once (a share delivered twice adds nothing); its header first where the journal has
    none yet. Returns the journal's header."""
    journal.parent.mkdir(parents=True, exist_ok=True)
    with journal.open("a") as handle:
        if not header and part_header:
            handle.write(json.dumps({"header": part_header}) + "\n")
            header = part_header
        for point in points:
            if point.id not in done:
                handle.write(point.to_json() + "\n")
                done[point.id] = point
    return header


def point_id(task: str, dtype: str, regime: str, config: dict[str, Any]) -> str:
    return f"{task}|{dtype}|{regime}|{key(config)}"


def _checked_from(done: dict[str, Point], task: str, dtype: str, plan: SweepPlan
                  ) -> Iterator[tuple[str, dict[str, Any]]]:
    """Check outcomes a resumed sweep already journaled (any regime of the config)."""
    for point in done.values():
        if point.task == task and point.dtype == dtype:
            yield key(point.config), {"ok": point.ok, "error_kind": point.error_kind,
                                      "error_message": point.error_message,
                                      "failing_shapes": point.failing_shapes,
                                      "max_rel_err": point.max_rel_err}


def _check_all(task: str, dtype: str, configs: list[dict[str, Any]], every: list[Shape],
               conditioned: list[Shape], workers: int | None) -> dict[str, dict[str, Any]]:
    """Phase 1 over a pool of ``workers`` processes (default: every core but one, fewer
    where the GPU's memory would not hold them). A check that ran out of memory beside
    the others is run again with a quarter of them, then alone: the memory it lacked may
    have been theirs, and an out-of-memory verdict must be the configuration's own."""
    workers = _fit_workers(get_task(task), dtype, every,
                           workers or max(1, _cores() - 1))
    out: dict[str, dict[str, Any]] = {}
    todo = configs
    for size in dict.fromkeys((workers, max(1, workers // 4), 1)):
        if not todo:
            break
        out.update(_check_pool(task, dtype, todo, every, conditioned, size))
        todo = [c for c in todo if out[key(c)].get("error_kind") == "out_of_memory"]
    return out


def _fit_workers(task: Task, dtype: str, shapes: list[Shape], workers: int) -> int:
    import torch

    if not torch.cuda.is_available():
        return workers
    need = CHECK_MEMORY_FACTOR * max(task.bytes_moved(s, DTYPES[dtype]) for s in shapes)
    free, _ = torch.cuda.mem_get_info()
    return max(1, min(workers, int(0.8 * free / max(1, need))))


def _check_pool(task: str, dtype: str, configs: list[dict[str, Any]], every: list[Shape],
                conditioned: list[Shape], workers: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    began = time.perf_counter()
    import torch

    context = multiprocessing.get_context("spawn")  # CUDA does not survive a fork
    with ProcessPoolExecutor(max_workers=min(workers, len(configs)), mp_context=context,
                             initializer=_pool_start,
                             initargs=(not torch.cuda.is_available(),)) as pool:
        futures: dict[Future[dict[str, Any]], dict[str, Any]] = {
            pool.submit(check_config, task, dtype, c, every, conditioned): c for c in configs}
        for n, future in enumerate(as_completed(futures), 1):
            config = futures[future]
            try:
                out[key(config)] = future.result()
            except Exception as err:  # noqa: BLE001 - the pool process died (a crash)
                out[key(config)] = {"ok": False, "error_kind": "crash",
                                    "error_message": str(err)[:400]}
            if n % 25 == 0 or n == len(configs):
                log.info("%s %s: checked %d/%d with %d processes (%.1f configurations/s)",
                         task, dtype, n, len(configs), workers,
                         n / max(1e-9, time.perf_counter() - began))
    return out


def _cores() -> int:
    return os.cpu_count() or 2


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def describe(point: Point) -> str:
    """One line for the progress log."""
    label = f"{point.regime:12s} {key(point.config)}"
    if not point.ok:
        return f"{label}: {point.error_kind}"
    c = point.comparison
    if not c:
        return f"{label}: correct (untimed)"
    return (f"{label}: {c.ratio:.3f}x vs parent [{c.low:.3f}, {c.high:.3f}] "
            f"{c.outcome.value} ({c.rounds} rounds, +/-{c.half_width:.1%})"
            f"{' (GPU shared)' if point.gpu_shared else ''}")
