"""The query plan: ladder candidates (in-memory columns, checked against SQL) -> cosine on
those ids (numpy) + BM25 (FTS5) -> fusion and evidence weights -> diversity -> few-shot
block.

Chroma's ``where`` is not on the hot path (59 ms p50 at 100k); see kb/vector_index.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import numpy as np
from sqlmodel import Session, select

from kb.embedder import Embedder
from kb.models import Experience
from kb.queries import load_or_skip
from kb.vector_index import VectorIndex
from retrieval.columns import snapshot
from retrieval.fewshot import render_block
from retrieval.ladder import gather
from retrieval.lexical import bm25_ranks, has_code, query_terms
from retrieval.query import RetrievalQuery
from retrieval.ranking import best_first, diversify, rrf, score, support_counts, usefulness
from retrieval.schemas import Hit, RetrievalResult

VECTOR_TOP = 300  # cosine ranks beyond this add nothing to RRF
POOL = 8  # rows read back per wanted hit, to leave room for the diversity filter


def retrieve(
    session: Session, embedder: Embedder | None, index: VectorIndex | None,
    query: RetrievalQuery,
) -> RetrievalResult:
    """Vectors off (no embedder / index: a bare GPU host): relevance from BM25 alone."""
    clock = _Clock()
    cands, rungs_used = gather(snapshot(session), query, enough=max(4 * query.k, 40))
    ids = cands.ids(np.arange(len(cands)))
    at = {exp_id: n for n, exp_id in enumerate(ids)}
    clock.lap("ladder")

    vec_pos, vec_sim = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if embedder is not None and index is not None:
        qvec = embedder.embed_query(query.embedding_text())
        clock.lap("embed_query")
        vec_pos, vec_sim = index.top(qvec, ids, VECTOR_TOP)
        clock.lap("vector")

    lex_pos = np.zeros(0, dtype=np.int64)
    if has_code(query.kernel_source, query.feedback_text):
        terms = query_terms(query.kernel_source, query.feedback_text)
        ops = sorted({cands.snap.vocab["op_type"].words[c] for c in set(cands.column("op_type"))})
        ranked = bm25_ranks(session, terms, ops)  # id -> rank, best first
        lex_pos = np.array([at[i] for i in ranked if i in at], dtype=np.int64)
    clock.lap("lexical")

    n = len(cands)
    relevance = rrf(n, [(vec_pos, np.arange(len(vec_pos))), (lex_pos, np.arange(len(lex_pos)))])
    support = support_counts(cands)
    scores = score(relevance, usefulness(cands, support, query.dtype))
    same_hw = np.array([r.same_hardware and not r.related for r in cands.rungs])[cands.rung] \
        if n else np.zeros(0, dtype=bool)
    wins = best_first(scores, ~cands.is_loss)
    losses = best_first(scores, cands.is_loss & same_hw)
    similarity = dict(zip(vec_pos.tolist(), vec_sim.tolist(), strict=True))
    lexical_rank = {int(p): r for r, p in enumerate(lex_pos)}
    rows: dict[str, Experience] = {}
    picked_wins = _pick(session, [ids[p] for p in wins[: POOL * query.k]], query.k, rows)
    picked_losses = _pick(session, [ids[p] for p in losses[: POOL * query.max_warnings]],
                          query.max_warnings, rows)
    clock.lap("rank")

    def hit(exp_id: str) -> Hit | None:
        p = at[exp_id]
        record = load_or_skip(rows[exp_id])  # an unreadable row is skipped, not fatal
        if record is None:
            return None
        return Hit(
            id=exp_id, score=round(float(scores[p]), 6), rung=cands.rungs[cands.rung[p]].label,
            similarity=similarity.get(p), lexical_rank=lexical_rank.get(p),
            evidence=cands.snap.vocab["evidence"].words[cands.column("evidence")[p]],
            support=int(support[p]), record=record,
        )

    hits = [h for h in map(hit, picked_wins) if h is not None]
    warnings = [h for h in map(hit, picked_losses) if h is not None]
    block = render_block(hits, warnings, query.max_chars)
    clock.lap("render")
    return RetrievalResult(
        hits=hits, warnings=warnings, rungs_used=rungs_used, candidates=n,
        prompt_block=block, timings_ms=clock.laps,
    )


def _pick(session: Session, ordered: list[str], k: int, rows: dict[str, Experience]) -> list[str]:
    """Diversify down the ranked ids, reading full rows in small chunks as the walk needs
    them (the top few usually suffice; reading the whole pool cost ~5 ms at 100k)."""
    picked: list[str] = []
    if k == 0:
        return picked
    keys: dict[str, tuple[str, str]] = {}
    chunk = 2 * k
    for start in range(0, min(len(ordered), POOL * k), chunk):
        part = ordered[start : start + chunk]
        missing = [i for i in part if i not in rows]
        if missing:
            rows.update((r.id, r) for r in session.exec(
                select(Experience).where(Experience.id.in_(missing))))
        keys.update((i, (rows[i].categories, _config_key(rows[i]))) for i in part if i in rows)
        seen = [i for i in ordered[: start + chunk] if i in keys]
        picked = diversify(seen, keys, k)
        if len(picked) >= k:
            break
    return picked


def _config_key(row: Experience) -> str:
    return json.dumps(json.loads(row.record_json)["edit"]["config"], sort_keys=True)


class _Clock:
    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round((now - self._last) * 1000, 3)
        self._last = now


def result_ids(results: Sequence[Hit]) -> list[str]:
    return [h.id for h in results]
