"""Shared setup for the kernel task tests: interpreter mode, device and seed fixtures.

Interpreter mode (TRITON_INTERPRET=1 without CUDA) is set by the root tests/conftest.py,
before triton is first imported.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

_HERE = Path(__file__).resolve().parent
for path in (str(_HERE.parents[1]), str(_HERE)):  # repo root (kernels/), kernel_checks
    if path not in sys.path:
        sys.path.insert(0, path)

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
