"""The page routes: index, what worked (per GPU and op), experiences, runs (per regime,
with their lineage), the comparison of GPUs for one op.

Thin: data comes from the knowledge facade (its ``views`` of the store, listings,
insights, bootstrap), shaped by kernelkb/web/data.py; run folders from
kernelkb/web/runs.py, charts from kernelkb/web/plots.py. Not part of the OpenAPI schema.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from kernelkb import operations
from kernelkb.api.deps import KnowledgeDep
from kernelkb.kb.limits import OFFSET_MAX, SHORT
from kernelkb.kb.queries import UnreadableRow
from kernelkb.kernels.shared.vocabulary import Verdict
from kernelkb.retrieval.views import Landscape, Point
from kernelkb.web import data, plots, run_list, runs
from kernelkb.web.render import query_string, templates

if TYPE_CHECKING:
    from kernelkb.service import LocalKnowledge

router = APIRouter(include_in_schema=False)
TEMPLATES = templates()
TEMPLATES.env.globals["safe_name"] = runs.safe_name  # a run id the run page can serve
PAGE = 50
LIVE_REFRESH_S = 3  # a live run's page reloads itself this often (no script)
Text = Annotated[str | None, Query(max_length=SHORT)]  # a filter value


def _page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return TEMPLATES.TemplateResponse(request, name, {"qs": query_string, **context},
                                      status_code=status_code)


def _not_found(request: Request, what: str, status_code: int = 404) -> HTMLResponse:
    return _page(request, "missing.html", status_code=status_code, what=what)


class Choices(TypedDict):
    """The filter pickers' values (named keys: they are spread into a page's context)."""

    ops: list[str]
    gpus: list[str]
    tritons: list[str]
    verdicts: list[str]


def _choices(kb: LocalKnowledge) -> Choices:
    stats = kb.stats()
    return {"ops": sorted(stats["by_op"]), "gpus": sorted(stats["by_gpu"]),
            "tritons": sorted(stats["by_triton"]), "verdicts": [v.value for v in Verdict]}


@router.get("/", response_class=HTMLResponse)
@router.get("/ui", response_class=HTMLResponse)
def index(request: Request, kb: KnowledgeDep) -> HTMLResponse:
    stats = kb.stats()
    grid = kb.views.grid()
    recent = kb.views.runs(limit=8)
    per_regime = kb.views.run_regime_best([r.run_id for r in recent])
    return _page(request, "index.html", stats=stats, grid=grid, recent=recent,
                 per_regime=per_regime)


@router.get("/ui/insights", response_class=HTMLResponse)
def insights_page(request: Request, kb: KnowledgeDep, op: Text = None,
                  gpu: Text = None, triton: Text = None) -> HTMLResponse:
    from kernelkb.retrieval.names import UnknownName, closest_name

    choices = _choices(kb)
    try:  # any case and short forms, as the CLI, API and MCP match them
        names = operations.resolve(kb, op_type=op or None, gpu_name=gpu or None)
    except UnknownName as err:
        near = {"op": closest_name(op, choices["ops"]) if op else None,
                "gpu": closest_name(gpu, choices["gpus"]) if gpu else None}
        return _page(request, "insights_unknown.html", status_code=404, message=str(err),
                     near=near, op=op, gpu=gpu, triton=triton)
    op, gpu = names["op_type"] or op, names["gpu_name"] or gpu
    report = kb.insights(op_type=op or None, gpu_name=gpu or None,
                         triton_version=triton or None)
    measured = kb.views.measurements(op or None, gpu or None, triton or None)
    return _page(request, "insights.html", report=report, op=op, gpu=gpu, triton=triton,
                 measured=measured, config_text=data.config_text, **choices)


@router.get("/ui/plots/insights.png")
def insights_plot(kb: KnowledgeDep, op: Text = None, gpu: Text = None,
                  triton: Text = None) -> Response:
    report = kb.insights(op_type=op or None, gpu_name=gpu or None,
                         triton_version=triton or None)
    title = " · ".join(x for x in (op or "every op", gpu or "every GPU",
                                   f"Triton {triton}" if triton else "every Triton version"))
    return Response(plots.category_wins(report.categories, title), media_type="image/png")


@router.get("/ui/plots/measurements.png")
def measurements_plot(kb: KnowledgeDep, op: Text = None, gpu: Text = None,
                      triton: Text = None) -> Response:
    measured = kb.views.measurements(op or None, gpu or None, triton or None, top=1)
    labels = Counter(s.label or s.run_id for s in measured.sources)
    boxes = [((s.label or s.run_id) + (f" [{s.shape_set}]" if labels[s.label or s.run_id] > 1
                                       else ""), box)
             for s in measured.sources if (box := s.box())]
    title = " · ".join(x for x in (op or "every op", gpu or "every GPU",
                                   f"Triton {triton}" if triton else "every Triton version"))
    return Response(plots.measurement_spread(boxes[:20], f"{title}: measured configurations"),
                    media_type="image/png")


@router.get("/ui/compare", response_class=HTMLResponse)
def compare_page(request: Request, kb: KnowledgeDep, op: Text = None) -> HTMLResponse:
    ops = kb.views.compare_ops()
    comparison = kb.views.compare(op) if op else None
    return _page(request, "compare.html", op=op, ops=ops, c=comparison,
                 config_text=data.config_text)


@router.get("/ui/experiences", response_class=HTMLResponse)
def experiences_page(request: Request, kb: KnowledgeDep, op: Text = None,
                     gpu: Text = None, triton: Text = None,
                     verdict: Text = None, category: Text = None,
                     offset: int = Query(0, ge=0, le=OFFSET_MAX)) -> HTMLResponse:
    page = kb.list(offset=offset, limit=PAGE, op_type=op or None, gpu_name=gpu or None,
                   triton_version=triton or None, verdict=verdict or None,
                   category=category or None)
    return _page(request, "experiences.html", page=page, op=op, gpu=gpu, triton=triton,
                 verdict=verdict, category=category, page_size=PAGE, **_choices(kb))


@router.get("/ui/experiences/{exp_id}", response_class=HTMLResponse)
def experience_page(request: Request, exp_id: str, kb: KnowledgeDep) -> HTMLResponse:
    if len(exp_id) > 64:
        return _not_found(request, "experience (ids are at most 64 characters)")
    try:
        record = kb.get(exp_id)
    except UnreadableRow as err:
        return _not_found(request, str(err), status_code=409)
    if record is None:
        return _not_found(request, f"experience {exp_id}")
    return _page(request, "experience.html", r=record)


def _run_data(kb: LocalKnowledge, run_id: str) -> tuple[Any, Any, list[Any]]:
    """(store row or None, folder or None, the run's records from the store, else its
    journal)."""
    row = kb.views.run(run_id)
    folder = runs.find_folder(kb.settings, run_id)
    records = kb.list(run_id=run_id, limit=1000).items if row is not None else []
    if folder is not None:  # a run whose store went down mid-run journaled the rest
        stored = {r.id for r in records}
        records = records + [r for r in folder.journal_records() if r.id not in stored]
    return row, folder, records


@router.get("/ui/runs", response_class=HTMLResponse)
def runs_page(request: Request, kb: KnowledgeDep) -> HTMLResponse:
    stored = kb.views.runs()
    per_regime = kb.views.run_regime_best([r.run_id for r in stored])
    folders = {f.run_id: f for f in runs.all_folders(kb.settings)}
    return _page(request, "runs.html", rows=run_list.run_rows(stored, folders),
                 roots=runs.run_roots(kb.settings), runs_dir=kb.settings.runs_dir,
                 per_regime=per_regime)


@router.get("/ui/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str, kb: KnowledgeDep) -> HTMLResponse:
    if not runs.safe_name(run_id):
        return _not_found(request, "run (not a run id)")
    row, folder, records = _run_data(kb, run_id)
    if row is None and folder is None:
        return _not_found(request, f"run {run_id}")
    rounds = runs.rounds_of(records)
    figures = runs.regime_figures(records)
    trees = []
    for figure in figures:
        own = [r for r in rounds if runs.regime_of(r) == figure.regime]
        trees.append((figure, runs.tree_tokens(runs.lineage(own, _best_round(own, figure)))))
    live = folder.live() if folder is not None else None
    return _page(request, "run.html", run_id=run_id, row=row, folder=folder, rounds=rounds,
                 live=live, refresh_s=LIVE_REFRESH_S,
                 first=rounds[0] if rounds else None, sweeps=runs.sweeps_of(records),
                 figures=figures, trees=trees, regimes=len(figures) > 1 or any(
                     f.regime for f in figures), config_text=data.config_text,
                 report=folder.report_sections() if folder else "",
                 pngs=[p for p in folder.pngs() if not p.startswith("best_so_far")]
                 if folder else [])


def _best_round(own: list[Any], figure: runs.RegimeFigure) -> str | None:
    """The id of the round that made the regime's best kernel (the final sweep's
    kernel is one a round made: its latest win, or the start)."""
    if figure.best is None:
        return None
    if figure.best.provenance.round_kind != "sweep":
        return figure.best.id
    made = [r for r in own if r.edit.child_hash == figure.best.edit.child_hash]
    won = [r for r in made if r.verdict == "improved" or r.provenance.round_kind == "baseline"]
    return (won or made)[-1].id if made else None


@router.get("/ui/runs/{run_id}/best.png")
def run_best_plot(run_id: str, kb: KnowledgeDep) -> Response:
    if not runs.safe_name(run_id):
        return Response(status_code=404)
    _, _, records = _run_data(kb, run_id)
    png = plots.best_so_far(runs.best_by_regime(runs.rounds_of(records)),
                            f"{run_id}: best so far over the rounds")
    return Response(png, media_type="image/png")


@router.get("/ui/runs/{run_id}/files/{name}")
def run_file(run_id: str, name: str, kb: KnowledgeDep) -> Response:
    """A plot of the run's report (PNG files of its folder only)."""
    folder = runs.find_folder(kb.settings, run_id)
    path = folder.file(name) if folder and name.endswith(".png") else None
    if path is None:
        return Response(status_code=404)
    return Response(path.read_bytes(), media_type="image/png")


# -- the configuration landscape of (op, GPU, shape) -----------------------------------
PREDICTED_SHOWN = 50  # the ranker's first configurations drawn as predicted points


def _launch_models(op: str) -> tuple[Any, Any, Any]:
    """(the op's space or None, launch_of_record, launch_of_config): the task's launch
    model, else Kernel Tuner's conventions (imported ops, retrieval/launch.py)."""
    from kernelkb.optimizer.spaces import space_for_op
    from kernelkb.retrieval.launch import config_launch, record_launch

    space = space_for_op(op)
    if space is not None:
        return space, space.launch_of_record, space.launch_of_config
    return None, record_launch, config_launch


def _landscape(kb: LocalKnowledge, op: str | None, gpu: str | None, shape: str | None
               ) -> tuple[dict[str, Any], int]:
    """The page's context and status: pickers, the landscape, or what was not found
    (with the closest known name)."""
    from kernelkb.retrieval.names import closest_name

    ops = kb.views.compare_ops()
    ctx: dict[str, Any] = {"op": op, "gpu": gpu, "shape": shape, "ops": ops, "gpus": [],
                           "shapes": [], "land": None, "unknown": None}
    if not op:
        return ctx, 200
    if op not in ops:
        ctx["unknown"] = ("op", op, closest_name(op, ops), ops)
        return ctx, 404
    ctx["gpus"] = gpus = kb.views.landscape_gpus(op)
    if not gpu:
        return ctx, 200
    if gpu not in gpus:
        ctx["unknown"] = ("GPU", gpu, closest_name(gpu, gpus), gpus)
        return ctx, 404
    shapes, runs_of = kb.views.landscape_shapes(op, gpu)
    ctx["shapes"] = shapes
    names = [s for s, _ in shapes]
    if not shape and names:
        shape = ctx["shape"] = names[0]  # the most measured
    if shape not in runs_of:
        ctx["unknown"] = ("shape", shape or "", closest_name(shape or "", names), names)
        return ctx, 404
    space, of_record, of_config = _launch_models(op)
    land = kb.views.landscape(op, gpu, shape, runs_of[shape], of_record)
    try:
        plan = kb.bootstrap({"gpu_name": gpu}, op_type=op, space=space, shapes=[shape],
                            limit=PREDICTED_SHOWN)
        land.prediction_note = plan.prediction_note or ""
        best = land.best.time_ms if land.best else None
        land.predicted = data.predicted_points(plan.prediction, best, of_config, shape)
        if plan.prediction is not None:
            land.prediction_note = plan.prediction.note
    except ValueError as err:  # a GPU the ranker has no facts for
        land.prediction_note = f"no prediction: {err}"
    ctx["land"] = land
    return ctx, 200


def _panels(land: Landscape) -> list[plots.Panel]:
    def label(value: Any) -> str:
        return str(value)

    def order(values: set[str], raw: dict[str, Any]) -> list[str]:
        numeric = all(isinstance(raw[v], int | float) for v in values)
        return sorted(values, key=lambda v: (float(raw[v]), v) if numeric else (0.0, v))

    best = land.best
    panels = []
    for knob in land.knobs:
        raw = {label(p.config[knob]): p.config[knob]
               for p in (*land.measured, *land.predicted) if knob in p.config}
        ticks = order(set(raw), raw)
        at = {v: i for i, v in enumerate(ticks)}

        def xy(points: list[Point], knob: str = knob, at: dict = at) -> tuple:
            return tuple((float(at[label(p.config[knob])]), p.time_ms) for p in points
                         if knob in p.config)
        mark = xy([best])[0] if best and knob in best.config else None
        panels.append(plots.Panel(knob, tuple(ticks), xy(land.measured), mark,
                                  xy(land.predicted)))
    for name, attr in (("launch: programs", "programs"), ("launch: threads / program",
                                                         "threads")):
        def num(points: list[Point], attr: str = attr) -> tuple:
            return tuple((float(getattr(p, attr)), p.time_ms) for p in points
                         if getattr(p, attr))
        measured = num(land.measured)
        if measured:
            mark = num([best])[0] if best and getattr(best, attr) else None
            panels.append(plots.Panel(name, (), measured, mark, num(land.predicted)))
    return panels


@router.get("/ui/landscape", response_class=HTMLResponse)
def landscape_page(request: Request, kb: KnowledgeDep, op: Text = None, gpu: Text = None,
                   shape: Text = None) -> HTMLResponse:
    ctx, status = _landscape(kb, op or None, gpu or None, shape or None)
    return _page(request, "landscape.html", status_code=status, config_text=data.config_text,
                 **ctx)


@router.get("/ui/plots/landscape.png")
def landscape_plot(kb: KnowledgeDep, op: Text = None, gpu: Text = None,
                   shape: Text = None) -> Response:
    ctx, status = _landscape(kb, op or None, gpu or None, shape or None)
    land = ctx["land"]
    if land is None:
        return Response(status_code=404)
    title = f"{land.op} · {land.gpu} · {land.shape}: {len(land.measured)} measured" + \
        (f", {len(land.predicted)} predicted" if land.predicted else "")
    return Response(plots.landscape(_panels(land), title), media_type="image/png")
