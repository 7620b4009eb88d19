"""The data types a task may run in: torch's dtype for each name of the vocabulary."""

from __future__ import annotations

import torch

from kernelkb.kernels.shared.vocabulary import DTYPE_NAMES

# by their names (kernels/shared/vocabulary.py)
DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in DTYPE_NAMES}
