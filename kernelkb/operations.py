"""What every entry point does the same way (CLI, HTTP API, MCP server), as plain functions:
open the store, match the names a person typed, prepare a query, plan a bootstrap.

The kernels registry and the optimizer's spaces are imported on first use (torch), so an
entry module stays light at import. Errors a user can fix are ``UserError``s
(``kernelkb.errors`` renders them).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.retrieval.schemas import BootstrapPlan, RetrievalResult

if TYPE_CHECKING:
    from kernelkb.kb.settings import Settings
    from kernelkb.retrieval.protocol import Knowledge
    from kernelkb.service import LocalKnowledge

log = logging.getLogger(__name__)


class LazyRegimes:
    """``kernels.records.RecordRegimes``, imported on first use: the store asks it only for
    rows stored without a regime, and importing the tasks costs seconds (torch) that a
    query on a store whose regimes are all derived does not need."""

    @property
    def tasks(self) -> tuple[str, ...]:
        from kernelkb.kernels.records import RecordRegimes

        return RecordRegimes().tasks

    def of(self, record: Any) -> str | None:
        from kernelkb.kernels.records import RecordRegimes

        return RecordRegimes().of(record)


def open_store(settings: Settings) -> LocalKnowledge:
    """The in-process store the settings name (SQL + vector index), its older rows brought
    up to date (``LocalKnowledge.migrate``), not seeded yet: every door opens it here."""
    from kernelkb.service import LocalKnowledge

    store = LocalKnowledge(settings, regimes=LazyRegimes())
    store.migrate()
    return store


def open_for_runs(settings: Settings) -> tuple[Knowledge | None, bool]:
    """(knowledge, whether runs write back to it), for the optimizer: the service when one
    is configured; else the in-process store, seeded on first use; on a bare GPU host (no
    embedding model or Chroma) the same store without vectors, read for retrieval while
    the run's records go to its journal (the host is lent: the journal is what comes
    back); without sqlmodel either, none (journal only)."""
    if settings.service_url:
        from kernelkb.retrieval.remote import RemoteKnowledge

        return RemoteKnowledge(settings.service_url, settings.api_token), True
    try:
        from kernelkb.service import vector_stack_available
    except ImportError as err:  # no sqlmodel / sqlalchemy here
        log.warning("no knowledge store here (%s): journal only", err)
        return None, False
    bare_host = settings.vectors and not vector_stack_available()
    if bare_host:
        log.warning("no embedding model / Chroma here: retrieval by metadata, evidence and "
                    "BM25 only; this run's records go to its journal")
        settings = settings.model_copy(update={"vectors": False})
    try:
        knowledge = open_store(settings)
        for name, report in knowledge.seed_if_empty().items():
            log.info("seeded %s: %d experiences", name, len(report.accepted))
    except Exception as err:  # noqa: BLE001 - e.g. a host's sqlite without FTS5
        if not bare_host:
            raise
        log.warning("the local store failed here (%s: %s): journal only",
                    type(err).__name__, err)
        return None, False
    return knowledge, not bare_host


def resolve(kb: Knowledge, *, op_type: str | None = None, gpu_name: str | None = None,
            arch: str | None = None, task_id: str | None = None) -> dict[str, str | None]:
    """The store's spelling of names a person typed (any case, short forms such as 'h200');
    retrieval.names.UnknownName (a 422 in the API, exit 2 in the CLI) for one nobody knows.

    A typed op or task the store spells exactly is itself whatever the task registry
    holds (an exact spelling always wins), so the registry is read only when one is not,
    and then from its summary on disk while the task files are unchanged
    (kernels.discovery.registry_summary): no task module, no torch, for a query."""
    from kernelkb.kernels.discovery import registry_summary
    from kernelkb.retrieval.names import UnknownName

    typed = {"op_type": op_type, "gpu_name": gpu_name, "arch": arch, "task_id": task_id}
    try:
        found = kb.resolve_names(op_type=op_type, gpu_name=gpu_name, arch=arch,
                                 task_id=task_id)
        if all(found[k] == typed[k] for k in ("op_type", "task_id")):
            return found
    except UnknownName:
        pass
    summary = registry_summary()
    return kb.resolve_names(op_type=op_type, gpu_name=gpu_name, arch=arch, task_id=task_id,
                            known_ops=summary["ops"], known_tasks=summary["tasks"])


def related_ops(op_type: str) -> list[str]:
    """The op's declared relatives (Task.related_ops), from the registry's summary."""
    from kernelkb.kernels.discovery import registry_summary

    return list(registry_summary()["related"].get(op_type, ()))


def retrieve(kb: Knowledge, query: RetrievalQuery) -> RetrievalResult:
    """Few-shot experiences for the query as ``prepare`` completes it."""
    return kb.retrieve(prepare(kb, query))


def prepare(kb: Knowledge, query: RetrievalQuery) -> RetrievalQuery:
    """The query as retrieval runs it: names matched unless ``check_names`` is off
    (programs send theirs as measured); without ``related_ops``, its op's declared ones
    from the kernels registry (Task.related_ops)."""
    if query.check_names:
        query = query.model_copy(update=resolve(kb, op_type=query.op_type,
                                                task_id=query.task_id,
                                                gpu_name=query.gpu_name, arch=query.arch))
    if query.related_ops is None:
        query = query.model_copy(update={"related_ops": related_ops(query.op_type)})
    return query


def bootstrap(kb: Knowledge, env: dict[str, Any], *, op_type: str | None,
              include_own: bool = False, dtype: str = "float16", limit: int = 10,
              check_names: bool = True, shapes: list[str] | None = None) -> BootstrapPlan:
    """What to try first on ``env``; with an op, the learned ranker's order of its task's
    configurations (the store's configurations for an op no task implements). Raises
    retrieval.prediction.UnknownGpu (a ValueError) for a GPU nobody knows."""
    from kernelkb.optimizer.spaces import space_for_op  # kernels and torch: on first use

    if check_names and op_type:
        op_type = resolve(kb, op_type=op_type)["op_type"]
    space = space_for_op(op_type, dtype) if op_type else None
    return kb.bootstrap(env, op_type=op_type, include_own=include_own, space=space,
                        limit=limit, shapes=shapes or None)
