"""retrieve, insights, bootstrap: the read side."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from kb.api.deps import KnowledgeDep
from retrieval.query import RetrievalQuery
from retrieval.schemas import BootstrapPlan, InsightReport, RetrievalResult

router = APIRouter(tags=["knowledge"])


class BootstrapRequest(BaseModel):
    env: dict[str, Any]
    op_type: str | None = None
    include_own: bool = Field(False, description="also the target GPU's own experiences "
                              "(a second optimization on a known card), not only others'")


@router.post("/retrieve", response_model=RetrievalResult)
def retrieve(query: RetrievalQuery, kb: KnowledgeDep) -> RetrievalResult:
    """A query without ``related_ops`` gets its op's declared ones from the registry."""
    if query.related_ops is None:
        from kernels.base import related_ops_of  # torch: imported on first use

        query = query.model_copy(update={"related_ops": list(related_ops_of(query.op_type))})
    return kb.retrieve(query)


@router.get("/insights", response_model=InsightReport)
def insights(kb: KnowledgeDep, op_type: str | None = None, gpu_name: str | None = None,
             arch: str | None = None, triton_version: str | None = None,
             current_triton: str | None = None) -> InsightReport:
    """``triton_version`` filters; ``current_triton`` labels and ranks other versions lower."""
    return kb.insights(op_type=op_type, gpu_name=gpu_name, arch=arch,
                       triton_version=triton_version, current_triton=current_triton)


@router.post("/bootstrap", response_model=BootstrapPlan)
def bootstrap(body: BootstrapRequest, kb: KnowledgeDep) -> BootstrapPlan:
    return kb.bootstrap(body.env, op_type=body.op_type, include_own=body.include_own)
