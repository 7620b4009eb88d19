"""Transfer across shape regimes and dtypes on the project's own H200 landscape.

Reads every sweep journal that exists (benchmarks/sweeps/<task>_<dtype>.jsonl, written by
``kernelkb sweep``; more arrive as the landscape is measured) and runs two studies, each
case a (task, regime, dtype) whose times are hidden from the methods:

- leave-one-regime-out: the same task and dtype, the other regimes' measurements known;
- float16 -> bfloat16 (where both journals exist): the task's float16 measurements known,
  each bfloat16 regime the target;
- H200 -> another card (``--other-sweeps``, a folder of another GPU's journals, e.g.
  benchmarks/sweeps_h100): the H200's measurements of the task in that dtype known, each
  regime the other card measured the target; the nearest regime is the H200's own
  measurement of the same regime (what a user who copies the H200's best would get).

Methods: cold (random order, 20 seeds); the nearest known regime's order (by the
shape's bytes moved; the float16 twin of the regime for the dtype study); the mean
normalised rank over the known regimes; the ranker's zero-shot order (retrieval/ranker.py,
trained on the known rows); and the product's walk (retrieval/walk.py) whose GPs are the
known regimes' (a regime plays the part a GPU plays across cards), over 5 model seeds.
E@3% as in benchmarks/transfer_gpus.py.

    python -m benchmarks.transfer_h200 [--sweeps benchmarks/sweeps] [--model-seeds 5]
        [--other-sweeps benchmarks/sweeps_h100]

Writes benchmarks/results/transfer_h200.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.transfer_gpus import Case, cold_orders, make_case, summarise, walk_metrics
from benchmarks.transfer_summary import spread
from kernelkb.retrieval.ranker import CostModel, ExperienceRow, config_key
from kernelkb.retrieval.transfer_bo import Encoder, fit_gp
from kernelkb.retrieval.walk import Walk

HERE = Path(__file__).resolve().parent
TOLERANCE = 1.03


def card_of(env: dict[str, Any]) -> str:
    """A journal's GPU as a short name (``H200``, ``H100``) from its header."""
    found = re.search(r"\b[ABHL]\d+\b", str(env.get("gpu_name", "")))
    return found.group(0) if found else str(env.get("gpu_name") or "GPU")


def load_sweeps(folder: Path) -> list[ExperienceRow]:
    """Every timed or failed point of every journal: one row per (point, shape); the
    shape label names the regime's shape, ``gpu`` carries the card and the dtype (the
    ranker groups by it). A configuration measured twice in a regime keeps its first
    time."""
    import torch

    from kernelkb.kernels.discovery import get_task

    rows, seen = [], set()
    for path in sorted(folder.glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        header = next((x["header"] for x in lines if "header" in x), {})
        env = dict(header.get("env") or {})
        card = card_of(env)
        for point in lines:
            if "config" not in point:
                continue
            task = get_task(point["task"])
            dtype = getattr(torch, point["dtype"])
            shapes = (point.get("comparison") or {}).get("shapes") or {}
            for label in point.get("shapes") or []:
                ident = (point["task"], point["dtype"], label, config_key(point["config"]))
                if ident in seen:
                    continue
                seen.add(ident)
                shape = task.parse_shape(label)
                timed = point.get("ok") and label in shapes
                rows.append(ExperienceRow(
                    op=point["task"], shape=f"{point['regime']}:{label}",
                    gpu=f"{card} {point['dtype']}", config=dict(point["config"]),
                    time_ms=float(shapes[label]["candidate_ms"]) if timed else None,
                    launch=task.launch(point["config"], shape, point["dtype"]),
                    gpu_facts={**env, "gpu_name": f"{card} {point['dtype']}"},
                    bytes_moved=task.bytes_moved(shape, dtype), flops=task.flops(shape, dtype),
                    failed=not timed))
    return rows


def regime_of(row: ExperienceRow) -> str:
    return row.shape.split(":", 1)[0]


def known_orders(case: Case, known: Sequence[ExperienceRow], twin: str | None
                 ) -> dict[str, list[str]]:
    """The nearest known regime's order (``twin``'s where given: the same regime in the
    other dtype; else by bytes moved) and the mean normalised rank over known regimes."""
    keys = sorted(case.truth)
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    size: dict[str, float] = {}
    for r in known:
        if r.op == case.op:
            groups[r.shape][r.key] = r.time_ms if r.time_ms and not r.failed else math.inf
            size[r.shape] = r.bytes_moved or 0.0
    ranks: dict[str, list[float]] = defaultdict(list)
    for times in groups.values():
        ordered = sorted(times, key=lambda k, t=times: (t[k], k))
        for i, k in enumerate(ordered):
            ranks[k].append(i / max(1, len(ordered) - 1))
    target = case.rows[0].bytes_moved or 0.0
    nearest = twin if twin in groups else min(
        groups, key=lambda s: abs(math.log((size[s] + 1) / (target + 1))))
    near = groups[nearest]

    def order(score: dict[str, float]) -> list[str]:
        return sorted(keys, key=lambda k: (score.get(k, math.inf), k))

    return {"nearest_regime": order(near),
            "mean_rank": order({k: float(np.mean(v)) for k, v in ranks.items()})}


def product_walk(case: Case, known: Sequence[ExperienceRow], model: CostModel,
                 seed: int, limit: int) -> list[str]:
    """The product's walk with one GP per known regime of the task."""
    mine = [r for r in known if r.op == case.op]
    encode = Encoder([r.config for r in case.rows] + [r.config for r in mine])
    by_shape: dict[str, dict[str, float]] = defaultdict(dict)
    for r in mine:
        by_shape[r.shape][r.key] = r.time_ms if r.time_ms and not r.failed else math.nan
    configs = {r.key: r.config for r in mine}
    gps = {}
    for shape, times in by_shape.items():
        timed = {k: t for k, t in times.items() if math.isfinite(t)}
        if len(timed) < 5:
            continue
        best = min(timed.values())
        worst = math.log(max(timed.values()) / best) + math.log(2.0)
        keys = sorted(times)
        y = np.array([math.log(times[k] / best) if math.isfinite(times[k]) else worst
                      for k in keys])
        gps[shape] = fit_gp(encode([configs[k] for k in keys]), y, seed)
    candidates = [ExperienceRow(op=r.op, shape=r.shape, gpu=r.gpu, config=r.config,
                                time_ms=None, launch=r.launch, gpu_facts=r.gpu_facts,
                                bytes_moved=r.bytes_moved, flops=r.flops) for r in case.rows]
    measured: dict[str, list[ExperienceRow]] = defaultdict(list)
    for r in case.rows:
        measured[r.key].append(r)
    walk = Walk(model, candidates, gps, encode, seed)
    for _ in range(min(limit, len(case.truth))):
        key = walk.next_key()
        if key is None:
            break
        walk.observe(key, measured[key])
        t = case.truth.get(key)
        if t is not None and t <= case.best * TOLERANCE:
            break
    return walk.remaining()


def run(case: Case, known: Sequence[ExperienceRow], twin: str | None, model_seeds: int,
        limit: int) -> dict[str, Any]:
    out: dict[str, Any] = {"cold": summarise([walk_metrics(o, case)
                                              for o in cold_orders(case, 20)])}
    for name, order in known_orders(case, known, twin).items():
        out[name] = summarise([walk_metrics(order, case)])
    zero, walked = [], []
    for seed in range(model_seeds):
        model = CostModel(seed=seed).fit(known)
        model.update([])
        cands = [ExperienceRow(op=r.op, shape=r.shape, gpu=r.gpu, config=r.config,
                               time_ms=None, launch=r.launch, gpu_facts=r.gpu_facts,
                               bytes_moved=r.bytes_moved, flops=r.flops) for r in case.rows]
        zero.append(walk_metrics([config_key(r.config) for r in model.rank(cands)], case))
        walked.append(walk_metrics(product_walk(case, known, model, seed, limit), case))
    out["ranker_zero_shot"] = summarise(zero)
    out["walk"] = summarise(walked)
    return out


def other_card(rows: Sequence[ExperienceRow], other: Sequence[ExperienceRow],
               model_seeds: int, limit: int) -> list[dict[str, Any]]:
    """Each regime another card measured, with the H200's rows of the task in that dtype
    known (its twin: the H200's measurement of the same regime)."""
    cases = []
    for (op, gpu) in sorted({(r.op, r.gpu) for r in other}):
        card, dtype = gpu.split()
        known = [r for r in rows if r.op == op and r.gpu.split()[-1] == dtype]
        assert not any(r.gpu == gpu for r in known), "the target card's rows in training"
        for regime in sorted({regime_of(r) for r in other if r.gpu == gpu and r.op == op}):
            held = [r for r in other if r.op == op and r.gpu == gpu and regime_of(r) == regime]
            twin = next((r.shape for r in known if regime_of(r) == regime), None)
            if not known or all(r.failed for r in held):
                continue
            case = make_case(f"{op} {regime} {dtype} (H200 -> {card})", "gpu", held)
            cases.append({"study": f"H200 -> another card ({card})", "case": case.name,
                          "configs": len(case.truth),
                          **run(case, known, twin, model_seeds, limit)})
    return cases


def studies(rows: Sequence[ExperienceRow], model_seeds: int, limit: int
            ) -> list[dict[str, Any]]:
    cases = []
    for (op, gpu) in sorted({(r.op, r.gpu) for r in rows}):
        mine = [r for r in rows if r.op == op and r.gpu == gpu]
        for regime in sorted({regime_of(r) for r in mine}):
            held = [r for r in mine if regime_of(r) == regime]
            known = [r for r in mine if regime_of(r) != regime]
            assert not any(regime_of(r) == regime for r in known), "held-out regime in training"
            if not known or all(r.failed for r in held):
                continue
            case = make_case(f"{op} {regime} ({gpu.split()[-1]})", "regime", held)
            cases.append({"study": "leave one regime out", "case": case.name,
                          "configs": len(case.truth),
                          **run(case, known, None, model_seeds, limit)})
        if gpu.endswith("bfloat16"):
            fp16 = [r for r in rows if r.op == op and r.gpu.endswith("float16")
                    and not r.gpu.endswith("bfloat16")]
            for regime in sorted({regime_of(r) for r in mine}) if fp16 else []:
                held = [r for r in mine if regime_of(r) == regime]
                assert not any(r.gpu == gpu for r in fp16), "bfloat16 rows in training"
                case = make_case(f"{op} {regime} (float16 -> bfloat16)", "dtype", held)
                twin = next((r.shape for r in fp16 if regime_of(r) == regime), None)
                cases.append({"study": "float16 -> bfloat16", "case": case.name,
                              "configs": len(case.truth),
                              **run(case, fp16, twin, model_seeds, limit)})
    return cases


METHODS = ("cold", "nearest_regime", "mean_rank", "ranker_zero_shot", "walk")


def write(cases: Sequence[dict[str, Any]], payload: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "transfer_h200.json").write_text(json.dumps({**payload, "cases": cases},
                                                       indent=1, default=float))
    lines = ["# Transfer across regimes, dtypes and cards on the H200 landscape", "",
             f"Command: `{payload['command']}`  ", f"Journals: {', '.join(payload['journals'])}"
             f"; wall time {payload['seconds']:.0f} s. E@3%: evaluations until within 3% of "
             "the case's best; cold: median over 20 random orders; ranker and walk: median "
             f"[min-max] over {payload['model_seeds']} model seeds.", ""]
    for study in sorted({c["study"] for c in cases}):
        mine = [c for c in cases if c["study"] == study]
        lines += [f"## {study}", "", "| case | configs | " + " | ".join(METHODS) + " |",
                  "|---|---|" + "---|" * len(METHODS)]
        for c in mine:
            lines.append(f"| {c['case']} | {c['configs']} | " + " | ".join(
                spread(c[m]["e3_runs"]) if m in c else "n/a" for m in METHODS) + " |")
        med = {m: float(np.median([np.median(c[m]["e3_runs"]) for c in mine])) for m in METHODS}
        lines += ["", "Median over the cases: " + ", ".join(f"{m} {med[m]:g}" for m in METHODS)
                  + ".", ""]
    (out / "transfer_h200.md").write_text("\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=Path, default=HERE / "sweeps")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--model-seeds", type=int, default=5)
    parser.add_argument("--walk-limit", type=int, default=200)
    parser.add_argument("--other-sweeps", type=Path, action="append", default=[],
                        help="another card's sweep folder: the H200 -> card study")
    args = parser.parse_args(argv)
    started = time.time()
    rows = load_sweeps(args.sweeps)
    if not rows:
        raise SystemExit(f"no sweep journal under {args.sweeps}")
    cases = studies(rows, args.model_seeds, args.walk_limit)
    for folder in args.other_sweeps:
        cases += other_card(rows, load_sweeps(folder), args.model_seeds, args.walk_limit)
    journals = [p for folder in (args.sweeps, *args.other_sweeps)
                for p in sorted(folder.glob("*.jsonl"))]
    payload = {"command": "python -m benchmarks.transfer_h200 " + " ".join(argv or sys.argv[1:]),
               "journals": [f"{p.parent.name}/{p.name}" for p in journals],
               "model_seeds": args.model_seeds, "seconds": time.time() - started}
    write(cases, payload, args.out)
    print((args.out / "transfer_h200.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
