"""Ranking: fuse vector and lexical ranks, weigh by evidence and outcome, order, diversify.

Score = relevance x usefulness. Relevance is reciprocal-rank fusion of the cosine rank and
the BM25 rank, scaled to [0.5, 1] so that it orders hits of equal usefulness but cannot
lift an unmeasured claim above a measured win. Usefulness multiplies: evidence level
(measured > verified > claimed), confidence (an interval that cleared the noise floor >
no known spread), outcome (bigger verified speedup > neutral), support
(repeated wins of the same kind > one lucky run), ladder rung (same hardware > other) and a
dtype match. All of it is computed over the candidate arrays at once (thousands of
candidates at 100k rows: a Python loop cost ~7 ms a query).

Score orders hits within a group, not across: the query's own op comes before related
ops (a related op's big, often-repeated win outscored every softmax win and took all five
slots), and within each, rows measured on the query's Triton version before the others.
The same edit is shown once (``row_cache.edit_keys``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kernelkb.retrieval.ladder import Candidates

RRF_K = 60
EVIDENCE_WEIGHT = {"measured": 1.0, "verified": 0.55, "claimed": 0.3}
# how sure the verdict is (ExperienceRecord.confidence): a win whose interval cleared the
# noise floor outweighs a single figure with no known spread (imports, older records)
CONFIDENCE_WEIGHT = {"significant": 1.0, "within_noise": 0.85, "unknown_spread": 0.75}
DTYPE_MISMATCH = 0.9


def rrf(n: int, rankings: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Reciprocal-rank fusion, normalised to max 1. Each ranking is (positions, ranks):
    candidate positions and their rank (0 = best) in that ranking."""
    raw = np.zeros(n, dtype=np.float64)
    for positions, ranks in rankings:
        np.add.at(raw, positions, 1.0 / (RRF_K + 1 + ranks))
    top = raw.max(initial=0.0)
    return raw / top if top > 0 else raw


def support_counts(c: Candidates) -> np.ndarray:
    """Per candidate: the wins among the candidates with its (op, categories), i.e. how
    often this kind of edit won here."""
    if not len(c):
        return np.zeros(0, dtype=np.int64)
    key = c.column("op_type").astype(np.int64) * (1 << 31) + c.column("categories")
    _, inverse = np.unique(key, return_inverse=True)
    won = c.column("verdict") == c.snap.vocab["verdict"].code("improved")
    return np.bincount(inverse, weights=won).astype(np.int64)[inverse]


def outcome_weight(c: Candidates) -> np.ndarray:
    verdict = c.column("verdict")
    vocab = c.snap.vocab["verdict"]
    gain = c.column("speedup_vs_parent")
    usable = np.isfinite(gain) & (gain != 0)  # Python's `speedup or default`
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.log(np.where(usable, gain, 1.05))
        down = -np.log(np.where(usable, gain, 0.95))
    out = np.ones(len(c), dtype=np.float64)
    out = np.where(verdict == vocab.code("improved"), 1.0 + np.clip(up, 0.0, 1.0), out)
    out = np.where(verdict == vocab.code("neutral"), 0.6, out)
    # for warnings: a bigger loss is a stronger warning
    return np.where(verdict == vocab.code("regressed"), 1.0 + np.clip(down, 0.0, 1.0), out)


def usefulness(c: Candidates, support: np.ndarray, dtype: str | None) -> np.ndarray:
    evidence = c.snap.vocab["evidence"]
    by_code = np.array([EVIDENCE_WEIGHT.get(w, 0.3) for w in evidence.words] or [0.3])
    rung_weight = np.array([r.weight for r in c.rungs])
    confidence = c.snap.vocab["confidence"]
    by_confidence = np.array([CONFIDENCE_WEIGHT.get(w, CONFIDENCE_WEIGHT["unknown_spread"])
                              for w in confidence.words] or [1.0])
    weight = by_code[c.column("evidence")] * by_confidence[c.column("confidence")] * \
        outcome_weight(c) * rung_weight[c.rung]
    weight = weight * np.where(support > 1, 1.0 + 0.1 * np.minimum(support - 1, 5), 1.0)
    if dtype:
        mismatch = c.column("dtype") != c.snap.vocab["dtype"].code(dtype)
        weight = weight * np.where(mismatch, DTYPE_MISMATCH, 1.0)
    return weight


def score(relevance: np.ndarray, use: np.ndarray) -> np.ndarray:
    return (0.5 + 0.5 * relevance) * use


def best_first(scores: np.ndarray, mask: np.ndarray, *tiers: np.ndarray) -> np.ndarray:
    """Positions where mask holds: by ``tiers`` (integer arrays, lower first, the first
    most significant), then highest score (ties keep candidate order)."""
    positions = np.flatnonzero(mask)
    keys = [-scores[positions], *(t[positions] for t in reversed(tiers))]
    return positions[np.lexsort(keys)]


