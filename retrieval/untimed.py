"""Experiences from the CPU interpreter: checked for correctness, never timed.

Why: they say whether a kernel is right, not how fast any hardware runs it, so they are
never hardware evidence: bootstrap's similar hardware, insights' win rates and gains, and
the ranker's training rows leave them out (unless a caller asks for the interpreter by
name). The sandbox writes ``arch = "cpu"`` for them (optimizer/sandbox/hardware.py).
"""

from __future__ import annotations

from typing import Any

from kernelkb.kb.models import Experience

INTERPRETER_ARCH = "cpu"


def on_hardware() -> Any:
    """SQL condition: the row was run on a GPU (or imported from one), not interpreted."""
    return Experience.arch != INTERPRETER_ARCH


def asks_for_interpreter(gpu_name: str | None, arch: str | None) -> bool:
    return (arch or "").lower() == INTERPRETER_ARCH or "interpreter" in (gpu_name or "").lower()
