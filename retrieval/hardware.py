"""Hardware similarity and the bootstrap plan for a GPU with no experiences.

The ranker's GPU similarity (``gpu_similarity``) is a weighted sum over two GPUs' facts:
vendor, architecture (same > same generation > same vendor), warp size, then memory
bandwidth, SM count, shared memory and registers per SM (ratios of the smaller to the
larger value); an unknown fact counts as a half match. Names never enter it, so a card
missing from every table still compares by what its fingerprint says. The bootstrap
plan ranks the stored GPUs by the same figure, takes the most similar and lists the edit
kinds and concrete configs that won there, each with its evidence, best first; advice
measured under another Triton version than the target's (``target["triton_version"]``)
comes after, labelled.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any, NamedTuple

from sqlalchemy import func
from sqlmodel import Session, col, select

from kernelkb.kb.models import Experience, Hardware
from kernelkb.kb.queries import load_or_skip
from kernelkb.kernels.shared.stats import geomean
from kernelkb.retrieval.features import default_facts, fact
from kernelkb.retrieval.insights import insights
from kernelkb.retrieval.schemas import BootstrapPlan, HardwareMatch, PlanItem
from kernelkb.retrieval.untimed import on_hardware
from kernelkb.retrieval.versions import other_version, version_note

# What makes a configuration's speed carry over, in order: same vendor (warp size, memory
# system, compiler), same architecture generation, then the sizes the features scale by.
FACT_WEIGHTS = {"vendor": 0.25, "arch": 0.25, "warp_size": 0.1, "mem_bandwidth_gbps": 0.15,
           "sm_count": 0.1, "smem_per_sm_kib": 0.1, "registers_per_sm": 0.05}
_ARCH = re.compile(r"(sm|gfx)_?(\w+)", re.I)
STACK_POWER = 4.0  # similarity ** this: a near-identical GPU outweighs several distant ones


def sureness(cat: Any) -> float:
    """0.75 for wins with no known spread, up to 1.0 when every win's interleaved
    comparison cleared the noise floor: a repeated significant win is strong evidence."""
    return 0.75 + 0.25 * cat.significant_wins / cat.wins if cat.wins else 0.75


def _arch_family(arch: str | None) -> tuple[str, str] | None:
    """("sm", "8") for sm_80 / sm_86, ("gfx", "9") for gfx90a, ("gfx", "11") for gfx1100."""
    match = _ARCH.match(arch or "")
    if not match:
        return None
    kind, code = match.group(1).lower(), match.group(2)
    if kind == "sm":
        return kind, code[:-1] if len(code) > 1 else code
    return kind, code[:-2] if len(code) > 2 else code[:1]


def arch_generation_similarity(a: str | None, b: str | None) -> float:
    """1 for the same architecture, 0.6 for the same generation (sm_80 / sm_86), 0.2 for
    the same vendor, 0 across vendors, 0.5 when either is unknown."""
    if not a or not b:
        return 0.5
    if a.lower() == b.lower():
        return 1.0
    fa, fb = _arch_family(a), _arch_family(b)
    if not fa or not fb:
        return 0.1
    if fa == fb:
        return 0.6
    return 0.2 if fa[0] == fb[0] else 0.0


def _vendor(gpu: Mapping[str, Any]) -> str | None:
    vendor = str(gpu.get("vendor") or "").lower()
    if vendor:
        return "nvidia" if "nvidia" in vendor else "amd" if "amd" in vendor else vendor
    family = _arch_family(gpu.get("arch"))
    return {"sm": "nvidia", "gfx": "amd"}.get(family[0]) if family else None


def _ratio(a: float | None, b: float | None) -> float:
    if a is None or b is None or a <= 0 or b <= 0:
        return 0.5
    return min(a, b) / max(a, b)


def gpu_similarity(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """Similarity in [0, 1] of two GPUs from their facts (keys as in kernels.shared.gpus and the
    Environment: vendor, arch, warp_size, mem_bandwidth_gbps, sm_count, smem_per_sm_kib,
    registers_per_sm), never from their names. A fact either side lacks counts half."""
    va, vb = _vendor(a), _vendor(b)
    value = FACT_WEIGHTS["vendor"] * (0.5 if not va or not vb else float(va == vb))
    value += FACT_WEIGHTS["arch"] * arch_generation_similarity(a.get("arch"), b.get("arch"))
    wa, wb = fact(a, "warp_size"), fact(b, "warp_size")
    same_warp = 0.5 if math.isnan(wa) or math.isnan(wb) else float(wa == wb)
    value += FACT_WEIGHTS["warp_size"] * same_warp
    for name in ("mem_bandwidth_gbps", "sm_count", "smem_per_sm_kib", "registers_per_sm"):
        fa, fb = fact(a, name), fact(b, name)
        value += FACT_WEIGHTS[name] * (0.5 if math.isnan(fa) or math.isnan(fb) else _ratio(fa, fb))
    return round(value, 4)


def similarity(target: Mapping[str, Any], hw: Hardware) -> float:
    """The plan's similarity of the target and a stored GPU: the ranker's gpu_similarity
    of both GPUs' facts (the facts table under each one's fingerprint), so a pair of GPUs
    has one figure wherever it is printed (the plan once weighed four columns its own
    way: 0.91 beside the ranker's 0.95 for the same H100 and H200)."""
    named = SimpleNamespace(**{**target, "gpu_name": target.get("gpu_name") or "target"})
    return gpu_similarity(default_facts(named), default_facts(hw))


def store_facts(session: Session) -> Callable[[Any], dict[str, Any]]:
    """A record's GPU facts as the store keeps them: the one fingerprint per GPU of its
    hardware table (what the plan's similarity reads), not the record's own. Records of
    one GPU can carry different fingerprints (a measured bandwidth, the nominal one), and
    the ranker took the first record's: 0.97 beside the plan's 0.95 for one pair."""
    kept = {hw.gpu_name: default_facts(hw) for hw in session.exec(select(Hardware)).all()}

    def facts_of(env: Any) -> dict[str, Any]:
        return dict(kept[env.gpu_name]) if env.gpu_name in kept else default_facts(env)

    return facts_of


def _weight(match: HardwareMatch) -> float:
    """How much a GPU's evidence counts in the plan's scores: its similarity to the target
    to the ranker's power, so a near-identical GPU's modest win outranks a distant GPU's
    large one (0.95 -> 0.81, 0.67 -> 0.2)."""
    return match.similarity ** STACK_POWER


def similar_hardware(session: Session, target: dict[str, Any], top: int = 3,
                     include_own: bool = False) -> list[HardwareMatch]:
    counts = dict(session.exec(  # the interpreter's untimed rows are no hardware evidence
        select(Experience.hardware_id, func.count()).where(on_hardware())
        .group_by(Experience.hardware_id)).all())
    matches = [
        HardwareMatch(hardware_id=hw.id, gpu_name=hw.gpu_name, arch=hw.arch,
                      similarity=similarity(target, hw), experiences=int(counts.get(hw.id, 0)),
                      sm_count=hw.sm_count, mem_bandwidth_gbps=hw.mem_bandwidth_gbps)
        for hw in session.exec(select(Hardware)).all()
        if counts.get(hw.id) and (include_own or hw.gpu_name != target.get("gpu_name"))
    ]
    matches.sort(key=lambda m: (-m.similarity, -m.experiences, m.hardware_id))
    return matches[:top]


# similarity under which the nearest GPU shares neither architecture nor scale (over the
# facts table's 861 pairs, the plan's former four-column figure's 0.7 cut agreed with this
# cut on 842)
FAR = 0.85


def plan_warnings(target: Mapping[str, Any], similar: Sequence[HardwareMatch]) -> list[str]:
    """What a plan stands on, in words: facts the target took from its architecture (and
    which it lacks), and how far the nearest measured GPU is, fact by fact."""
    name = target.get("gpu_name") or "the target"
    out = []
    if target.get("facts_from"):
        lacking = target.get("unknown_facts")
        out.append(f"{name}: facts from {target['facts_from']}" + (
            f"; unknown: {lacking} (similarity and the ranker go without them; give them "
            "to sharpen the plan)" if lacking else ""))
    if not similar:
        out.append(f"no measured GPU in the store: nothing here was measured near {name}")
        return out
    near = similar[0]
    if near.similarity < FAR:
        facts = [f"arch {target.get('arch') or '?'} vs {near.arch}"]
        for label, key in (("SMs", "sm_count"), ("GB/s", "mem_bandwidth_gbps")):
            mine, theirs = target.get(key), getattr(near, key)
            if mine and theirs:
                facts.append(f"{label} {mine:g} vs {theirs:g} ({mine / theirs:.2f}x)")
            elif theirs:
                facts.append(f"{label} unknown vs {theirs:g}")
        out.append(f"the nearest measured GPU, {near.gpu_name}, is far from {name} "
                   f"(similarity {near.similarity:.2f}; {', '.join(facts)}): every line "
                   "below is a guess until measured there")
    return out


def bootstrap(
    session: Session, target: dict[str, Any], op_type: str | None = None, limit: int = 10,
    include_own: bool = False, shapes: Sequence[str] | None = None,
) -> BootstrapPlan:
    """What to try first on ``target`` (keys: gpu_name, arch, sm_count, ...); with
    ``include_own`` the target GPU's own experiences count too (a second optimization on
    a card already known), otherwise only other hardware (a card never seen). ``shapes``
    (labels, e.g. one shape regime's): each task's best configuration is the fastest on
    those shapes (``_fastest_on_shapes``), not the largest speedup over its run's start;
    a task with no record timed on any of them keeps the largest speedup."""
    matches = similar_hardware(session, target, include_own=include_own)
    current = target.get("triton_version")
    items: list[PlanItem] = []
    for match in matches:
        report = insights(session, op_type=op_type, gpu_name=match.gpu_name, arch=match.arch,
                          current_triton=current)
        for cat in report.categories:
            if not cat.wins:
                continue
            gain = cat.median_speedup or 1.0
            items.append(PlanItem(
                kind="edit", category=cat.category, from_hardware=match.hardware_id,
                evidence=(f"won {cat.wins}/{cat.count} on {match.gpu_name} "
                          f"({cat.significant_wins} with a significant interval), median "
                          f"{gain:.2f}x, best {(cat.best_speedup or gain):.2f}x vs parent"),
                example_ids=cat.example_ids,
                score=round(_weight(match) * cat.win_rate * gain * sureness(cat), 4),
                version_note=cat.version_note if cat.wins == cat.other_version_wins else None,
            ))
        best = _best_configs(session, match, op_type, current)
        if shapes:  # a task none of whose records was timed on the shapes keeps the old rule
            fastest = _fastest_on_shapes(session, match, op_type, current, shapes)
            timed = {(i.task_id, i.dtype) for i in fastest}
            best = fastest + [i for i in best if (i.task_id, i.dtype) not in timed]
        else:  # a task whose records carry no time against a reference (a sweep's points,
            # each against its parent): its fastest over every shape it was timed on
            known = {(i.task_id, i.dtype) for i in best}
            best += [i for i in _fastest_on_shapes(session, match, op_type, current, None)
                     if (i.task_id, i.dtype) not in known]
        items.extend(best)
    # another Triton version's advice after the current version's (retrieval/versions.py);
    # asked about shapes, the configurations measured fastest there lead
    items.sort(key=lambda i: (i.version_note is not None, bool(shapes) and i.kind != "config",
                              -i.score))
    return BootstrapPlan(target=target, similar_hardware=matches, items=items[:limit])


def _best_configs(session: Session, match: HardwareMatch, op_type: str | None,
                  current: str | None = None) -> list[PlanItem]:
    """The best measured configuration per task on that hardware, current Triton version
    first: a config measured under another version stands only where none was under it."""
    stmt = select(Experience).where(
        Experience.hardware_id == match.hardware_id, Experience.verdict == "improved",
        Experience.evidence == "measured", col(Experience.speedup_vs_baseline).is_not(None))
    if op_type:
        stmt = stmt.where(Experience.op_type == op_type)
    best: dict[tuple[str, str], Experience] = {}
    for row in session.exec(stmt).all():
        key = (row.task_id, row.dtype)
        rank = (not other_version(row.triton_version, current), row.speedup_vs_baseline or 0)
        held = best.get(key)
        if held is None or rank > (not other_version(held.triton_version, current),
                                   held.speedup_vs_baseline or 0):
            best[key] = row
    items = []
    for (task_id, dtype), row in best.items():
        record = load_or_skip(row)
        if record is None:  # unreadable row: skipped (kernelkb doctor lists it)
            continue
        gain = row.speedup_vs_baseline or 1.0
        items.append(PlanItem(
            kind="config", category=record.edit.categories[0], config=dict(record.edit.config),
            from_hardware=match.hardware_id,
            evidence=f"best measured {task_id} {dtype} config on {match.gpu_name}: {gain:.2f}x "
                     "vs baseline",
            example_ids=[row.id], score=round(_weight(match) * gain, 4),
            task_id=task_id, dtype=dtype, similarity=match.similarity,
            triton_version=row.triton_version,
            version_note=version_note(row.triton_version, current),
        ))
    return items


def _fastest_on_shapes(session: Session, match: HardwareMatch, op_type: str | None,
                       current: str | None, shapes: Sequence[str] | None) -> list[PlanItem]:
    """Per task and dtype, the configuration measured fastest on ``shapes`` there (None:
    on every shape its records were timed on).

    Why not ``speedup_vs_baseline``: each run divides by its own start, timed on its own
    shapes, so a run that began from a slow kernel on large shapes (a space measurement)
    outranks a faster configuration tuned on the shapes that matter now. Times on the same
    GPU and shape compare across runs: each correct timing on one of ``shapes`` (call time,
    or GPU time where the shape is launch-bound) is divided by the fastest time any record
    has there. A shape a record was never timed on
    counts as the slowest ratio any record has there: the configuration runs on every
    shape of the regime, so one lucky shape (split-K on M=16 alone, slow at M=128) must not
    decide. A shape asked that no record was timed on is read from the nearest measured one
    (``stand_ins``). The score is the geometric mean; the current Triton version comes
    first."""
    stmt = select(Experience).where(
        Experience.hardware_id == match.hardware_id, Experience.evidence == "measured",
        col(Experience.verdict).in_(("improved", "neutral", "regressed")))
    if op_type:
        stmt = stmt.where(Experience.op_type == op_type)
    # what the ranking needs of each record, not the record (an imported tuning set is
    # tens of thousands of them)
    light: list[tuple[tuple[str, str], dict[str, tuple[float, float | None]], _Pick]] = []
    for row in session.exec(stmt).all():
        record = load_or_skip(row)
        if record is None or not record.edit.config:
            continue
        times = {t.shape: (t.median_ms, t.graph_ms or None) for t in record.feedback.timings
                 if t.median_ms > 0}
        if times:
            light.append(((row.task_id, row.dtype), times, _Pick(
                record.edit.categories[0], dict(record.edit.config), record.id,
                record.env.triton_version)))
    measured = {s for _, times, _ in light for s in times}
    read_from = stand_ins(shapes, measured) if shapes is not None else {s: s for s in measured}
    wanted = set(read_from.values())
    timed: dict[tuple[str, str], list[tuple[_Pick, dict[str, tuple[float, float | None]]]]] = {}
    for key, times, pick in light:
        mine = {s: v for s, v in times.items() if s in wanted}
        if mine:
            timed.setdefault(key, []).append((pick, mine))
    items = []
    for (task_id, dtype), entries in timed.items():
        ratios = _relative_times([times for _, times in entries])
        # current Triton version first, then the smallest relative time, then more shapes
        _, rel, _, pick, times = min(
            ((other_version(p.triton_version, current), rel, -len(t), p, t)
             for (p, t), rel in zip(entries, ratios, strict=True)),
            key=lambda x: x[:3])
        covered = [s for s, m in read_from.items() if m in times]
        near = sum(read_from[s] != s for s in covered)
        via = f" ({near} read from the nearest measured shape)" if near else ""
        items.append(PlanItem(
            kind="config", category=pick.category, config=pick.config,
            from_hardware=match.hardware_id,
            evidence=f"fastest measured {task_id} {dtype} config on {match.gpu_name} over "
                     f"{len(covered)} of the {len(read_from)} shapes asked{via}: {rel:.2f}x "
                     "the fastest time per shape",
            example_ids=[pick.id] if pick.id else [], score=round(_weight(match) / rel, 4),
            task_id=task_id, dtype=dtype, similarity=match.similarity,
            triton_version=pick.triton_version,
            version_note=version_note(pick.triton_version, current)))
    return items


class _Pick(NamedTuple):
    """What a plan item says of the record it offers."""

    category: str
    config: dict[str, Any]
    id: str | None
    triton_version: str


NEAR_SHAPE = 2.0  # a stand-in shape: at most this sum of |log2| ratios over the dims away


def stand_ins(shapes: Sequence[str], measured: set[str]) -> dict[str, str]:
    """Per shape asked, the measured shape its figures are read from: itself where it was
    measured, else the nearest measured shape with the same dimension names (sum over the
    dims of |log2 ratio|, at most ``NEAR_SHAPE``: 4x in one dimension, 2x in two). Why: a
    related op (RMSNorm for a user's LayerNorm) or another run was timed on other sizes;
    without this, a task whose shapes none of its records share falls back to the largest
    speedup over some run's start, on shapes that may be nothing like these."""
    parsed = {m: dims for m in measured if (dims := _dims(m)) is not None}
    out: dict[str, str] = {}
    for shape in shapes:
        dims = _dims(shape)
        if shape in measured or dims is None:
            out[shape] = shape
            continue
        near = [(sum(abs(math.log2(dims[k] / other[k])) for k in dims), m)
                for m, other in parsed.items() if other.keys() == dims.keys()]
        best = min(near, default=None)
        out[shape] = best[1] if best is not None and best[0] <= NEAR_SHAPE else shape
    return out


def _dims(label: str) -> dict[str, int] | None:
    """"rows=4096,hidden=8192" -> {"rows": 4096, "hidden": 8192}; None if not all sizes."""
    try:
        dims = {k: int(v) for k, v in (part.split("=", 1) for part in label.split(","))}
    except ValueError:
        return None
    return dims if dims and all(v > 0 for v in dims.values()) else None


LAUNCH_BOUND = 1.25  # fastest call time / fastest GPU time above which a shape is host-bound


def _relative_times(entries: list[dict[str, tuple[float, float | None]]]) -> list[float]:
    """Per entry, the geometric mean over every shape any entry was timed on of time / the
    fastest time there (1.0: fastest on every one); a shape an entry lacks counts as the
    slowest ratio there. Call time decides, except on a launch-bound shape (the fastest call
    over ``LAUNCH_BOUND`` x the fastest GPU time): there call time measures the Python
    launch, not the configuration (a split-K's second launch reads as slow), so GPU time
    (CUDA-graph replay) decides and an entry without it was not timed there."""
    fastest_call: dict[str, float] = {}
    fastest_gpu: dict[str, float] = {}
    for times in entries:
        for shape, (call, gpu) in times.items():
            fastest_call[shape] = min(call, fastest_call.get(shape, math.inf))
            if gpu:
                fastest_gpu[shape] = min(gpu, fastest_gpu.get(shape, math.inf))
    bound = {s for s, gpu in fastest_gpu.items() if fastest_call[s] > LAUNCH_BOUND * gpu}
    own = [{s: (gpu / fastest_gpu[s] if gpu and s in bound else call / fastest_call[s])
            for s, (call, gpu) in times.items() if gpu or s not in bound}
           for times in entries]
    slowest: dict[str, float] = {}
    for ratios in own:
        for shape, r in ratios.items():
            slowest[shape] = max(r, slowest.get(shape, 1.0))
    return [geomean(ratios.get(s, worst) for s, worst in slowest.items()) for ratios in own]


