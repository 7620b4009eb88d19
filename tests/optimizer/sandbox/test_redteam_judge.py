"""Red team 2: cheats on the correctness judge, written from the docs alone.

Each plant in tests/bad_kernels/redteam2_*.py says in its docstring what it tries and what
a correct judge returns. A plant the judge rejects is a plain assertion; one that gets
through today is a strict xfail whose reason says how, so the hole stays on record and the
test turns red the day it is closed (then make it a plain assertion).
"""
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import evaluate

pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"


# (plant, task, the kind a correct judge returns; None: any rejection)
CASES = [
    # closed by the source allow-list (imports.py): each reaches past what a wrapper may name
    pytest.param("redteam2_torch_in_hook_torch_frame", "softmax", "cheat_tamper",
                 id="torch_in_hook_torch_frame"),
    pytest.param("redteam2_time_bomb_torch_frame", "softmax", "cheat_tamper",
                 id="time_bomb_torch_frame"),
    pytest.param("redteam2_numpy_in_hook", "softmax", "cheat_tamper", id="numpy_in_hook"),
    # closed by softmax's masked-suffix condition
    pytest.param("redteam2_last_chunk_max", "softmax", "wrong_result", id="last_chunk_max"),
    # closed by matmul's transposed-weight condition
    pytest.param("redteam2_matmul_unit_col_stride", "matmul", "wrong_result",
                 id="matmul_unit_col_stride"),
    # closed: earlier outputs are compared with their values when returned, after each
    # call; its weakref import now meets the allow-list first
    pytest.param("redteam2_scribbles_earlier_output", "softmax", "cheat_tamper",
                 id="scribbles_earlier_output"),
    # closed: inputs repeating half of the latest call's are checked too (it also takes
    # unit column stride for granted, which column-major inputs show first)
    pytest.param("redteam2_first_row_cache", "softmax", None, id="first_row_cache"),
]


@pytest.mark.parametrize(("plant", "task", "kind"), CASES)
def test_redteam_plant_is_rejected(plant, task, kind):
    source = (BAD / f"{plant}.py").read_text()
    # a wide time limit: on a loaded 2-core machine a slow plant must not read as caught
    # (a timeout is "not ok", which would pass an open plant's strict xfail)
    result = evaluate(task, source, shapes="auto", seeds=1, timeout_s=600)
    assert result.error_kind != "timeout", result.error_message
    assert not result.ok, f"{plant} passed the judge"
    if kind is not None:
        assert result.error_kind == kind, (result.error_kind, result.error_message)
