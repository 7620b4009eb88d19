"""Read-only views of the store beyond one query, as the web pages show them: the op x GPU
grid (GPUs apart from the CPU interpreter), per-regime figures of runs, configurations
measured by tuning sweeps (imported data: measurements, not edits), the comparison of
GPUs for one op, and the configuration landscape of (op, GPU, shape).

Why here, on the read side: they shape data for a page (fastest first, spreads, knob
differences) and read only columns where they can, so a store of 100k imported rows stays
quick: the measured times come from the ``time_ms`` column, counts and quantiles from
window queries (SQLite and PostgreSQL alike), and only each group's fastest rows are
loaded as records. The doors reach them through ``LocalKnowledge.views``
(``StoreViews``), which opens a session per view.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import case, cast, func, or_
from sqlmodel import Session, col, select

from kernelkb.kb import queries
from kernelkb.kb.models import Experience, Hardware, Run
from kernelkb.kb.queries import load_or_skip
from kernelkb.kb.record import ExperienceRecord
from kernelkb.retrieval.hardware import gpu_similarity
from kernelkb.retrieval.ranker import default_facts
from kernelkb.retrieval.untimed import asks_for_interpreter, on_hardware

TOP = 5  # fastest configurations shown per measurement source
SOURCES_SHOWN = 30
CANDIDATES = 10  # fastest rows per (GPU, run, regime) that the comparison loads
SHAPES_SHOWN = 40
FAILED = ("failed", "incorrect")


def spread_of(record: ExperienceRecord) -> float | None:
    """The largest IQR / median over the record's timed shapes (None: no repeats known)."""
    shares = [t.iqr_ms / t.median_ms for t in record.feedback.timings
              if t.iqr_ms is not None and t.median_ms > 0]
    return max(shares) if shares else None


# -- the index: GPUs are not the interpreter ----------------------------------------
@dataclass(frozen=True)
class Grid:
    gpus: list[str]  # hardware, the CPU interpreter left out
    interpreters: list[str]  # gpu names of the CPU interpreter's rows (correctness only)
    ops: list[str]
    counts: dict[tuple[str, str], int]


def op_gpu_grid(session: Session) -> Grid:
    rows = session.exec(select(Experience.gpu_name, Experience.arch, Experience.op_type,
                               func.count())
                        .group_by(Experience.gpu_name, Experience.arch,
                                  Experience.op_type)).all()
    counts: dict[tuple[str, str], int] = defaultdict(int)
    gpus: set[str] = set()
    interpreters: set[str] = set()
    ops: set[str] = set()
    for gpu, arch, op, n in rows:
        counts[(str(gpu), str(op))] += int(n)
        ops.add(str(op))
        (interpreters if asks_for_interpreter(gpu, arch) else gpus).add(str(gpu))
    return Grid(sorted(gpus), sorted(interpreters - gpus), sorted(ops), dict(counts))


# -- runs: figures per regime ---------------------------------------------------------
@dataclass(frozen=True)
class RegimeBest:
    regime: str
    rounds: int  # its records, the final sweep left out
    best: float | None  # best measured speedup vs the reference


def run_regime_best(session: Session, run_ids: Iterable[str]) -> dict[str, list[RegimeBest]]:
    """Per run that tuned several regimes: its rounds and best measured speedup vs the
    reference per regime, in the order the run tuned them. Runs of one regime (or none
    recorded) are left out: their single figure is the run's. A record over several
    regimes ("a+b") is no regime's round (a shape set that spans them)."""
    ids = list(run_ids)
    if not ids:
        return {}
    rows = session.exec(
        select(  # type: ignore[call-overload]  # sqlmodel's select() types 4 columns at most
            Experience.run_id, Experience.regime,
            func.max(case((col(Experience.evidence) == "measured",
                           Experience.speedup_vs_baseline), else_=None)),
            func.sum(case((col(Experience.round_kind) != "sweep", 1), else_=0)),
            func.min(Experience.created_at))
        .where(col(Experience.run_id).in_(ids), col(Experience.regime).is_not(None),
               Experience.regime != "", ~col(Experience.regime).contains("+"))
        .group_by(Experience.run_id, Experience.regime)).all()
    out: dict[str, list[tuple[Any, RegimeBest]]] = defaultdict(list)
    for run_id, regime, best, rounds, first in rows:
        out[run_id].append((first, RegimeBest(str(regime), int(rounds or 0),
                                              None if best is None else float(best))))
    return {run_id: [b for _, b in sorted(groups, key=lambda g: (g[0], g[1].regime))]
            for run_id, groups in out.items() if len(groups) > 1}


# -- measurements: configurations a tuning sweep timed ----------------------------------
def measurement_rows() -> Any:
    """SQL condition: a configuration measured by a tuning sweep, not a round of an
    optimizer run: imported data (no parent kernel) and the project's own space and
    variant measurements (agent "sweep"; each point also an edit of the naive kernel)."""
    return (col(Experience.round_kind) == "sweep") & \
        or_(col(Experience.parent_hash).is_(None), col(Experience.agent) == "sweep")


@dataclass
class Fastest:
    record: ExperienceRecord
    spread: float | None  # IQR / median, the worst shape


QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


@dataclass
class Source:
    run_id: str
    label: str = ""
    agent: str = ""
    shape_set: str = ""
    dtype: str = ""
    edits: bool = False  # its points have a parent kernel (counted as edits too)
    configs: int = 0
    failed: int = 0
    timed: int = 0
    orphans: int = 0  # configurations with no parent kernel (imported)
    quantiles: dict[float, float] = field(default_factory=dict)  # of the measured times
    fastest: list[Fastest] = field(default_factory=list)

    def q(self, at: float) -> float | None:
        """The measured time at quantile ``at`` (nearest rank), one of QUANTILES."""
        return self.quantiles.get(at)

    def box(self) -> tuple[float, float, float, float, float] | None:
        """min, quartiles and max of time / fastest (the plot's box)."""
        points = [self.q(at) for at in (0.0, 0.25, 0.5, 0.75, 1.0)]
        if any(p is None for p in points) or not points[0]:
            return None
        low = points[0]
        return tuple(round(v / low, 6) for v in points)  # type: ignore[operator,return-value]


@dataclass(frozen=True)
class Measurements:
    sources: list[Source]
    total: int  # configurations (rows) over every source
    unparented: int  # of them with no parent kernel (not counted as edits)
    more_sources: int  # sources not shown


def _filters(op: str | None, gpu: str | None, triton: str | None) -> list[Any]:
    where = []
    for column, value in ((Experience.op_type, op), (Experience.gpu_name, gpu),
                          (Experience.triton_version, triton)):
        if value is not None:
            where.append(column == value)
    if not asks_for_interpreter(gpu, None):
        where.append(on_hardware())
    return where


# the importers' agents whose file is one problem size (one shape set per run id): the
# JSON of their rows need not be read to tell sources apart (kb/importers/kernel_tuner.py
# and t4.py AGENT; named here so the pages do not load every importer)
ONE_SHAPE_PER_FILE = ("kernel_tuner", "t4")


def shape_set_column(session: Session) -> Any:
    """SQL expression: the record's ``task.shape_set`` (what its times were measured on:
    an imported Triton autotune cache holds several shapes, one record each), read from
    its JSON; "" for the formats of one problem size per file (reading the JSON of 100k
    Kernel Tuner rows would triple the query)."""
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import JSONB

        shape = cast(Experience.record_json, JSONB)["task"]["shape_set"].astext
    else:
        shape = func.json_extract(Experience.record_json, "$.task.shape_set")
    return case((col(Experience.agent).in_(ONE_SHAPE_PER_FILE), ""), else_=func.coalesce(shape, ""))


Key = tuple[str, str, str]  # run id, dtype, shape set: one source of comparable times
# quantiles as k / 20, so a rank is integer arithmetic, the same in SQL and here
QUANTILE_TWENTIETHS = {0.0: 0, 0.1: 2, 0.25: 5, 0.5: 10, 0.75: 15, 0.9: 18, 1.0: 20}


def _rank_at(q: float, n: Any) -> Any:
    """The 1-based rank of quantile ``q`` among ``n`` sorted values (nearest rank, half
    up); ``n`` an int, or a SQL integer expression (whose integer division floors a
    non-negative number in SQLite and PostgreSQL alike)."""
    k = QUANTILE_TWENTIETHS[q]
    return (2 * k * (n - 1) + 20) // 40 + 1


def measurements(session: Session, op: str | None, gpu: str | None,
                 triton: str | None = None, top: int = TOP) -> Measurements:
    """Sources (an imported file's shape, a space measurement: times that compare) of
    the configurations measured under the filters: how many, how many failed, the spread
    of the measured times and the ``top`` fastest, largest source first.

    One pass in SQL: a window per source ranks its times (untimed rows last) and counts
    its rows; only the rows at the quantiles' ranks and the fastest come back, so 100k
    imported rows never reach Python."""
    where = [measurement_rows(), *_filters(op, gpu, triton)]
    timed = (col(Experience.evidence) == "measured") & col(Experience.time_ms).is_not(None)
    base = select(  # type: ignore[call-overload]  # sqlmodel's select() types 4 columns at most
        Experience.id, Experience.run_id, Experience.dtype,
        shape_set_column(session).label("shape_set"),
        Experience.time_ms, case((timed, 1), else_=0).label("timed"),
        case((col(Experience.verdict).in_(FAILED), 1), else_=0).label("failed"),
        case((col(Experience.parent_hash).is_(None), 1), else_=0).label("orphan")
    ).where(*where).subquery()
    part = (base.c.run_id, base.c.dtype, base.c.shape_set)
    ranked = select(  # type: ignore[call-overload]  # sqlmodel's select() types 4 columns at most
        base.c.id, *part, base.c.time_ms,
        func.row_number().over(partition_by=part, order_by=(
            base.c.timed.desc(), base.c.time_ms, base.c.id)).label("rank"),
        func.count().over(partition_by=part).label("configs"),
        func.sum(base.c.timed).over(partition_by=part).label("n"),
        func.sum(base.c.failed).over(partition_by=part).label("failed"),
        func.sum(base.c.orphan).over(partition_by=part).label("orphans")).subquery()
    r = ranked.c
    picked = or_(r.rank <= max(top, 1), *(r.rank == _rank_at(q, r.n) for q in QUANTILES))
    found: dict[Key, Source] = {}
    keep: dict[str, Key] = {}  # ids of the rows to load: the fastest, one per source
    for exp_id, run_id, dtype, shape_set, time_ms, rank, configs, n, failed, orphans in \
            session.exec(select(  # type: ignore[call-overload]  # sqlmodel: 4 columns at most
                r.id, r.run_id, r.dtype, r.shape_set, r.time_ms, r.rank,
                r.configs, r.n, r.failed, r.orphans).where(picked)).all():
        key = (str(run_id), str(dtype), str(shape_set))
        source = found.get(key)
        if source is None:
            source = found[key] = Source(key[0], shape_set=key[2], dtype=key[1],
                                         configs=int(configs), failed=int(failed or 0),
                                         timed=int(n or 0), orphans=int(orphans or 0))
        if rank <= source.timed:
            for q in QUANTILES:
                if rank == _rank_at(q, source.timed):
                    source.quantiles[q] = float(time_ms)
        if rank <= max(top, 1):
            keep[exp_id] = key
    if not found:
        return Measurements([], 0, 0, 0)
    ranked_sources = sorted(found.items(), key=lambda kv: (-kv[1].configs, kv[0]))
    shown = dict(ranked_sources[:SOURCES_SHOWN])
    keep = {i: k for i, k in keep.items() if k in shown}
    rows = session.exec(select(Experience).where(col(Experience.id).in_(list(keep))))\
        .all() if keep else []
    for row in sorted(rows, key=lambda row: (row.time_ms is None, row.time_ms, row.id)):
        record = load_or_skip(row)
        if record is None:
            continue
        source = shown[keep[row.id]]
        if not source.label:
            source.label = record.provenance.source or row.run_id
            source.agent = record.provenance.agent
            source.edits = record.edit.parent_hash is not None
            source.shape_set = source.shape_set or record.task.shape_set
        if record.evidence == "measured" and len(source.fastest) < top:
            source.fastest.append(Fastest(record, spread_of(record)))
    return Measurements(list(shown.values()), sum(s.configs for s in found.values()),
                        sum(s.orphans for s in found.values()),
                        max(0, len(found) - SOURCES_SHOWN))


def _ranked(where: list[Any], partition: Sequence[Any]) -> Any:
    """Ids of the measured rows under ``where`` with their rank by time in ``partition``."""
    rank = func.row_number().over(partition_by=list(partition),
                                  order_by=(col(Experience.time_ms), col(Experience.id))
                                  ).label("rank")
    return select(Experience.id, rank).where(
        *where, Experience.evidence == "measured",
        col(Experience.time_ms).is_not(None)).subquery()


# -- the comparison of GPUs for one op --------------------------------------------------
@dataclass(frozen=True)
class GpuColumn:
    gpu_name: str
    arch: str
    hardware_id: str
    sm_count: int | None
    mem_bandwidth_gbps: float | None
    smem_per_sm_kib: int | None
    measured: int  # measured experiences of the op on it
    swept: int  # of them, configurations of a tuning sweep (imported or the project's)


@dataclass(frozen=True)
class Cell:
    """The fastest configuration measured on one GPU for one shape."""

    config: dict[str, Any]
    median_ms: float
    iqr_ms: float | None
    exp_id: str


@dataclass(frozen=True)
class Difference:
    shape: str
    knobs: list[tuple[str, list[tuple[str, Any]]]]  # knob, (gpu, its value in the best)


@dataclass(frozen=True)
class Comparison:
    op: str
    gpus: list[GpuColumn]
    shapes: list[str]  # measured on the most GPUs first
    cells: dict[tuple[str, str], Cell]  # (shape, gpu)
    differences: list[Difference]  # shapes timed on two GPUs or more
    knob_values: dict[str, dict[str, list[tuple[Any, int]]]]  # knob -> gpu -> (value, shapes)
    similarity: dict[tuple[str, str], float]
    more_shapes: int

    def cell(self, shape: str, gpu: str) -> Cell | None:
        return self.cells.get((shape, gpu))


def compare_ops(session: Session) -> list[str]:
    """Ops with a measured experience on hardware (the comparison page's choices)."""
    return sorted(str(op) for op in session.exec(
        select(Experience.op_type).where(Experience.evidence == "measured", on_hardware())
        .distinct()).all())


def _gpu_columns(session: Session, where: list[Any]) -> tuple[list[GpuColumn], dict[str, Any]]:
    """The GPUs, most measurements first, and their hardware rows by id."""
    per_gpu = session.exec(
        select(  # type: ignore[call-overload]  # sqlmodel's select() types 4 columns at most
            Experience.gpu_name, Experience.arch, Experience.hardware_id, func.count(),
            func.sum(case((measurement_rows(), 1), else_=0)))
        .where(*where).group_by(Experience.gpu_name, Experience.arch,
                                Experience.hardware_id)).all()
    hardware = {h.id: h for h in session.exec(select(Hardware).where(
        col(Hardware.id).in_([hw for _, _, hw, _, _ in per_gpu]))).all()}
    gpus = []
    for gpu, arch, hw_id, n, swept in per_gpu:
        h = hardware.get(hw_id)
        gpus.append(GpuColumn(str(gpu), str(arch), str(hw_id), h.sm_count if h else None,
                              h.mem_bandwidth_gbps if h else None,
                              h.smem_per_sm_kib if h else None, int(n), int(swept or 0)))
    return sorted(gpus, key=lambda g: (-g.measured, g.gpu_name)), hardware


def _fastest_cells(session: Session, where: list[Any]) -> dict[tuple[str, str], Cell]:
    """(shape, gpu) -> the fastest configuration timed there, over each group's
    ``CANDIDATES`` fastest rows (group: GPU, run, regime, dtype, shape set: records whose
    times compare; a record timed on several shapes counts on each)."""
    shape = shape_set_column(session)  # an imported file holds a record per shape
    ranked = _ranked(where, (Experience.hardware_id, Experience.run_id, Experience.regime,
                             Experience.dtype, shape))
    rows = session.exec(select(Experience).join(ranked, ranked.c.id == Experience.id)
                        .where(ranked.c.rank <= CANDIDATES)).all()
    best: dict[tuple[str, str, str], Cell] = {}  # (shape, dtype, gpu)
    for row in sorted(rows, key=lambda r: r.id):
        record = load_or_skip(row)
        if record is None or record.feedback.suspect:
            continue
        assert record.id is not None  # a loaded record's id is filled by its validator
        for t in record.feedback.timings:
            key = (t.shape, record.task.dtype, record.env.gpu_name)
            held = best.get(key)
            if held is None or t.median_ms < held.median_ms:
                best[key] = Cell(dict(record.edit.config), t.median_ms, t.iqr_ms, record.id)
    several = len({dtype for _, dtype, _ in best}) > 1  # then a row is a shape and a dtype
    return {(f"{shape} ({dtype})" if several else shape, gpu): cell
            for (shape, dtype, gpu), cell in best.items()}


def compare(session: Session, op: str) -> Comparison:
    """Per GPU that measured ``op``: the fastest configuration per shape, where the best
    configurations differ on shapes timed on several GPUs, the knob values each GPU's
    bests use, and the GPUs' similarity as the ranker computes it (from their facts)."""
    where = [Experience.op_type == op, Experience.evidence == "measured", on_hardware()]
    gpus, hardware = _gpu_columns(session, where)
    names = [g.gpu_name for g in gpus]
    cells = _fastest_cells(session, where)
    on = Counter(shape for shape, _ in cells)
    shapes = sorted(on, key=lambda s: (-on[s], s))
    differences = []
    for shape in shapes:
        here = [(g, cells[(shape, g)].config) for g in names if (shape, g) in cells]
        if len(here) < 2:
            continue
        knobs = sorted({k for _, c in here for k in c})
        differ = [(k, [(g, c.get(k, "-")) for g, c in here]) for k in knobs
                  if len({repr(c.get(k, "-")) for _, c in here}) > 1]
        differences.append(Difference(shape, differ))
    knob_values: dict[str, dict[str, list[tuple[Any, int]]]] = defaultdict(dict)
    for gpu in names:
        values: dict[str, Counter[Any]] = defaultdict(Counter)
        for (_, g), cell in cells.items():
            if g == gpu:
                for k, v in cell.config.items():
                    values[k][v] += 1
        for k, counted in values.items():
            knob_values[k][gpu] = counted.most_common()
    facts = {g.gpu_name: default_facts(hardware.get(g.hardware_id) or g) for g in gpus}
    similarity = {(a, b): gpu_similarity(facts[a], facts[b]) for a in names for b in names}
    return Comparison(op, gpus, shapes[:SHAPES_SHOWN], cells, differences,
                      dict(sorted(knob_values.items())), similarity,
                      max(0, len(shapes) - SHAPES_SHOWN))


# -- the configuration landscape of (op, GPU, shape) -----------------------------------
LANDSCAPE_ROWS = 3000  # measured rows loaded for one shape, fastest first


@dataclass(frozen=True)
class Point:
    config: dict[str, Any]
    time_ms: float
    exp_id: str | None  # None: a prediction
    programs: int | None = None  # launch features, where the op's launch model gives them
    threads: int | None = None
    dtype: str | None = None  # what the bytes and FLOPs of the shape are counted in


@dataclass
class Landscape:
    op: str
    gpu: str
    shape: str
    measured: list[Point]  # fastest first
    knobs: list[str]
    truncated: bool  # more rows measured the shape than were loaded
    predicted: list[Point] = field(default_factory=list)
    prediction_note: str = ""

    @property
    def best(self) -> Point | None:
        return self.measured[0] if self.measured else None


def _landscape_where(op: str, gpu: str) -> list[Any]:
    return [Experience.op_type == op, Experience.gpu_name == gpu,
            Experience.evidence == "measured", col(Experience.time_ms).is_not(None),
            on_hardware()]


def landscape_gpus(session: Session, op: str) -> list[str]:
    """GPUs with a measured experience of ``op`` (the landscape's GPU choices)."""
    return sorted(str(g) for g in session.exec(
        select(Experience.gpu_name).where(Experience.op_type == op,
                                          Experience.evidence == "measured", on_hardware())
        .distinct()).all())


def landscape_shapes(session: Session, op: str, gpu: str
                     ) -> tuple[list[tuple[str, int]], dict[str, list[str]]]:
    """The shapes measured for ``op`` on ``gpu``, most measured first, with how many rows
    timed each; and per shape the run ids that timed it. One record per (run, shape set)
    group is read (the rows of a group time the same shapes), never every row's JSON."""
    shape_col = shape_set_column(session)
    groups = session.exec(select(func.min(Experience.id), Experience.run_id, func.count())
                          .where(*_landscape_where(op, gpu))
                          .group_by(Experience.run_id, shape_col)).all()
    sample = {row.id: row for row in session.exec(select(Experience).where(
        col(Experience.id).in_([g[0] for g in groups])))} if groups else {}
    counts: Counter[str] = Counter()
    runs_of: dict[str, list[str]] = defaultdict(list)
    for exp_id, run_id, n in groups:
        record = load_or_skip(sample[exp_id]) if exp_id in sample else None
        for shape in dict.fromkeys(t.shape for t in (record.feedback.timings if record else [])):
            counts[shape] += int(n)
            runs_of[shape].append(str(run_id))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])), dict(runs_of)


def landscape(session: Session, op: str, gpu: str, shape: str, run_ids: list[str],
              launch_of: Any = None) -> Landscape:
    """Every configuration measured on ``shape`` (``run_ids``: the runs that timed it)
    with its median time there, fastest first; ``launch_of(record, shape)`` gives launch
    facts (programs, threads per program) where the op's launch model knows them."""
    rows = session.exec(select(Experience).where(
        *_landscape_where(op, gpu), col(Experience.run_id).in_(run_ids))
        .order_by(Experience.time_ms, Experience.id).limit(LANDSCAPE_ROWS + 1)).all()
    points: list[Point] = []
    for row in rows[:LANDSCAPE_ROWS]:
        record = load_or_skip(row)
        if record is None or record.feedback.suspect or not record.edit.config:
            continue
        t = next((t for t in record.feedback.timings if t.shape == shape), None)
        if t is None:
            continue
        points.append(Point(dict(record.edit.config), t.median_ms, record.id,
                            *launch_facts(launch_of, record, shape), dtype=record.task.dtype))
    points.sort(key=lambda p: (p.time_ms, p.exp_id or ""))
    knobs = sorted({k for p in points for k in p.config})
    return Landscape(op, gpu, shape, points, knobs, len(rows) > LANDSCAPE_ROWS)


def launch_facts(launch_of: Any, subject: Any, shape: str) -> tuple[int | None, int | None]:
    """(programs, threads per program) from ``launch_of(subject, shape)``; (None, None)
    where there is no launch model or it cannot read the subject."""
    if launch_of is None:
        return None, None
    try:
        facts = launch_of(subject, shape)
    except Exception:  # noqa: BLE001 - a launch model that cannot read this config
        return None, None
    if facts is None:
        return None, None
    return int(facts.programs), int(facts.threads_per_program)


def hardware_peaks(session: Session, gpu: str) -> tuple[float | None, float | None]:
    """(bandwidth GB/s, peak TFLOP/s) the store lists for ``gpu`` (None: not known)."""
    found = session.exec(select(Hardware).where(Hardware.gpu_name == gpu)).first()
    if found is None:
        return None, None
    return found.mem_bandwidth_gbps, found.peak_tflops


class StoreViews:
    """The views above over one store, each read in a session of its own: what a door
    asks for, with no session or SQL on its side (``LocalKnowledge.views``)."""

    def __init__(self, session: Callable[[], Session]) -> None:
        self._session = session

    def grid(self) -> Grid:
        with self._session() as session:
            return op_gpu_grid(session)

    def runs(self, limit: int = 500) -> list[Run]:
        """Optimization runs in the store, newest first."""
        with self._session() as session:
            return queries.list_runs(session, limit=limit)

    def run(self, run_id: str) -> Run | None:
        with self._session() as session:
            return queries.get_run(session, run_id)

    def run_regime_best(self, run_ids: Iterable[str]) -> dict[str, list[RegimeBest]]:
        with self._session() as session:
            return run_regime_best(session, run_ids)

    def measurements(self, op: str | None, gpu: str | None, triton: str | None = None,
                     top: int = TOP) -> Measurements:
        with self._session() as session:
            return measurements(session, op, gpu, triton, top=top)

    def compare_ops(self) -> list[str]:
        with self._session() as session:
            return compare_ops(session)

    def compare(self, op: str) -> Comparison:
        with self._session() as session:
            return compare(session, op)

    def landscape_gpus(self, op: str) -> list[str]:
        with self._session() as session:
            return landscape_gpus(session, op)

    def landscape_shapes(self, op: str, gpu: str
                         ) -> tuple[list[tuple[str, int]], dict[str, list[str]]]:
        with self._session() as session:
            return landscape_shapes(session, op, gpu)

    def landscape(self, op: str, gpu: str, shape: str, run_ids: list[str],
                  launch_of: Any = None) -> Landscape:
        with self._session() as session:
            return landscape(session, op, gpu, shape, run_ids, launch_of)

    def hardware_peaks(self, gpu: str) -> tuple[float | None, float | None]:
        with self._session() as session:
            return hardware_peaks(session, gpu)
