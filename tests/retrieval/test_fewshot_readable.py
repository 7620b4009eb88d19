"""Few-shot blocks a person and a model can read: each diff shows its changed lines within
the budget (not only its header), the block defines "vs baseline", and insights say what
their median and best are computed over.

A real store (vectors off), records with real unified diffs of a task's kernel."""

from __future__ import annotations

from typing import Any

import pytest
from kb_testdata import record_dict

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.diffcheck import check
from kernelkb.retrieval.fewshot import LEGEND, changed_lines
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.retrieval.quoting import CLOSE, OPEN
from kernelkb.service import LocalKnowledge

SOFTMAX = get_task("softmax")
EDITS = [{"NUM_WARPS": 8}, {"ROWS_PER_PROGRAM": 4}, {"NUM_WARPS": 2, "ROWS_PER_PROGRAM": 2}]


def _diff(config: dict) -> str:
    return check(SOFTMAX.template, SOFTMAX.render(config)).diff


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) without vectors."""
    return {"vectors": False}


@pytest.fixture
def store(knowledge: LocalKnowledge) -> LocalKnowledge:
    """``knowledge`` holding four improving softmax edits and one slower one."""
    kb = knowledge
    rows = [record_dict(summary=f"set {config}", config=config, diff=_diff(config),
                        categories=("warps_stages",), iteration=n + 1,
                        speedup=1.1 + n / 10)
            for n, config in enumerate(EDITS)]
    rows.append(record_dict(summary="slower", verdict="regressed", speedup=0.8,
                            config={"NUM_WARPS": 16}, diff=_diff({"NUM_WARPS": 16}),
                            categories=("warps_stages",), iteration=9))
    assert len(kb.ingest(rows).accepted) == 4
    return kb


def test_changed_lines_leave_out_headers_and_context() -> None:
    diff = _diff({"NUM_WARPS": 8})
    assert diff.startswith("---") and "@@" in diff  # what a cut to the first lines showed
    lines = changed_lines(diff)
    assert lines == [line for line in diff.splitlines()
                     if line[:1] in "+-" and not line.startswith(("---", "+++"))]
    assert any(line.startswith("-NUM_WARPS") for line in lines)
    assert any(line.startswith("+NUM_WARPS = 8") for line in lines)


@pytest.mark.parametrize("budget", [4000, 1500, 900])
def test_every_shown_entry_shows_its_changed_lines_within_the_budget(
        store: LocalKnowledge, budget: int) -> None:
    result = store.retrieve(RetrievalQuery(op_type="softmax", gpu_name="NVIDIA H200", k=4,
                                           max_chars=budget, related_ops=[]))
    block = result.prompt_block
    assert len(block) <= budget
    assert block.startswith(OPEN) and block.endswith(CLOSE)
    entries = [part for part in block.split("\n[")[1:]]
    assert entries
    for entry in entries:
        assert "changed lines:" in entry, entry
        assert "+NUM_WARPS" in entry or "+ROWS_PER_PROGRAM" in entry
        assert "--- " not in entry and "@@" not in entry
    if budget >= 1500:
        assert LEGEND in block


def test_the_block_defines_vs_baseline(store: LocalKnowledge) -> None:
    block = store.retrieve(RetrievalQuery(op_type="softmax", related_ops=[])).prompt_block
    assert "vs baseline: over the task's PyTorch reference run eagerly on the same GPU" in block
    assert "x vs baseline" in block  # the figure it defines is in the entries


def test_insights_say_what_median_and_best_are_over(store: LocalKnowledge) -> None:
    report = store.insights(op_type="softmax")
    (cat,) = report.categories
    assert cat.count == 4 and cat.wins == 3 and cat.gains == 3
    assert cat.median_speedup == pytest.approx(1.2) and cat.best_speedup == pytest.approx(1.3)
    assert "median and best: speedup vs the parent kernel" in report.basis
    assert "over the timed wins" in report.basis
