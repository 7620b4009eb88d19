"""The query plan: ladder candidates (in-memory columns, checked against SQL) -> cosine on
those ids (numpy) + full-text rank (SQLite FTS5 BM25 / PostgreSQL ts_rank:
retrieval/lexical.py) -> fusion and evidence weights -> diversity -> few-shot block.

Chroma's ``where`` is not on the hot path (59 ms p50 at 100k); see kb/vector_index.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
from sqlmodel import Session

from kernelkb.kb.embedder import Embedder
from kernelkb.kb.vector_index import VectorIndex
from kernelkb.retrieval.columns import snapshot
from kernelkb.retrieval.fewshot import render_block
from kernelkb.retrieval.ladder import Candidates, Rung, gather
from kernelkb.retrieval.lexical import bm25_ranks, has_code, query_terms
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.retrieval.ranking import best_first, rrf, score, support_counts, usefulness
from kernelkb.retrieval.row_cache import ParsedRow, RowCache
from kernelkb.retrieval.schemas import Hit, RetrievalResult
from kernelkb.retrieval.versions import version_note

VECTOR_TOP = 300  # cosine ranks beyond this add nothing to RRF
POOL = 8  # rows read back per wanted hit, to leave room for the diversity filter
EVERY_RUNG = 2**62  # non-losses no ladder reaches: gather descends every rung


def retrieve(
    session: Session, embedder: Embedder | None, index: VectorIndex | None,
    query: RetrievalQuery, query_vector: np.ndarray | None = None,
) -> RetrievalResult:
    """Vectors off (no embedder / index: a bare GPU host): relevance from BM25 alone.
    ``query_vector``: the query's embedding when the caller has it already (the service
    embeds while holding no worker thread: kernelkb/api/routes/knowledge.py)."""
    clock = _Clock()
    snap = snapshot(session)
    qvec = None
    if embedder is not None and index is not None:
        qvec = query_vector if query_vector is not None \
            else embedder.embed_query(query.embedding_text())
        clock.lap("embed_query")
    # the ladder stops at 4k non-losses, most of them the same edits in other regimes or
    # dtypes: where those hold fewer than k distinct edits, every rung is gathered again,
    # so related ops fill in as they should
    for enough in (max(4 * query.k, 40), EVERY_RUNG):
        cands, rungs_used = gather(snap, query, enough=enough)
        ids = cands.ids(np.arange(len(cands)))
        at = {exp_id: n for n, exp_id in enumerate(ids)}
        clock.lap("ladder")

        vec_pos, vec_sim = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if qvec is not None and index is not None:
            vec_pos, vec_sim = index.top(qvec, ids, VECTOR_TOP)
            clock.lap("vector")

        lex_pos = np.zeros(0, dtype=np.int64)
        if has_code(query.kernel_source, query.feedback_text):
            terms = query_terms(query.kernel_source, query.feedback_text)
            ops = sorted({cands.snap.vocab["op_type"].words[c]
                          for c in set(cands.column("op_type"))})
            ranked = bm25_ranks(session, terms, ops)  # id -> rank, best first
            lex_pos = np.array([at[i] for i in ranked if i in at], dtype=np.int64)
        clock.lap("lexical")

        n = len(cands)
        relevance = rrf(n, [(vec_pos, np.arange(len(vec_pos))),
                            (lex_pos, np.arange(len(lex_pos)))])
        support = support_counts(cands)
        scores = score(relevance, usefulness(cands, support, query.dtype))
        same_hw = _per_rung(cands, lambda r: r.same_hardware and not r.related)
        related = _per_rung(cands, lambda r: r.related)
        other_version = _other_version(cands, query.triton_version)
        wins = best_first(scores, ~cands.is_loss, related, other_version)
        losses = best_first(scores, cands.is_loss & same_hw, other_version)
        similarity = dict(zip(vec_pos.tolist(), vec_sim.tolist(), strict=True))
        lexical_rank = {int(p): r for r, p in enumerate(lex_pos)}
        rows: dict[str, ParsedRow] = {}
        shown: set[tuple[str, str]] = set()  # edits already picked: never twice
        pick = partial(_pick, session, snap.rows, rows)
        picked_wins = pick([ids[p] for p in wins[~related[wins]][: POOL * query.k]], query.k,
                           shown)
        picked_wins += pick([ids[p] for p in wins[related[wins]][: POOL * query.k]],
                            query.k - len(picked_wins), shown)  # related ops fill in
        picked_losses = pick([ids[p] for p in losses[: POOL * query.max_warnings]],
                             query.max_warnings, set())
        clock.lap("rank")
        # fewer non-losses than asked for: the ladder went down every rung already
        if len(picked_wins) >= query.k or np.count_nonzero(~cands.is_loss) < enough:
            break

    def hit(exp_id: str) -> Hit | None:
        p = at[exp_id]
        record = rows[exp_id].record()  # an unreadable row is skipped, not fatal
        if record is None:
            return None
        return Hit(
            id=exp_id, score=round(float(scores[p]), 6), rung=cands.rungs[cands.rung[p]].label,
            similarity=similarity.get(p), lexical_rank=lexical_rank.get(p),
            evidence=cands.snap.vocab["evidence"].words[cands.column("evidence")[p]],
            support=int(support[p]), related=bool(related[p]),
            version_note=version_note(rows[exp_id].triton_version, query.triton_version),
            record=record,
        )

    hits = [h for h in map(hit, picked_wins) if h is not None]
    warnings = [h for h in map(hit, picked_losses) if h is not None]
    block = render_block(hits, warnings, query.max_chars)
    clock.lap("render")
    return RetrievalResult(
        hits=hits, warnings=warnings, rungs_used=rungs_used, candidates=n,
        prompt_block=block, timings_ms=clock.laps,
    )


def _pick(session: Session, cache: RowCache, rows: dict[str, ParsedRow], ordered: list[str],
          k: int, shown: set[tuple[str, str]]) -> list[str]:
    """Walk the ranked ids, skipping an edit already in ``shown`` (adding the picked ones),
    reading rows in small chunks as the walk needs them (the top few usually suffice;
    reading the whole pool cost ~5 ms at 100k), from the snapshot's cache when there."""
    picked: list[str] = []
    if k <= 0:
        return picked
    chunk = 2 * k
    for start in range(0, len(ordered), chunk):
        part = ordered[start : start + chunk]
        missing = [i for i in part if i not in rows]
        if missing:
            rows.update(cache.get_many(session, missing))
        for exp_id in part:
            if exp_id not in rows:
                continue
            keys = rows[exp_id].keys
            if keys & shown:
                continue
            picked.append(exp_id)
            shown.update(keys)
            if len(picked) == k:
                return picked
    return picked


def _per_rung(cands: Candidates, test: Callable[[Rung], bool]) -> np.ndarray:
    """A per-candidate boolean from a property of its rung."""
    if not len(cands):
        return np.zeros(0, dtype=bool)
    return np.array([test(r) for r in cands.rungs], dtype=bool)[cands.rung]


def _other_version(cands: Candidates, current: str | None) -> np.ndarray:
    """Per candidate: measured under another Triton version than the query's."""
    if not current or not len(cands):
        return np.zeros(len(cands), dtype=bool)
    return cands.column("triton_version") != cands.snap.vocab["triton_version"].code(current)


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
