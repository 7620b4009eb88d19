"""health, stats, reindex."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from kernelkb.api.deps import KnowledgeDep, TokenDep

router = APIRouter(tags=["system"])


@router.get("/health")
@router.head("/health", include_in_schema=False)  # monitors often probe with HEAD
def health(kb: KnowledgeDep) -> dict[str, Any]:
    return {"status": "ok", "experiences": kb.count()}


@router.get("/stats")
def stats(kb: KnowledgeDep) -> dict[str, Any]:
    return kb.stats()


@router.post("/reindex", dependencies=[TokenDep])
def reindex(kb: KnowledgeDep) -> dict[str, int]:
    return {"indexed": kb.reindex()}
