"""Ingest (one, batch), get by id, list with filters and paging."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Body, HTTPException, Query, Response, status

from kernelkb.api.deps import KnowledgeDep, TokenDep
from kernelkb.api.errors import Problem
from kernelkb.kb.ingest import IngestReport
from kernelkb.kb.limits import BATCH_ITEMS, OFFSET_MAX, printable
from kernelkb.kb.queries import AmbiguousId, Page, UnreadableRow
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.shared.vocabulary import EDIT_CATEGORIES, Verdict

router = APIRouter(prefix="/experiences", tags=["experiences"])


def _documented_body(schema: dict[str, Any]) -> dict[str, Any]:
    """Document the record schema (for /docs and schema-driven fuzzing) while the handler
    takes raw JSON, so each item gets its own verdict instead of one 422 for the request."""
    return {"requestBody": {"required": True,
                            "content": {"application/json": {"schema": schema}}}}


_RECORD = {"$ref": "#/components/schemas/ExperienceRecord"}


@router.post("", dependencies=[TokenDep], response_model=IngestReport,
             openapi_extra=_documented_body(_RECORD))
def ingest_one(kb: KnowledgeDep, response: Response,
               record: dict[str, Any] = Body(...)) -> IngestReport:  # noqa: B008
    """One record: 201 when stored, 200 when already present, 422 with reasons if bad."""
    report = kb.ingest([record])
    if report.rejected:
        raise HTTPException(status_code=422, detail=report.model_dump()["rejected"])
    response.status_code = status.HTTP_201_CREATED if report.accepted else status.HTTP_200_OK
    return report


@router.post("/batch", dependencies=[TokenDep], response_model=IngestReport,
             openapi_extra=_documented_body({"type": "array", "items": _RECORD}))
def ingest_batch(kb: KnowledgeDep, records: list[Any] = Body(...)) -> IngestReport:  # noqa: B008
    """Many records (at most limits.BATCH_ITEMS): the good ones are stored, the bad ones
    listed with field and reason."""
    if len(records) > BATCH_ITEMS:  # a 4 MB body of a million zeros: a 159 MB answer
        raise HTTPException(status_code=413, detail=f"{len(records)} items in one batch; "
                            f"send at most {BATCH_ITEMS} per request")
    return kb.ingest(records)


@router.get("/{exp_id}", response_model=ExperienceRecord,
            responses={404: {"model": Problem, "description": "no experience with this id"}})
def get_one(exp_id: str, kb: KnowledgeDep) -> ExperienceRecord:
    """By the full id or a unique prefix of it (the CLI prints prefixes); a prefix of
    several experiences: 400 naming some of them."""
    try:
        record = kb.get(exp_id)
    except UnreadableRow as exc:  # stored, but fails to load: say so, never 500
        raise HTTPException(status_code=409, detail=str(exc)) from exc
    except AmbiguousId as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
    if record is None:
        raise HTTPException(status_code=404, detail=f"no experience {printable(exp_id, 80)}")
    return record


@router.get("", response_model=Page)
def list_many(
    kb: KnowledgeDep,
    op: str | None = Query(None, description="the op, e.g. softmax"),
    task: str | None = Query(None, description="the task, e.g. softmax"),
    dtype: str | None = None,
    gpu_name: str | None = None, arch: str | None = None, triton_version: str | None = None,
    verdict: Verdict | None = None,
    evidence: Literal["measured", "verified", "claimed"] | None = None,
    run_id: str | None = None,
    category: Literal[EDIT_CATEGORIES] | None = None,  # type: ignore[valid-type]
    offset: int = Query(0, ge=0, le=OFFSET_MAX), limit: int = Query(50, ge=1, le=500),
    op_type: str | None = Query(None, deprecated=True, description="the older name of op"),
    task_id: str | None = Query(None, deprecated=True, description="the older name of task"),
) -> Page:
    """Names (op, task, GPU, arch) match in any case and by short forms ('h200'); an
    unknown one: 422 with the closest known name. An empty value is no filter, as on the
    web pages' forms."""
    from kernelkb.api.routes.knowledge import one_of, one_op
    from kernelkb.operations import resolve

    names = resolve(kb, op_type=one_op(op or None, op_type or None),
                    task_id=one_of("task", task or None, "task_id", task_id or None),
                    gpu_name=gpu_name or None, arch=arch or None)
    return kb.list(offset=offset, limit=limit, category=category, dtype=dtype or None,
                   triton_version=triton_version or None,
                   verdict=verdict.value if verdict else None, evidence=evidence,
                   run_id=run_id or None, **names)
