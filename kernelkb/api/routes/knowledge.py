"""retrieve, insights, bootstrap: the read side."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from anyio import to_thread
from fastapi import APIRouter, Query, Request, Response
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    field_validator,
    model_validator,
)

from kernelkb import operations
from kernelkb.api.deps import KnowledgeDep
from kernelkb.kb import limits
from kernelkb.kb.limits import LIST_ITEMS, REGIME, SHORT
from kernelkb.kernels.shared.vocabulary import Dtype
from kernelkb.retrieval.bootstrap_target import BootstrapTarget
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.retrieval.schemas import BootstrapPlan, InsightReport, RetrievalResult

router = APIRouter(tags=["knowledge"])


# one vocabulary at every door: (the name, its older one) of the op, the count, the task
NEW_AND_OLD = (("op", "op_type"), ("limit", "k"), ("task", "task_id"))


def one_name_each(data: Any) -> Any:
    """A body that gives a value under a name and under its older one: the same value,
    kept once; two values, an error in words (not "extra inputs are not permitted")."""
    if not isinstance(data, dict):
        return data
    for new, old in NEW_AND_OLD:
        if new in data and old in data:
            if data[new] != data[old]:
                raise ValueError(f"{new} {data[new]!r} and {old} {data[old]!r}: give one "
                                 f"({old} is the older name of {new})")
            data = {k: v for k, v in data.items() if k != old}
    return data


class RetrieveBody(RetrievalQuery):
    """The body of POST /retrieve: a RetrievalQuery whose task is "task", as the op is
    "op" and the count "limit" ("task_id", its older name, is still taken)."""

    task_id: str | None = Field(
        default=None, validation_alias=AliasChoices("task", "task_id"),
        description="the task the kernel is for, e.g. softmax: its own experiences rank "
        "first ('task_id': its older name)")

    _one_name_each = model_validator(mode="before")(one_name_each)


class BootstrapRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt key is an error, not a default
    _one_name_each = model_validator(mode="before")(one_name_each)

    env: BootstrapTarget = Field(description="the target: {'gpu_name': ...} alone for a part "
                                 "the GPU table (kernels.shared.gpus) knows, or explicit facts "
                                 "(arch, sm_count, mem_bandwidth_gbps, smem_per_sm_kib, ...)")
    op_type: str | None = Field(None, max_length=SHORT,
                                validation_alias=AliasChoices("op", "op_type"),
                                description="the op, e.g. softmax ('op_type': its older name)")
    include_own: StrictBool = Field(False, description="also the target GPU's own experiences "
                              "(a second optimization on a known card), not only others'")
    dtype: Dtype = "float16"
    limit: StrictInt = Field(10, ge=1, le=500, description="ranked configurations returned")
    check_names: StrictBool = Field(True, description="match op_type to the known ops (any case) "
                              "and reject one nobody knows; False takes it as given")
    shapes: list[Annotated[str, StringConstraints(max_length=SHORT)]] | None = Field(
        None, max_length=LIST_ITEMS, description="shape labels (e.g. one shape regime's, "
        "'rows=4096,cols=32768'): each task's best configuration is then the one measured "
        "fastest on them, not the largest speedup over its own run's start")

    @field_validator("shapes")
    @classmethod
    def _valid_text(cls, value: list[str] | None) -> list[str] | None:
        return limits.check_strings(value)


@router.post("/retrieve", response_model=RetrievalResult)
async def retrieve(query: RetrieveBody, kb: KnowledgeDep, request: Request) -> Response:
    """A query without ``related_ops`` gets its op's declared ones from the registry.
    Names are matched to the known ones (any case, short forms); an unknown one: 422."""
    # Three steps on threads. A query text the server has not embedded waits for the
    # embedding batcher on a thread of its own (``embed_waiters``), not on one of the few
    # worker threads: the requests waiting at that moment share model runs (one text a
    # run costs ~13 ms of CPU, four ~9 ms each; kb/embedder.py, _QueryBatcher).
    def prepared() -> tuple[RetrievalQuery, np.ndarray | None]:
        ready = operations.prepare(kb, query)
        return ready, kb.query_vector(ready, cached_only=True)

    ready, vector = await to_thread.run_sync(prepared)
    if vector is None and kb.embeds_queries():
        vector = await to_thread.run_sync(kb.query_vector, ready,
                                          limiter=request.app.state.embed_waiters)
    # serialised here, once: FastAPI would validate the result against its own model
    # again and then dump it (3 ms of a ~10 ms request under load)
    body = await to_thread.run_sync(lambda: kb.retrieve(ready, vector).model_dump_json())
    return Response(body, media_type="application/json")


class Names(BaseModel):
    """The store's spelling of each typed name (None where none was typed): the op as
    "op" and the task as "task", as they were asked for; "op_type" and "task_id" repeat
    them for clients that read the older names."""

    op: str | None = None
    gpu_name: str | None = None
    arch: str | None = None
    task: str | None = None
    op_type: str | None = Field(None, json_schema_extra={"deprecated": True},
                                description="the older name of op")
    task_id: str | None = Field(None, json_schema_extra={"deprecated": True},
                                description="the older name of task")


NameParam = Annotated[str | None, Query(max_length=SHORT)]
# the op is "op" at every door; "op_type", its older name here, is still taken
OpParam = Annotated[str | None, Query(max_length=SHORT, description="the op, e.g. softmax")]
OldOpParam = Annotated[str | None, Query(max_length=SHORT, deprecated=True,
                                         description="the older name of op")]
# the task likewise: "task" at every door, "task_id" its older name
TaskParam = Annotated[str | None, Query(max_length=SHORT, description="the task, e.g. softmax")]
OldTaskParam = Annotated[str | None, Query(max_length=SHORT, deprecated=True,
                                           description="the older name of task")]


def one_op(op: str | None, op_type: str | None) -> str | None:
    """The op from ``op`` or its older name; both given and different: a user error."""
    return one_of("op", op, "op_type", op_type)


def one_of(name: str, value: str | None, old: str, old_value: str | None) -> str | None:
    """A parameter given by its name or its older one; both given and different: a user
    error."""
    from kernelkb.errors import UsageError

    if value and old_value and value != old_value:
        raise UsageError(f"{name} {value!r} and {old} {old_value!r}: give one ({old} is the "
                         f"older name of {name})")
    return value or old_value


@router.get("/names", response_model=Names)
def names(kb: KnowledgeDep, op: OpParam = None, gpu_name: NameParam = None,
          arch: NameParam = None, task: TaskParam = None,
          op_type: OldOpParam = None, task_id: OldTaskParam = None) -> Names:
    """Names as the store and the service's task registry spell them (any case, short
    forms such as 'h200'); an unknown one: 422 naming the closest. What a remote client
    (an MCP server or a CLI pointed at this service) matches its users' names with."""
    found = operations.resolve(kb, op_type=one_op(op, op_type), gpu_name=gpu_name,
                               arch=arch, task_id=one_of("task", task, "task_id", task_id))
    return Names(op=found["op_type"], task=found["task_id"], **found)


@router.get("/insights", response_model=InsightReport)
def insights(kb: KnowledgeDep, op: OpParam = None, gpu_name: str | None = None,
             arch: str | None = None, triton_version: str | None = None,
             current_triton: str | None = None, check_names: bool = True,
             regime: str | None = Query(None, pattern=REGIME.pattern),
             op_type: OldOpParam = None) -> InsightReport:
    """``triton_version`` filters; ``current_triton`` labels and ranks other versions lower;
    ``regime`` keeps the experiences measured on shapes of that regime. Names match in any
    case and by short forms ('h200'); an unknown one: 422 (``check_names=false``: taken as
    given, as programs send them)."""
    op_type = one_op(op, op_type)
    names = operations.resolve(kb, op_type=op_type, gpu_name=gpu_name, arch=arch) \
        if check_names else \
        {"op_type": op_type, "gpu_name": gpu_name, "arch": arch}
    return kb.insights(op_type=names["op_type"], gpu_name=names["gpu_name"],
                       arch=names["arch"], triton_version=triton_version,
                       current_triton=current_triton, regime=regime)


@router.post("/bootstrap", response_model=BootstrapPlan)
def bootstrap(body: BootstrapRequest, kb: KnowledgeDep) -> BootstrapPlan:
    """With an op: the learned ranker's order of its task's configurations (the store's
    configurations for an op no task implements). An unknown GPU name: 422."""
    return operations.bootstrap(kb, body.env.model_dump(exclude_unset=True),
                                op_type=body.op_type, include_own=body.include_own,
                                dtype=body.dtype, limit=body.limit,
                                check_names=body.check_names, shapes=body.shapes)
