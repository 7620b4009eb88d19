"""Ranking: fuse vector and lexical ranks, weigh by evidence and outcome, diversify.

Score = relevance x usefulness. Relevance is reciprocal-rank fusion of the cosine rank and
the BM25 rank, scaled to [0.5, 1] so that it orders hits of equal usefulness but cannot
lift an unmeasured claim above a measured win. Usefulness multiplies: evidence level
(measured > verified > claimed), outcome (bigger verified speedup > neutral), support
(repeated wins of the same kind > one lucky run), ladder rung (same hardware and Triton
version > other) and a dtype match.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from retrieval.ladder import Candidate

RRF_K = 60
EVIDENCE_WEIGHT = {"measured": 1.0, "verified": 0.55, "claimed": 0.3}
DTYPE_MISMATCH = 0.9


def rrf(ranks: Sequence[dict[str, int]], ids: Sequence[str]) -> dict[str, float]:
    """Reciprocal-rank fusion over several rankings, normalised to max 1.

    Walks the rankings (a few hundred ids), not every candidate times every ranking:
    at 100k rows the candidates number thousands."""
    raw = dict.fromkeys(ids, 0.0)
    for ranking in ranks:
        for exp_id, rank in ranking.items():
            if exp_id in raw:
                raw[exp_id] += 1.0 / (RRF_K + 1 + rank)
    top = max(raw.values(), default=0.0)
    if top <= 0:
        return raw
    return {i: v / top for i, v in raw.items()}


def support_counts(candidates: Sequence[Candidate]) -> Counter[tuple[str, str]]:
    """Wins per (op, categories): how often this kind of edit won here."""
    return Counter((c.op_type, c.categories) for c in candidates if c.verdict == "improved")


def outcome_weight(c: Candidate) -> float:
    if c.verdict == "improved":
        gain = c.speedup_vs_parent or 1.05
        return 1.0 + min(max(math.log(gain), 0.0), 1.0)
    if c.verdict == "neutral":
        return 0.6
    if c.verdict == "regressed":  # for warnings: a bigger loss is a stronger warning
        return 1.0 + min(max(-math.log(c.speedup_vs_parent or 0.95), 0.0), 1.0)
    return 1.0


def usefulness(c: Candidate, support: int, dtype: str | None) -> float:
    weight = EVIDENCE_WEIGHT.get(c.evidence, 0.3) * outcome_weight(c) * c.rung.weight
    if support > 1:
        weight *= 1.0 + 0.1 * min(support - 1, 5)
    if dtype and c.dtype != dtype:
        weight *= DTYPE_MISMATCH
    return weight


def score(relevance: float, use: float) -> float:
    return (0.5 + 0.5 * relevance) * use


def diversify(
    ordered: Sequence[str], keys: dict[str, tuple[str, str]], k: int,
    cosine: dict[tuple[str, str], float] | None = None, max_cosine: float = 0.97,
) -> list[str]:
    """Greedy pick: one hit per (categories, config) key and no near-duplicate texts."""
    picked: list[str] = []
    taken: set[tuple[str, str]] = set()
    for exp_id in ordered:
        key = keys[exp_id]
        if key in taken:
            continue
        if cosine and any(cosine.get((exp_id, p), 0.0) > max_cosine for p in picked):
            continue
        picked.append(exp_id)
        taken.add(key)
        if len(picked) == k:
            break
    return picked
