"""Triton version as a dimension of transfer: which rows count as another version, and
the label that says so.

A configuration's speed depends on the compiler that built it (a Triton release changes
pipelining, layouts and the autotuner), so advice measured under another version is
served after same-version advice and carries a note. Versions compare as written
("3.6.0" vs "3.6.0"); a record from CUDA or HIP tuning data (``triton_version`` "none",
see kb/importers/) was never compiled by Triton and counts as another version.
"""

from __future__ import annotations

NO_TRITON = "none"


def other_version(measured: str | None, current: str | None) -> bool:
    """True when the row was measured under another Triton version than ``current``;
    False when the caller named no current version (nothing to compare against)."""
    if not current:
        return False
    return measured != current


def version_note(measured: str | None, current: str | None) -> str | None:
    """E.g. "measured on Triton 3.5.0; current 3.6.0", or None for the same version."""
    if not other_version(measured, current):
        return None
    if not measured or measured.lower() == NO_TRITON:
        return f"measured without Triton (CUDA/HIP data); current Triton {current}"
    return f"measured on Triton {measured}; current {current}"
