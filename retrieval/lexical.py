"""The lexical side: BM25 (SQLite FTS5) over diffs, identifiers and summaries.

Embeddings of natural language handle code identifiers poorly (``BLOCK_SIZE``,
``tl.max``, ``num_warps``); BM25 over the diff catches them. The query keeps the most
distinctive identifiers of the kernel source and words of the feedback, OR-ed together.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from sqlalchemy import text
from sqlmodel import Session

from kb.db import FTS_TABLE, FTS_VOCAB

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_STOP = frozenset(
    """def return import from for range and not the with this that else elif none true false
    triton torch tl self int float pid mask other offs off program_id load store arange
    constexpr jit kernel run shape dtype numel device cuda empty zeros where was are has
    def into than then when its per""".split()
)


def query_terms(*texts: str | None, limit: int = 16) -> list[str]:
    """Distinctive tokens: identifiers with digits/underscores/caps first, then frequency."""
    counts: Counter[str] = Counter()
    for chunk in texts:
        if chunk:
            counts.update(t for t in _TOKEN.findall(chunk) if t.lower() not in _STOP)

    def weight(token: str) -> tuple[int, int]:
        code_like = any(c.isdigit() or c == "_" for c in token) or token.isupper()
        return (1 if code_like else 0, counts[token])

    ranked = sorted(counts, key=weight, reverse=True)
    return [t.lower() for t in ranked[:limit]]


MAX_DOC_SHARE = 0.02  # a term in more than 2% of the rows does not discriminate
MIN_DOC_LIMIT = 200


def distinctive(session: Session, terms: Sequence[str]) -> list[str]:
    """Drop terms that occur in too many rows: they cost a scan and rank nothing."""
    conn = session.connection()
    total = conn.execute(text(f"SELECT max(rowid) FROM {FTS_TABLE}")).scalar() or 0
    limit = max(MIN_DOC_LIMIT, int(MAX_DOC_SHARE * total))
    keep = []
    for term in terms:
        docs = conn.execute(text(f"SELECT doc FROM {FTS_VOCAB} WHERE term = :t"),
                            {"t": term}).scalar()
        if docs and docs <= limit:
            keep.append(term)
    return keep


def bm25_ranks(
    session: Session, terms: Sequence[str], op_types: Sequence[str], limit: int = 400
) -> dict[str, int]:
    """Rank (0 = best) of the best-matching experiences of the given ops."""
    if not terms or session.get_bind().dialect.name != "sqlite":
        return {}
    terms = distinctive(session, terms)
    if not terms:
        return {}
    match = " OR ".join(f'"{t}"' for t in terms)
    ops = ",".join(f":op{i}" for i in range(len(op_types)))
    params: dict[str, object] = {f"op{i}": op for i, op in enumerate(op_types)}
    params.update(match=match, limit=limit)
    rows = session.connection().execute(
        text(f"SELECT exp_id FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH :match "
             f"AND op_type IN ({ops}) ORDER BY bm25({FTS_TABLE}) LIMIT :limit"),
        params,
    ).all()
    return {row[0]: rank for rank, row in enumerate(rows)}
