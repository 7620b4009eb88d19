"""Shared setup for the kernel task tests: interpreter mode, device and seed fixtures.

Interpreter mode (TRITON_INTERPRET=1 without CUDA) is set by the root tests/conftest.py,
before triton is first imported.
"""

from __future__ import annotations

import pytest
import torch

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
