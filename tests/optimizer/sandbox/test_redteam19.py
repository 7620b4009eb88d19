"""Red team 19 (tests/bad_kernels/REDTEAM19.md): held-out plants from the docs alone,
after round 18's rules. Two cheats passed the CPU judge, each short only on a length or a
form no check built, and one probe swallowed an error with no ``try``:

- softmax whose rows past 2**18 columns take their max from the first 2**18 only: the
  task's reach shapes are now rows of 600K-786K columns, the big shape's conditions in
  their rows (the masked prefix's half at -inf passes the span);
- attention over the last 32,768 keys only where batch x heads > 1, while the reach
  shape had one head: the reach shapes now come in three forms, one drawn an evaluation;
- an 8 GiB allocation in a ``__del__`` (its error printed and dropped): a class may define
  no ``__del__``, as no ``__exit__``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelkb.kernels.discovery import get_task

BAD = Path(__file__).parents[2] / "bad_kernels"


def test_a_finalizer_that_drops_an_error_is_refused_from_its_source():
    from kernelkb.optimizer.sandbox.source_rules import caught_errors

    for source in ("class Probe:\n    def __del__(self):\n        pass\n",
                   "import functools\nimport torch\n\n\nclass Probe:\n"
                   "    __del__ = functools.partial(torch.empty, 8 << 30)\n"):
        assert any("defines __del__" in line for line in caught_errors(source)), source
    assert caught_errors("class Config:\n    size: int = 4\n\n    def n(self):\n"
                         "        return self.size\n") == []


def test_softmax_reaches_rows_whose_masked_half_passes_any_span_of_2_18():
    """A draw may hold seven rows or more (one for each condition of the values) of more
    than 2**19 columns (tests/kernels/test_reach.py draws them)."""
    for reach in (get_task("softmax").reach, get_task("softmax").cpu_reach):
        assert reach is not None
        rows, cols = reach.spans
        assert max(cols) // 2 > 2**18 and max(rows) >= 7


def _evaluated(task: str, plant: str, **kwargs):
    from kernelkb.optimizer.sandbox import evaluate

    return evaluate(task, (BAD / f"redteam19_{plant}.py").read_text(), shapes="auto",
                    seeds=1, timeout_s=900, **kwargs)


@pytest.mark.slow
def test_a_row_max_from_the_first_columns_of_a_long_row_is_refused():
    """On a reach shape the test names: seven rows (one a condition of the values) whose
    masked half passes 2**18. The judge draws its own (a row past 2**18 columns in about
    three draws of four); how often the draws meet this region is tests/kernels/
    test_reach.py's."""
    result = _evaluated("softmax", "softmax_wide_row_span_max", reach=(7, 540000),
                        reach_rows_from=4)  # the first row a masked prefix
    assert not result.ok and result.error_kind == "wrong_result", result.text
    assert "reach" in (result.error_message or ""), result.error_message


@pytest.mark.slow
def test_a_window_taken_only_with_several_heads_is_refused():
    result = _evaluated("attention", "attention_many_heads_window", reach=(1, 2, 1, 65537, 64))
    assert not result.ok and result.error_kind == "wrong_result", result.text
