"""Test data for the knowledge service: clearly fabricated records, never shipped as seeds.

Also holds one process-wide Embedder so the model loads once per test session, whichever
test directory asks first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelkb.kb.embedder import Embedder
from kernelkb.kb.record import ExperienceRecord, parse_record
from kernelkb.kb.settings import Settings
from kernelkb.service import LocalKnowledge

HARDWARE: dict[str, dict[str, Any]] = {
    "H200": dict(gpu_name="NVIDIA H200", arch="sm_90", sm_count=132, mem_bandwidth_gbps=4800.0,
                 smem_per_sm_kib=228, peak_tflops=989.0),
    "H100": dict(gpu_name="NVIDIA H100 80GB HBM3", arch="sm_90", sm_count=132,
                 mem_bandwidth_gbps=3350.0, smem_per_sm_kib=228, peak_tflops=989.0),
    "A100": dict(gpu_name="NVIDIA A100-SXM4-80GB", arch="sm_80", sm_count=108,
                 mem_bandwidth_gbps=2039.0, smem_per_sm_kib=164, peak_tflops=312.0),
    "L4": dict(gpu_name="NVIDIA L4", arch="sm_89", sm_count=58, mem_bandwidth_gbps=300.0,
               smem_per_sm_kib=100, peak_tflops=121.0),
}

_EMBEDDER: Embedder | None = None


def shared_embedder() -> Embedder:
    global _EMBEDDER
    if _EMBEDDER is None:
        _EMBEDDER = Embedder()
    return _EMBEDDER


def make_knowledge(root: Path, **overrides: Any) -> LocalKnowledge:
    overrides.setdefault("seeds_dir", root / "no-seeds")
    settings = Settings(data_dir=root, **overrides)
    return LocalKnowledge(settings, embedder=shared_embedder())


def record_dict(
    *,
    op: str = "softmax",
    task: str | None = None,
    hw: str = "H200",
    triton: str = "3.5.0",
    dtype: str = "float16",
    verdict: str = "improved",
    speedup: float | None = 1.3,
    categories: tuple[str, ...] = ("tiling",),
    summary: str = "raise BLOCK_SIZE to cover a whole row in one tile",
    config: dict[str, Any] | None = None,
    evidence: str = "measured",
    diff: str | None = None,
    run: str = "test-run-1",
    iteration: int = 1,
    error_kind: str | None = None,
) -> dict[str, Any]:
    """A record as JSON-ready dict. evidence: measured | verified | claimed."""
    timed = evidence == "measured"
    config = config if config is not None else {"BLOCK_SIZE": 1024}
    if diff is None:  # the header lines the config sets: another config, another edit
        diff = "-BLOCK_SIZE = 256\n" + "\n".join(f"+{k} = {v!r}" for k, v in config.items())
    stage = "performance" if timed else ("correctness" if evidence == "verified" else "compile")
    if verdict in ("failed",):
        stage = "compile"
    feedback: dict[str, Any] = {
        "stage": stage,
        "timing_available": timed,
        "time_ms": 0.4 if timed else None,
        "baseline_ms": 0.55 if timed else None,
        "speedup_vs_parent": speedup,
        "speedup_vs_baseline": (speedup * 1.1) if speedup else None,
        "error_kind": error_kind,
        "error_message": "triton compile error: out of shared memory" if error_kind else None,
        "text": "fabricated feedback for a test",
    }
    return {
        "run_id": run,
        "iteration": iteration,
        "task": {"op_type": op, "task_id": task or op, "dtype": dtype},
        "env": {**HARDWARE[hw], "triton_version": triton, "torch_version": "2.9.0"},
        "edit": {
            "summary": summary,
            "categories": list(categories),
            "diff": diff,
            "config": config,
            "child_hash": f"child-{op}-{hw}-{summary}-{config}"[:60].replace(" ", "_"),
        },
        "feedback": feedback,
        "verdict": verdict,
        "provenance": {"agent": "test", "source": "tests (fabricated)"},
    }


def record(**kwargs: Any) -> ExperienceRecord:
    return parse_record(record_dict(**kwargs))
