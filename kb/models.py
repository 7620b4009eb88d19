"""SQL tables: the source of truth. The vector index is derived from ``Experience``.

``Experience`` flattens every key that retrieval filters on into an indexed column and
keeps the whole validated record as JSON, so a row round-trips to an ``ExperienceRecord``
without loss. Categories live twice: as ``|a|b|`` in a column (cheap LIKE filters) and
as rows of ``ExperienceCategory`` (GROUP BY for insights).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.shared.hashing import source_hash

# Columns the ladder reads for every candidate; the two covering indexes below answer a
# rung (op + GPU + Triton, or op + arch) without touching the wide rows (75 ms -> a few
# ms per query at 100k rows; benchmarks/kb_bench.py).
_LADDER_PAYLOAD = ("task_id", "dtype", "verdict", "evidence", "categories",
                   "speedup_vs_parent", "speedup_vs_baseline", "id")


class Experience(SQLModel, table=True):
    __table_args__ = (
        Index("ix_ladder_gpu", "op_type", "gpu_name", "triton_version", *_LADDER_PAYLOAD),
        Index("ix_ladder_arch", "op_type", "arch", *_LADDER_PAYLOAD),
    )

    id: str = Field(primary_key=True, max_length=64)
    run_id: str = Field(index=True)
    iteration: int
    created_at: datetime = Field(index=True)
    op_type: str = Field(index=True)
    task_id: str = Field(index=True)
    dtype: str = Field(index=True)
    gpu_name: str = Field(index=True)
    arch: str = Field(index=True)
    hardware_id: str = Field(index=True)
    triton_version: str = Field(index=True)
    torch_version: str
    verdict: str = Field(index=True)
    evidence: str = Field(index=True)
    stage: str
    round_kind: str
    agent: str
    categories: str  # "|tiling|warps_stages|"
    summary: str
    speedup_vs_baseline: float | None = None
    speedup_vs_parent: float | None = None
    time_ms: float | None = None
    parent_hash: str | None = None
    child_hash: str = Field(index=True)
    # the task's shape regime(s), "+"-joined; NULL: not derived yet, "": none derivable
    # (an older database gains the column on start-up: kb/db.py)
    regime: str | None = Field(default=None, index=True)
    # significant / within_noise / unknown_spread (ExperienceRecord.confidence); NULL in an
    # older database until its rows are re-ingested: read as unknown_spread
    confidence: str | None = Field(default=None, index=True)
    record_json: str

    def to_record(self) -> ExperienceRecord:
        return ExperienceRecord.model_validate_json(self.record_json)


class ExperienceCategory(SQLModel, table=True):
    experience_id: str = Field(primary_key=True, foreign_key="experience.id")
    category: str = Field(primary_key=True, index=True)


class KernelSource(SQLModel, table=True):
    hash: str = Field(primary_key=True)
    source: str


class Hardware(SQLModel, table=True):
    """A hardware fingerprint, keyed by ``hardware_id`` (gpu_name + arch)."""

    id: str = Field(primary_key=True)
    gpu_name: str = Field(index=True)
    arch: str = Field(index=True)
    sm_count: int | None = None
    mem_bandwidth_gbps: float | None = None
    smem_per_sm_kib: int | None = None
    peak_tflops: float | None = None


class Run(SQLModel, table=True):
    """One optimization run, summarised from its experiences (kept up to date on ingest)."""

    run_id: str = Field(primary_key=True)
    task_id: str = Field(index=True)
    op_type: str
    hardware_id: str = Field(index=True)
    triton_version: str
    agent: str
    model: str | None = None
    started_at: datetime
    finished_at: datetime
    iterations: int = 0
    best_speedup: float | None = None
    stop_reason: str | None = None


def hardware_id(gpu_name: str, arch: str) -> str:
    return f"{gpu_name}|{arch}"


def experience_values(record: ExperienceRecord,
                      regime_of: Callable[[ExperienceRecord], str | None] | None = None
                      ) -> dict[str, Any]:
    """The ``Experience`` row as a dict, for one executemany insert per batch (building
    ORM objects cost ~0.2 ms a record on ingest). ``regime_of`` derives the regime of a
    record that carries none (kernels.records.record_regime, given by the entry module)."""
    fb = record.feedback
    assert record.id is not None
    return dict(
        id=record.id,
        run_id=record.run_id,
        iteration=record.iteration,
        created_at=record.created_at,
        op_type=record.task.op_type,
        task_id=record.task.task_id,
        dtype=record.task.dtype,
        gpu_name=record.env.gpu_name,
        arch=record.env.arch,
        hardware_id=hardware_id(record.env.gpu_name, record.env.arch),
        triton_version=record.env.triton_version,
        torch_version=record.env.torch_version,
        verdict=record.verdict.value,
        evidence=record.evidence,
        stage=fb.stage,
        round_kind=record.provenance.round_kind,
        agent=record.provenance.agent,
        categories="|" + "|".join(record.edit.categories) + "|",
        summary=record.edit.summary,
        speedup_vs_baseline=fb.speedup_vs_baseline,
        speedup_vs_parent=fb.speedup_vs_parent,
        time_ms=fb.time_ms,
        parent_hash=record.edit.parent_hash,
        child_hash=record.edit.child_hash,
        regime=record.task.regime or (regime_of(record) or "" if regime_of else None),
        confidence=record.confidence,
        record_json=record.model_dump_json(),
    )


def hardware_row(record: ExperienceRecord) -> Hardware:
    env = record.env
    return Hardware(
        id=hardware_id(env.gpu_name, env.arch),
        gpu_name=env.gpu_name,
        arch=env.arch,
        sm_count=env.sm_count,
        mem_bandwidth_gbps=env.mem_bandwidth_gbps,
        smem_per_sm_kib=env.smem_per_sm_kib,
        peak_tflops=env.peak_tflops,
    )


def kernel_row(record: ExperienceRecord) -> KernelSource | None:
    source = record.edit.child_source
    if not source:
        return None
    return KernelSource(hash=source_hash(source), source=source)


def lexical_text(record: ExperienceRecord) -> str:
    """What BM25 sees: summary, categories, config names/values, diff, error text."""
    config = " ".join(f"{k} {v}" for k, v in record.edit.config.items())
    return "\n".join(
        [
            record.edit.summary,
            " ".join(record.edit.categories),
            config,
            record.edit.diff,
            record.feedback.error_message or "",
            record.feedback.bottleneck_hint or "",
        ]
    )


def config_json(record: ExperienceRecord) -> str:
    return json.dumps(record.edit.config, sort_keys=True)


class QuarantinedRow(SQLModel, table=True):
    """An experience row that no longer loads, moved aside by ``kernelkb doctor
    --quarantine`` with the reason, so reads stop tripping over it and nothing is lost."""

    id: str = Field(primary_key=True, max_length=64)
    record_json: str
    reason: str
    quarantined_at: datetime
