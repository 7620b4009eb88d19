"""Shared setup for the kernel task tests: interpreter mode, device and seed fixtures.

Without CUDA, Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1): that
checks correctness only, never speed. The variable must be set before any candidate's
``@triton.jit`` runs, hence here at import time rather than in a fixture.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

_HERE = Path(__file__).resolve().parent
for path in (str(_HERE.parents[1]), str(_HERE)):  # repo root (kernels/), kernel_checks
    if path not in sys.path:
        sys.path.insert(0, path)

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def device() -> str:
    """cuda on a GPU host, else cpu (with the Triton interpreter)."""
    return DEVICE


@pytest.fixture
def seed() -> int:
    """One fixed seed for input makers and torch's global generator: failures reproduce."""
    torch.manual_seed(1234)
    return 1234
