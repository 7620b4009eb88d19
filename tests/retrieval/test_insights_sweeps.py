"""Imported tuning data is measurements of configurations, not edits that won or lost:
"what worked" leaves it out and says how much it left out (it once read as "tiling:
48,546 tries, 0% win rate" for convolution on an A100)."""

from __future__ import annotations

from typing import Any

import pytest
from kb_testdata import record_dict

from kernelkb.service import LocalKnowledge


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) without vectors: insights read SQL."""
    return {"vectors": False}


def test_sweep_measurements_are_not_counted_as_tries(knowledge: LocalKnowledge) -> None:
    kb = knowledge
    edit = record_dict(hw="H200", summary="one edit that won")
    sweep = record_dict(hw="H200", summary="a measured configuration of a sweep",
                        run="import:x")
    sweep["provenance"]["round_kind"] = "sweep"
    sweep["edit"]["parent_hash"] = None  # as importers write them: no kernel it edits
    sweep["verdict"] = "neutral"
    assert len(kb.ingest([edit, sweep]).accepted) == 2
    report = kb.insights(op_type="softmax", gpu_name="NVIDIA H200")
    assert report.total == 1 and report.sweep_measurements == 1
    assert sum(c.count for c in report.categories) == len(edit["edit"]["categories"])
    assert "are not edits" in (report.note or "") and "--include-own" in report.note
