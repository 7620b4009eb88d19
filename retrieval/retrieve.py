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
from retrieval.lexical import bm25_ranks, query_terms
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

    terms = query_terms(query.kernel_source, query.feedback_text)
    ops = sorted({c.op_type for c in candidates})
    lexical_rank = {i: r for i, r in bm25_ranks(session, terms, ops).items() if i in by_id}
    lexical_rank = {i: n for n, i in enumerate(sorted(lexical_rank, key=lexical_rank.get))}
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
    pool = wins[: POOL * query.k] + losses[: POOL * max(query.max_warnings, 1)]
    rows = {r.id: r for r in session.exec(select(Experience).where(Experience.id.in_(pool)))}
    keys = {i: (rows[i].categories, _config_key(rows[i])) for i in pool}
    picked_wins = diversify([i for i in wins if i in rows], keys, query.k)
    picked_losses = diversify([i for i in losses if i in rows], keys, query.max_warnings)
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
