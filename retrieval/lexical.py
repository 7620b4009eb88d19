"""The lexical side: full-text ranking over diffs, identifiers and summaries.

Embeddings of natural language handle code identifiers poorly (``BLOCK_SIZE``,
``tl.max``, ``num_warps``); full-text search over the diff catches them. The query keeps
the most distinctive identifiers of the kernel source and words of the feedback, OR-ed
together. SQLite: BM25 of FTS5. PostgreSQL: its own full-text search (``tsvector`` with a
GIN index, kb/db.py), each term a ``phraseto_tsquery`` (an identifier is a phrase of its
``_``-separated parts there), ordered by ``ts_rank``. Both give the ranker the same thing:
exp_id -> rank, 0 = best. Elsewhere the lexical side is off, and says so once (a warning).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Sequence

from sqlalchemy import text
from sqlmodel import Session

from kernelkb.kb.db import FTS_TABLE, FTS_VOCAB, engine_of, lexical_enabled

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
# every alternative starts at a word boundary: a match is tried once per word, so a
# 200,000-character run of letters costs one pass, not one pass per position (quadratic)
_CODE = re.compile(r"\b[A-Za-z]\w*_\w+|\b[A-Za-z]+\d\w*|\b[A-Z]{2,}\w*|\b\w+\.\w+\(")
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
    docs = _DOC_COUNTS.lookup(session, terms, total, limit)
    return [t for t in terms if 0 < docs.get(t, 0) <= limit]


class _DocCounts:
    """Per-term document counts, cached per database.

    fts5vocab counts a term's documents by walking its whole posting list (~1 ms per
    common term at 100k rows, 12 ms per query before this cache). Only common terms (over
    the threshold) are cached, until the table has grown by a tenth; rare terms are cheap
    to count and are read fresh, so a newly ingested identifier is found at once.
    """

    GROWTH = 1.1

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], tuple[int, int]] = {}  # (db, term) -> (docs, total)

    def lookup(
        self, session: Session, terms: Sequence[str], total: int, limit: int
    ) -> dict[str, int]:
        db = str(engine_of(session).url)
        with self._lock:
            known = {t: self._counts.get((db, t)) for t in terms}
        fresh = {t: v[0] for t, v in known.items()
                 if v is not None and total <= self.GROWTH * max(v[1], 1)}
        stale = [t for t in terms if t not in fresh]
        if stale:
            read = _read_doc_counts(session, stale, limit)
            read = {t: int(read.get(t, 0)) for t in stale}
            with self._lock:
                self._counts.update(((db, t), (n, total)) for t, n in read.items() if n > limit)
            fresh.update(read)
        return fresh


_DOC_COUNTS = _DocCounts()


def _read_doc_counts(session: Session, terms: Sequence[str], limit: int) -> dict[str, int]:
    """Documents per term. FTS5: its vocabulary table. PostgreSQL: a count through the GIN
    index, stopped at twice the limit (above the limit is all that matters, and twice it
    stays above while the cache keeps the figure: the table grows a tenth at most)."""
    params = {f"t{i}": t for i, t in enumerate(terms)}
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        counts = " UNION ALL ".join(
            f"SELECT :t{i} AS term, (SELECT count(*) FROM (SELECT 1 FROM {FTS_TABLE} "
            f"WHERE tsv @@ phraseto_tsquery('simple', :t{i}) LIMIT :cap) AS m) AS doc"
            for i in range(len(terms)))
        return dict(conn.execute(text(counts), {**params, "cap": 2 * limit + 1}).all())
    names = ",".join(f":t{i}" for i in range(len(terms)))
    return dict(conn.execute(
        text(f"SELECT term, doc FROM {FTS_VOCAB} WHERE term IN ({names})"), params).all())


def has_code(*texts: str | None) -> bool:
    """Whether a query carries identifiers (``BLOCK_SIZE``, ``tl.max``, ``num_warps``):
    only then can BM25 add what the embedding misses."""
    return any(chunk and _CODE.search(chunk) for chunk in texts)


def bm25_ranks(
    session: Session, terms: Sequence[str], op_types: Sequence[str], limit: int = 400
) -> dict[str, int]:
    """Rank (0 = best) of the best-matching experiences of the given ops."""
    if not terms or not op_types:
        return {}
    if not lexical_enabled(session.get_bind()):
        _say_off_once(session)
        return {}
    terms = distinctive(session, terms)
    if not terms:
        return {}
    ops = ",".join(f":op{i}" for i in range(len(op_types)))
    params: dict[str, object] = {f"op{i}": op for i, op in enumerate(op_types)}
    params["limit"] = limit
    if session.get_bind().dialect.name == "postgresql":
        params.update({f"t{i}": t for i, t in enumerate(terms)})
        query = " || ".join(f"phraseto_tsquery('simple', :t{i})" for i in range(len(terms)))
        sql = (f"SELECT exp_id FROM {FTS_TABLE} CROSS JOIN (SELECT {query} AS q) AS query "
               f"WHERE tsv @@ q AND op_type IN ({ops}) "
               "ORDER BY ts_rank(tsv, q, 1) DESC, rowid LIMIT :limit")
    else:
        params["match"] = " OR ".join(f'"{t}"' for t in terms)
        sql = (f"SELECT exp_id FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH :match "
               f"AND op_type IN ({ops}) ORDER BY bm25({FTS_TABLE}) LIMIT :limit")
    rows = session.connection().execute(text(sql), params).all()
    return {row[0]: rank for rank, row in enumerate(rows)}


_OFF_SAID: set[str] = set()
_OFF_LOCK = threading.Lock()


def _say_off_once(session: Session) -> None:
    """Lexical search unavailable on this database: a warning, once per database."""
    bind = engine_of(session)
    db = bind.url.render_as_string(hide_password=True)
    with _OFF_LOCK:
        if db in _OFF_SAID:
            return
        _OFF_SAID.add(db)
    log.warning("lexical search is not available on %s (%s): retrieval ranks by vectors "
                "only", bind.dialect.name, db)
