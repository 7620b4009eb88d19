"""retrieve, insights, bootstrap: the read side."""

from __future__ import annotations

from typing import Annotated

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
)

from kernelkb.kb import limits
from kernelkb.kb.entry import operations
from kernelkb.kb.entry.api.deps import KnowledgeDep
from kernelkb.kb.limits import LIST_ITEMS, REGIME, SHORT
from kernelkb.kernels.shared.vocabulary import Dtype
from kernelkb.retrieval.bootstrap_target import BootstrapTarget
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.retrieval.schemas import BootstrapPlan, InsightReport, RetrievalResult

router = APIRouter(tags=["knowledge"])


class BootstrapRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt key is an error, not a default

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
async def retrieve(query: RetrievalQuery, kb: KnowledgeDep, request: Request) -> Response:
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
    if vector is None and kb.embedder is not None and kb.index is not None:
        vector = await to_thread.run_sync(kb.query_vector, ready,
                                          limiter=request.app.state.embed_waiters)
    # serialised here, once: FastAPI would validate the result against its own model
    # again and then dump it (3 ms of a ~10 ms request under load)
    body = await to_thread.run_sync(lambda: kb.retrieve(ready, vector).model_dump_json())
    return Response(body, media_type="application/json")


class Names(BaseModel):
    """The store's spelling of each typed name (None where none was typed)."""

    op_type: str | None = None
    gpu_name: str | None = None
    arch: str | None = None
    task_id: str | None = None


NameParam = Annotated[str | None, Query(max_length=SHORT)]
# the op is "op" at every door; "op_type", its older name here, is still taken
OpParam = Annotated[str | None, Query(max_length=SHORT, description="the op, e.g. softmax")]
OldOpParam = Annotated[str | None, Query(max_length=SHORT, deprecated=True,
                                         description="the older name of op")]


def one_op(op: str | None, op_type: str | None) -> str | None:
    """The op from ``op`` or its older name; both given and different: a user error."""
    from kernelkb.kb.entry.errors import UsageError

    if op and op_type and op != op_type:
        raise UsageError(f"op {op!r} and op_type {op_type!r}: give one (op_type is the "
                         "older name of op)")
    return op or op_type


@router.get("/names", response_model=Names)
def names(kb: KnowledgeDep, op: OpParam = None, gpu_name: NameParam = None,
          arch: NameParam = None, task_id: NameParam = None,
          op_type: OldOpParam = None) -> Names:
    """Names as the store and the service's task registry spell them (any case, short
    forms such as 'h200'); an unknown one: 422 naming the closest. What a remote client
    (an MCP server or a CLI pointed at this service) matches its users' names with."""
    return Names(**operations.resolve(kb, op_type=one_op(op, op_type), gpu_name=gpu_name,
                                      arch=arch, task_id=task_id))


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
