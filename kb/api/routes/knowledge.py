"""retrieve, insights, bootstrap: the read side."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel, Field

from kb.api.deps import KnowledgeDep
from kb.limits import REGIME, SHORT
from retrieval.bootstrap_target import BootstrapTarget
from retrieval.query import RetrievalQuery
from retrieval.schemas import BootstrapPlan, InsightReport, RetrievalResult
from retrieval.service import LocalKnowledge

router = APIRouter(tags=["knowledge"])


class BootstrapRequest(BaseModel):
    env: BootstrapTarget = Field(description="the target: {'gpu_name': ...} alone for a part "
                                 "kb.gpu_facts knows, or explicit facts (arch, sm_count, "
                                 "mem_bandwidth_gbps, smem_per_sm_kib, ...)")
    op_type: str | None = Field(None, max_length=SHORT)
    include_own: bool = Field(False, description="also the target GPU's own experiences "
                              "(a second optimization on a known card), not only others'")
    dtype: Literal["float32", "float16", "bfloat16"] = "float16"
    limit: int = Field(10, ge=1, le=500, description="ranked configurations returned")
    check_names: bool = Field(True, description="match op_type to the known ops (any case) "
                              "and reject one nobody knows; False takes it as given")


@router.post("/retrieve", response_model=RetrievalResult)
def retrieve(query: RetrievalQuery, kb: KnowledgeDep) -> RetrievalResult:
    """A query without ``related_ops`` gets its op's declared ones from the registry.
    Names are matched to the known ones (any case, short forms); an unknown one: 422."""
    if query.check_names:
        query = query.model_copy(update=resolve(kb, op_type=query.op_type,
                                                task_id=query.task_id,
                                                gpu_name=query.gpu_name, arch=query.arch))
    if query.related_ops is None:
        from kernels.base import related_ops_of  # torch: imported on first use

        query = query.model_copy(update={"related_ops": list(related_ops_of(query.op_type))})
    return kb.retrieve(query)


def resolve(kb: LocalKnowledge, **names: str | None) -> dict[str, str | None]:
    """The store's spelling of typed names; UnknownName (422) for one nobody knows."""
    from kernels.base import all_tasks  # torch: imported on first use

    tasks = all_tasks()
    return kb.resolve_names(known_ops={t.op_type for t in tasks.values()},
                            known_tasks=set(tasks), **names)


@router.get("/insights", response_model=InsightReport)
def insights(kb: KnowledgeDep, op_type: str | None = None, gpu_name: str | None = None,
             arch: str | None = None, triton_version: str | None = None,
             current_triton: str | None = None, check_names: bool = True,
             regime: str | None = Query(None, pattern=REGIME.pattern)) -> InsightReport:
    """``triton_version`` filters; ``current_triton`` labels and ranks other versions lower;
    ``regime`` keeps the experiences measured on shapes of that regime. Names match in any
    case and by short forms ('h200'); an unknown one: 422 (``check_names=false``: taken as
    given, as programs send them)."""
    names = resolve(kb, op_type=op_type, gpu_name=gpu_name, arch=arch) if check_names else \
        {"op_type": op_type, "gpu_name": gpu_name, "arch": arch}
    return kb.insights(op_type=names["op_type"], gpu_name=names["gpu_name"],
                       arch=names["arch"], triton_version=triton_version,
                       current_triton=current_triton, regime=regime)


@router.post("/bootstrap", response_model=BootstrapPlan)
def bootstrap(body: BootstrapRequest, kb: KnowledgeDep) -> BootstrapPlan:
    """With an op: the learned ranker's order of its task's configurations (the store's
    configurations for an op no task implements). An unknown GPU name: 422."""
    from optimizer.spaces import space_for_op  # kernels and torch: on first use
    from retrieval.prediction import UnknownGpu

    op_type = resolve(kb, op_type=body.op_type)["op_type"] if body.check_names else \
        body.op_type
    space = space_for_op(op_type, body.dtype) if op_type else None
    try:
        return kb.bootstrap(body.env.model_dump(exclude_unset=True), op_type=op_type,
                            include_own=body.include_own, space=space, limit=body.limit)
    except UnknownGpu as err:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(err)) from err
