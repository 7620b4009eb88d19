"""retrieve, insights, bootstrap: the read side."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status
from pydantic import BaseModel, Field

from kb.api.deps import KnowledgeDep
from kb.limits import SHORT
from retrieval.bootstrap_target import BootstrapTarget
from retrieval.query import RetrievalQuery
from retrieval.schemas import BootstrapPlan, InsightReport, RetrievalResult

router = APIRouter(tags=["knowledge"])


class BootstrapRequest(BaseModel):
    env: BootstrapTarget = Field(description="the target: {'gpu_name': ...} alone for a part "
                                 "kb.gpu_facts knows, or explicit facts (arch, sm_count, "
                                 "mem_bandwidth_gbps, smem_per_sm_kib, ...)")
    op_type: str | None = Field(None, max_length=SHORT)
    include_own: bool = Field(False, description="also the target GPU's own experiences "
                              "(a second optimization on a known card), not only others'")
    dtype: str = Field("float16", max_length=SHORT)
    limit: int = Field(10, ge=1, le=500, description="ranked configurations returned")


@router.post("/retrieve", response_model=RetrievalResult)
def retrieve(query: RetrievalQuery, kb: KnowledgeDep) -> Response:
    """A query without ``related_ops`` gets its op's declared ones from the registry."""
    if query.related_ops is None:
        from kernels.base import related_ops_of  # torch: imported on first use

        query = query.model_copy(update={"related_ops": list(related_ops_of(query.op_type))})
    # serialised here, once: FastAPI would validate the result against its own model
    # again and then dump it (3 ms of a ~10 ms request under load)
    return Response(kb.retrieve(query).model_dump_json(), media_type="application/json")


@router.get("/insights", response_model=InsightReport)
def insights(kb: KnowledgeDep, op_type: str | None = None, gpu_name: str | None = None,
             arch: str | None = None, triton_version: str | None = None,
             current_triton: str | None = None) -> InsightReport:
    """``triton_version`` filters; ``current_triton`` labels and ranks other versions lower."""
    return kb.insights(op_type=op_type, gpu_name=gpu_name, arch=arch,
                       triton_version=triton_version, current_triton=current_triton)


@router.post("/bootstrap", response_model=BootstrapPlan)
def bootstrap(body: BootstrapRequest, kb: KnowledgeDep) -> BootstrapPlan:
    """With an op: the learned ranker's order of its task's configurations (the store's
    configurations for an op no task implements). An unknown GPU name: 422."""
    from optimizer.spaces import space_for_op  # kernels and torch: on first use
    from retrieval.prediction import UnknownGpu

    space = space_for_op(body.op_type, body.dtype) if body.op_type else None
    try:
        return kb.bootstrap(body.env.model_dump(exclude_unset=True), op_type=body.op_type,
                            include_own=body.include_own, space=space, limit=body.limit)
    except UnknownGpu as err:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(err)) from err
