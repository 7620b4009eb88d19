"""The interactive charts' routes: their JSON, and Plotly's own bundled script served
from the installed ``plotly`` package (no CDN: the pages work offline).

Why a router of its own: pages.py renders HTML; these answer the script in the page.
Not part of the OpenAPI schema.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from kernelkb.api.deps import KnowledgeDep
from kernelkb.web import chart_data, runs
from kernelkb.web.pages import Text, _best_round, _landscape, _run_data

router = APIRouter(include_in_schema=False)


@lru_cache(maxsize=1)
def plotly_js() -> Path:
    """plotly.min.js as the ``plotly`` Python package ships it (package_data)."""
    from importlib.util import find_spec

    spec = find_spec("plotly")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("the plotly package is not installed (pip install plotly)")
    return Path(spec.origin).parent / "package_data" / "plotly.min.js"


@router.get("/ui/vendor/plotly.min.js")
def plotly_script() -> Response:
    try:
        path = plotly_js()
    except FileNotFoundError as err:
        return Response(str(err), status_code=404, media_type="text/plain")
    # a day in the browser's cache: 4.8 MB once, not on every page
    return FileResponse(path, media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})


@router.get("/ui/landscape.json")
def landscape_data(kb: KnowledgeDep, op: Text = None, gpu: Text = None,
                   shape: Text = None) -> Response:
    ctx, status = _landscape(kb, op or None, gpu or None, shape or None)
    land = ctx["land"]
    if land is None:
        what = ctx["unknown"]
        message = f"no {what[0]} {what[1]!r} measured here; closest: {what[2]}" if what \
            else "choose an op, a GPU and a shape"
        return JSONResponse({"detail": message}, status_code=404 if what else 400)
    body = chart_data.landscape_json(land, kb.views.hardware_peaks(land.gpu))
    return JSONResponse(body)


@router.get("/ui/runs/{run_id}/rounds.json")
def run_rounds(run_id: str, request: Request, kb: KnowledgeDep) -> Response:
    if not runs.safe_name(run_id):
        return JSONResponse({"detail": "not a run id"}, status_code=404)
    row, folder, records = _run_data(kb, run_id)
    if row is None and folder is None:
        return JSONResponse({"detail": f"no run {run_id}"}, status_code=404)
    rounds = runs.rounds_of(records)
    best_ids = {}
    for figure in runs.regime_figures(records):
        own = [r for r in rounds if runs.regime_of(r) == figure.regime]
        best_ids[figure.regime] = _best_round(own, figure)
    live = folder.live() if folder is not None else None
    return JSONResponse(chart_data.run_json(records, live, best_ids),
                        headers={"Cache-Control": "no-store"})
