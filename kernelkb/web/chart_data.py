"""The JSON the interactive charts draw (kernelkb/web/static/charts.js): the landscape's
points with every knob and metric, a run's rounds as they land, and its lineage graph.

Why JSON beside the HTML: the browser picks axes and colour itself, a live run's chart
adds points without reloading, and the data never passes through a script in the page
(a record's text is only ever set as text by the script).
"""

from __future__ import annotations

import math
from typing import Any

from kernelkb.kb.record import ExperienceRecord
from kernelkb.retrieval.views import Landscape, Point
from kernelkb.web import data, runs

DIFF_SHOWN = 20_000  # characters of a round's diff sent beside its node
# the metrics an axis or the colour can show, beside the knobs (name -> the point's key)
METRICS = {"time (ms)": "time_ms", "GB/s": "gbps", "% of peak": "peak_pct",
           "measured or predicted": "kind", "programs": "programs",
           "threads / program": "threads"}


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def cost_of(op: str, shape: str, dtype: str) -> tuple[float | None, float | None]:
    """(bytes moved, FLOPs) of the op's task on the shape (None: no such task or shape)."""
    try:
        import torch

        from kernelkb.kernels.discovery import get_task
        from kernelkb.kernels.dtypes import DTYPES

        task = get_task(op)
        parsed = task.parse_shape(shape)
        kind = DTYPES.get(dtype, torch.float16)
        return float(task.bytes_moved(parsed, kind)), float(task.flops(parsed, kind))
    except Exception:  # noqa: BLE001 - an imported op with no task: no roofline figures
        return None, None


def landscape_json(land: Landscape, peaks: tuple[float | None, float | None]
                   ) -> dict[str, Any]:
    """Every measured and predicted point with its configuration and metrics: time, GB/s
    and % of peak (the larger of the bandwidth and compute shares) where the task's
    bytes/FLOPs model and the GPU's facts are known."""
    bandwidth, tflops = peaks
    dtypes = [p.dtype for p in land.measured if p.dtype]
    usual = max(set(dtypes), key=dtypes.count) if dtypes else "float16"  # predictions'
    costs = {d: cost_of(land.op, land.shape, d) for d in {*dtypes, usual}}

    def point(p: Point, kind: str) -> dict[str, Any]:
        moved, flops = costs[p.dtype or usual]
        seconds = p.time_ms * 1e-3
        gbps = moved / seconds / 1e9 if moved and seconds > 0 else None
        shares = [gbps / bandwidth if gbps and bandwidth else None,
                  flops / seconds / 1e12 / tflops if flops and tflops and seconds > 0
                  else None]
        share = max((s for s in shares if s is not None), default=None)
        return {"config": p.config, "config_text": data.config_text(p.config),
                "time_ms": p.time_ms, "gbps": _finite(gbps),
                "peak_pct": _finite(100 * share) if share is not None else None,
                "kind": kind, "exp_id": p.exp_id, "programs": p.programs,
                "threads": p.threads}

    points = [point(p, "measured") for p in land.measured]
    points += [point(p, "predicted") for p in land.predicted]
    best = land.best.exp_id if land.best else None
    return {"op": land.op, "gpu": land.gpu, "shape": land.shape, "knobs": land.knobs,
            "metrics": list(METRICS), "metric_keys": METRICS, "best": best,
            "points": points, "prediction_note": land.prediction_note}


def _round(r: ExperienceRecord) -> dict[str, Any]:
    fb = r.feedback
    return {"id": r.id, "iteration": r.iteration, "kind": r.provenance.round_kind,
            "regime": runs.regime_of(r), "verdict": r.verdict.value,
            "time_ms": _finite(fb.time_ms) if r.evidence == "measured" else None,
            "speedup_vs_parent": _finite(fb.speedup_vs_parent),
            "summary": r.edit.summary[:300], "config_text": data.config_text(r.edit.config)}


def _graph(rounds: list[ExperienceRecord], best_id: str | None) -> list[dict[str, Any]]:
    """One regime's lineage as nodes with a parent id and a lane (the row a node is
    drawn on: a child continues its parent's lane, a sibling opens a new one)."""
    out: list[dict[str, Any]] = []
    lanes = 0
    stack: list[tuple[runs.Node, str | None, int]] = [
        (n, None, -1) for n in reversed(runs.lineage(rounds, best_id))]
    while stack:  # depth first, without recursion (a chain can be a thousand deep)
        node, parent, lane = stack.pop()
        if lane < 0:
            lane, lanes = lanes, lanes + 1
        r = node.record
        out.append({**_round(r), "parent": parent, "lane": lane, "best": node.best,
                    "orphan": node.orphan, "diff": r.edit.diff[:DIFF_SHOWN],
                    "diff_cut": len(r.edit.diff) > DIFF_SHOWN})
        for i, child in reversed(list(enumerate(node.children))):
            stack.append((child, r.id, lane if i == 0 else -1))
    return out


def run_json(records: list[ExperienceRecord], live: runs.Live | None,
             best_ids: dict[str, str | None]) -> dict[str, Any]:
    """The run's rounds in order (every candidate, timed or not), each regime's lineage
    graph, and whether it is still under way (the page polls while it is)."""
    rounds = runs.rounds_of(records)
    regimes = runs.regimes_in_order(rounds) if rounds else []
    lineage = {name: _graph([r for r in rounds if runs.regime_of(r) == name],
                            best_ids.get(name)) for name in regimes}
    return {"live": live is not None,
            "candidate": live.candidate if live is not None else None,
            "rounds": [_round(r) for r in rounds], "regimes": regimes, "lineage": lineage}
