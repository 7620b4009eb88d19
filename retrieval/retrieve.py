"""The query plan: ladder candidates (SQL) -> cosine on those ids (numpy) + BM25 (FTS5)
-> fusion and evidence weights -> diversity -> few-shot block.

Chroma's ``where`` is not on the hot path (59 ms p50 at 100k); see kb/vector_index.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from sqlmodel import Session, select

from kb.embedder import Embedder
from kb.models import Experience
from kb.vector_index import VectorIndex
from retrieval.fewshot import render_block
from retrieval.ladder import Candidate, gather
from retrieval.lexical import bm25_ranks, has_code, query_terms
from retrieval.query import RetrievalQuery
from retrieval.ranking import diversify, rrf, score, support_counts, usefulness
from retrieval.schemas import Hit, RetrievalResult

VECTOR_TOP = 300  # cosine ranks beyond this add nothing to RRF
POOL = 8  # rows read back per wanted hit, to leave room for the diversity filter


def retrieve(
    session: Session, embedder: Embedder, index: VectorIndex, query: RetrievalQuery
) -> RetrievalResult:
    clock = _Clock()
    candidates, rungs_used = gather(session, query, enough=max(4 * query.k, 40))
    by_id = {c.id: c for c in candidates}
    clock.lap("ladder_sql")

    qvec = embedder.embed_query(query.embedding_text())
    clock.lap("embed_query")
    vector_hits = index.search(qvec, list(by_id), VECTOR_TOP)
    similarity = dict(vector_hits)
    vector_rank = {exp_id: n for n, (exp_id, _) in enumerate(vector_hits)}
    clock.lap("vector")

    lexical_rank: dict[str, int] = {}
    if has_code(query.kernel_source, query.feedback_text):
        terms = query_terms(query.kernel_source, query.feedback_text)
        ops = sorted({c.op_type for c in candidates})
        ranked = [i for i in bm25_ranks(session, terms, ops) if i in by_id]  # best first
        lexical_rank = {i: n for n, i in enumerate(ranked)}
    clock.lap("lexical")

    relevance = rrf([vector_rank, lexical_rank], list(by_id))
    support = support_counts(candidates)
    scores = {
        c.id: score(relevance[c.id], usefulness(c, support[(c.op_type, c.categories)], query.dtype))
        for c in candidates
    }
    wins = sorted((c.id for c in candidates if not c.is_loss), key=lambda i: -scores[i])
    losses = sorted(
        (c.id for c in candidates if c.is_loss and c.rung.same_hardware and not c.rung.related),
        key=lambda i: -scores[i],
    )
    rows: dict[str, Experience] = {}
    picked_wins = _pick(session, wins, query.k, rows)
    picked_losses = _pick(session, losses, query.max_warnings, rows)
    clock.lap("rank")

    def hit(exp_id: str) -> Hit:
        c: Candidate = by_id[exp_id]
        return Hit(
            id=exp_id, score=round(scores[exp_id], 6), rung=c.rung.label,
            similarity=similarity.get(exp_id), lexical_rank=lexical_rank.get(exp_id),
            evidence=c.evidence, support=support[(c.op_type, c.categories)],
            record=rows[exp_id].to_record(),
        )

    hits = [hit(i) for i in picked_wins]
    warnings = [hit(i) for i in picked_losses]
    block = render_block(hits, warnings, query.max_chars)
    clock.lap("render")
    return RetrievalResult(
        hits=hits, warnings=warnings, rungs_used=rungs_used, candidates=len(candidates),
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
