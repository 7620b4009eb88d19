"""Engine, tables and the lexical (FTS5) side table.

SQLite gets WAL and an FTS5 table over summary + diff + identifiers for BM25. On any
other database (PostgreSQL) the lexical side is skipped: ``lexical_enabled`` says so, and
retrieval then ranks by vectors alone (documented, not silent: it logs once).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlmodel import Session, SQLModel, create_engine

from kb import models  # noqa: F401  (registers the tables on SQLModel.metadata)
from kb.file_lock import file_lock

log = logging.getLogger(__name__)

FTS_TABLE = "experience_fts"
FTS_VOCAB = "experience_fts_vocab"  # per-term document counts, to drop common terms
_FTS_DDL = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5("
    "exp_id UNINDEXED, op_type UNINDEXED, arch UNINDEXED, hardware_id UNINDEXED, body, "
    "tokenize = \"unicode61 tokenchars '_'\")"
)


# Connections kept open: the HTTP service runs each request in a worker thread with its
# own session; a pool smaller than the threads that query at once opened and closed an
# overflow connection per request under 20 clients (connect + pragmas each time).
POOL_SIZE = 24


def make_engine(url: str) -> Engine:
    """Create the engine and the tables (idempotent)."""
    if url.split("?")[0] in ("sqlite://", "sqlite:///:memory:", "sqlite:///"):
        from sqlalchemy.exc import ArgumentError  # a store in memory ends with the command

        raise ArgumentError(f"{url!r} is a database in memory, gone when the command ends; "
                            "give a file (sqlite:///PATH) or a server URL")
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        # timeout: the busy timeout, so a second writer waits for the first, never fails
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 120},
                               pool_size=POOL_SIZE, max_overflow=POOL_SIZE)
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(_with_driver(url), pool_pre_ping=True, pool_size=8,
                               max_overflow=POOL_SIZE)
    _create_tables(engine)
    _add_missing_columns(engine)
    if lexical_enabled(engine):
        with engine.begin() as conn:
            conn.execute(text(_FTS_DDL))
            conn.execute(text(f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_VOCAB} "
                              f"USING fts5vocab({FTS_TABLE}, 'row')"))
    else:
        log.info("lexical search disabled on %s: retrieval uses vectors only", engine.dialect.name)
    return engine


def _with_driver(url: str) -> str:
    """A bare ``postgresql://`` URL means psycopg2 to SQLAlchemy; use psycopg (v3), the
    driver KernelKB installs, unless psycopg2 is there."""
    if url.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg2  # noqa: F401
        except ImportError:
            return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _create_tables(engine: Engine, attempts: int = 5) -> None:
    """create_all, tolerating another process that creates the same tables at the same
    moment (two `kernelkb ingest` started together on a new store): check-then-create
    races, and the loser's "already exists" just means the table is there; retry. On
    PostgreSQL the creators take turns under an advisory lock (there a lost race is a
    unique violation in the catalog, not a clean "already exists")."""
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(7217)"))  # KernelKB's DDL lock
            SQLModel.metadata.create_all(conn)
        return
    for attempt in range(attempts):
        try:
            SQLModel.metadata.create_all(engine)
            return
        except OperationalError as exc:
            if "already exists" not in str(exc) or attempt == attempts - 1:
                raise


# Columns added to existing tables after stores were first made: (table, column, DDL type).
# create_all makes new tables only, so an older database gains them here (NULL values).
LATER_COLUMNS = (("experience", "regime", "VARCHAR"), ("experience", "confidence", "VARCHAR"))


def _add_missing_columns(engine: Engine) -> None:
    for table, column, kind in LATER_COLUMNS:
        present = {c["name"] for c in inspect(engine).get_columns(table)}
        if column in present:
            continue
        try:
            with engine.begin() as conn:
                conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))
                conn.execute(text(f"CREATE INDEX IF NOT EXISTS ix_{table}_{column} "
                                  f"ON {table} ({column})"))
            log.info("store: added column %s.%s", table, column)
        except (OperationalError, ProgrammingError) as exc:  # another process added it first
            if "duplicate column" not in str(exc).lower() and \
                    "already exists" not in str(exc).lower():
                raise


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def begin_write(session: Session) -> None:
    """Start the session's transaction as the only writer: SQLite ``BEGIN IMMEDIATE``
    (others wait, busy timeout), PostgreSQL a transaction-scoped advisory lock. Then a
    check for existing ids and the inserts that follow it cannot interleave with another
    process's, so two ingests at once neither duplicate nor lose a record."""
    conn = session.connection()
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(7216)"))  # KernelKB's writer lock


@contextmanager
def store_writer_lock(engine: Engine) -> Iterator[None]:
    """Held while a process writes vectors to a Chroma server (kb/vector_index.py
    ``writing``): every process that writes this store takes turns. PostgreSQL: a
    session-level advisory lock on a connection kept for the duration; SQLite: an flock
    on a file beside the database (both free themselves if the holder is killed)."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(7218)"))  # KernelKB's vector lock
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(7218)"))
                conn.commit()
        return
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield  # one process owns an in-memory store
        return
    with file_lock(f"{database}.kernelkb-vectors.lock"):
        yield


def lexical_enabled(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def add_lexical_rows(session: Session, rows: Iterable[tuple[str, str, str, str, str]]) -> None:
    """Insert (exp_id, op_type, arch, hardware_id, body) rows into the FTS table."""
    rows = list(rows)
    if not rows or session.get_bind().dialect.name != "sqlite":
        return
    session.connection().execute(
        text(f"INSERT INTO {FTS_TABLE} (exp_id, op_type, arch, hardware_id, body) "
             "VALUES (:i, :o, :a, :h, :b)"),
        [{"i": r[0], "o": r[1], "a": r[2], "h": r[3], "b": r[4]} for r in rows],
    )
