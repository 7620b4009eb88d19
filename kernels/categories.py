"""The edit categories a task's knobs and variants may be filed under.

The store's closed vocabulary (``kb.record.EDIT_CATEGORIES``) without "baseline", which
tags the starting kernel itself, never a knob. Kept here because this package imports
nothing from ``kb`` (it runs on a bare GPU host); tests/kernels/test_registration.py
checks that the two lists agree.
"""

from __future__ import annotations

KNOB_CATEGORIES: tuple[str, ...] = (
    "tiling",
    "warps_stages",
    "fusion",
    "precompute",
    "vectorization",
    "masking",
    "causal_skip",
    "specialization",
    "algorithm",
    "launch_shape",
    "precision",
    "memory_layout",
    "other",
)
