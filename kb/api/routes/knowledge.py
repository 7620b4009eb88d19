"""retrieve, insights, bootstrap: the read side."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from kb.api.deps import KnowledgeDep
from kb.limits import SHORT
from retrieval.bootstrap_target import BootstrapTarget
from retrieval.query import RetrievalQuery
from retrieval.schemas import BootstrapPlan, InsightReport, RetrievalResult

router = APIRouter(tags=["knowledge"])


class BootstrapRequest(BaseModel):
    env: BootstrapTarget
    op_type: str | None = Field(None, max_length=SHORT)
    include_own: bool = Field(False, description="also the target GPU's own experiences "
                              "(a second optimization on a known card), not only others'")


@router.post("/retrieve", response_model=RetrievalResult)
def retrieve(query: RetrievalQuery, kb: KnowledgeDep) -> RetrievalResult:
    return kb.retrieve(query)


@router.get("/insights", response_model=InsightReport)
def insights(kb: KnowledgeDep, op_type: str | None = None, gpu_name: str | None = None,
             arch: str | None = None, triton_version: str | None = None) -> InsightReport:
    return kb.insights(op_type=op_type, gpu_name=gpu_name, arch=arch,
                       triton_version=triton_version)


@router.post("/bootstrap", response_model=BootstrapPlan)
def bootstrap(body: BootstrapRequest, kb: KnowledgeDep) -> BootstrapPlan:
    return kb.bootstrap(body.env.model_dump(exclude_unset=True), op_type=body.op_type,
                        include_own=body.include_own)
