"""The read operations every entry point offers (HTTP API, MCP server), as plain functions.

An entry module (it imports the kernels registry and the optimizer's spaces, on first
use); what the API's routes did inline, so that the MCP tools answer exactly as the API.
"""

from __future__ import annotations

from typing import Any

from retrieval.query import RetrievalQuery
from retrieval.schemas import BootstrapPlan, RetrievalResult


def resolve(kb: Any, **names: str | None) -> dict[str, str | None]:
    """The store's spelling of names a person typed (any case, short forms such as 'h200');
    retrieval.names.UnknownName (a 422 in the API) for one nobody knows."""
    from kernels.base import all_tasks  # torch: imported on first use

    tasks = all_tasks()
    return kb.resolve_names(known_ops={t.op_type for t in tasks.values()},
                            known_tasks=set(tasks), **names)


def retrieve(kb: Any, query: RetrievalQuery) -> RetrievalResult:
    """Few-shot experiences for the query as ``prepare`` completes it."""
    return kb.retrieve(prepare(kb, query))


def prepare(kb: Any, query: RetrievalQuery) -> RetrievalQuery:
    """The query as retrieval runs it: names matched unless ``check_names`` is off
    (programs send theirs as measured); without ``related_ops``, its op's declared ones
    from the kernels registry (Task.related_ops)."""
    if query.check_names:
        query = query.model_copy(update=resolve(kb, op_type=query.op_type,
                                                task_id=query.task_id,
                                                gpu_name=query.gpu_name, arch=query.arch))
    if query.related_ops is None:
        from kernels.base import related_ops_of  # torch: imported on first use

        query = query.model_copy(update={"related_ops": list(related_ops_of(query.op_type))})
    return query


def bootstrap(kb: Any, env: dict[str, Any], *, op_type: str | None, include_own: bool = False,
              dtype: str = "float16", limit: int = 10, check_names: bool = True,
              shapes: list[str] | None = None) -> BootstrapPlan:
    """What to try first on ``env``; with an op, the learned ranker's order of its task's
    configurations (the store's configurations for an op no task implements). Raises
    retrieval.prediction.UnknownGpu (a ValueError) for a GPU nobody knows."""
    from optimizer.spaces import space_for_op  # kernels and torch: on first use

    if check_names and op_type:
        op_type = resolve(kb, op_type=op_type)["op_type"]
    space = space_for_op(op_type, dtype) if op_type else None
    return kb.bootstrap(env, op_type=op_type, include_own=include_own, space=space,
                        limit=limit, shapes=shapes or None)
