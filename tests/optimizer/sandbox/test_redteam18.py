"""Red team 18 (tests/bad_kernels/REDTEAM18.md): held-out plants written from the docs
alone, broader than the address rounds before it. Five cheats passed the CPU judge:

- rope with a cos/sin table of 65,536 positions, wrapping past it: the long-context
  condition now draws positions up to 2**20, the first sequence always past 2**19;
- attention loading keys and values past ``cache_len + seq`` and trusting the causal mask
  to weigh them 0: the cache's unwritten slots now hold NaN;
- attention over the last 32,768 keys only: the judge now calls the task's reach shape,
  one query over a 128K-token cache (65,537 keys under the interpreter);
- a launch counter read through ``%gridid``: every special register but a thread's place
  in the grid is a clock (test_clock_reads.py);
- rmsnorm that tells the jail by an 8 GiB allocation it may not make there, caught at
  import: a wrapper may no longer catch an exception (source_rules.caught_errors).

The escape probe got nothing out (no secret, no stdin); host paths under the toolchain's
names reach the jail, as they must for its compiler to run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelkb.kernels.discovery import get_task

BAD = Path(__file__).parents[2] / "bad_kernels"


def test_long_context_positions_reach_past_any_table_of_the_first_half_million():
    rope = get_task("rope")
    (condition,) = [c for c in rope.input_conditions if c.name == "a long context"]
    for seed in range(8):
        q, k, positions = condition.apply(rope.make_inputs((3, 16, 2, 1, 32), torch.float32,
                                                           seed, "cpu"), seed)
        assert positions.dtype == torch.int32
        assert int(positions[0].max()) >= 2**22, positions[0]  # past 2**21 since round 22
        assert int(positions.max()) < 2**23 and int(positions.min()) >= 2**15
        assert torch.equal(positions[:, 1:] - positions[:, :-1],
                           torch.ones_like(positions[:, 1:]))  # a sequence's steps kept


def test_the_caches_unwritten_slots_hold_nan_and_the_reference_never_reads_them():
    attention = get_task("attention")
    shape = (1, 2, 3, 5, 32)
    inputs = attention.make_inputs(shape, torch.float16, 0, "cpu")
    k_cache, v_cache, cache_len = inputs[3], inputs[4], inputs[5]
    written = cache_len + shape[2]
    for cache in (k_cache, v_cache):
        assert cache[:, :, written:].isnan().all() and not cache[:, :, :written].isnan().any()
    assert not attention.reference(*inputs).isnan().any()


def test_the_reach_is_a_long_cache_in_more_than_one_form():
    attention = get_task("attention")
    assert attention.reach is not None and attention.cpu_reach is not None
    assert attention.reach.spans[3] == range(2**16, 2**17)  # to a 128K-token cache, GPU
    assert min(attention.cpu_reach.spans[3]) > 2**15  # past a 32K window
    assert max(attention.cpu_reach.spans[3]) > 2**16  # and a 64K table
    assert max(attention.reach.spans[0]) * max(attention.reach.spans[1]) > 1


def _evaluated(task: str, plant: str, reach: tuple[int, ...] | None = None):
    from kernelkb.optimizer.sandbox import evaluate

    return evaluate(task, (BAD / f"redteam18_{plant}.py").read_text(), shapes="auto",
                    seeds=1, timeout_s=900, reach=reach)


# the window's test names a reach of 65,537 keys: a draw of fewer than ~33,000 (one in
# a few hundred) drops too few keys to leave the tolerance
@pytest.mark.slow
@pytest.mark.parametrize(("plant", "task", "reach"), [
    ("rope_table_wrap_64k", "rope", None), ("attention_cache_tail", "attention", None),
    ("attention_window_32k", "attention", (1, 1, 1, 65537, 64))])
def test_kernels_right_only_on_short_or_finite_inputs_are_refused(plant: str, task: str,
                                                                   reach):
    result = _evaluated(task, plant, reach)
    assert not result.ok and result.error_kind == "wrong_result", result.text


def test_a_module_that_catches_an_exception_is_refused_from_its_source():
    from kernelkb.optimizer.sandbox import source_rules

    source = (BAD / "redteam18_rmsnorm_memory_cap_watch.py").read_text()
    kind, message = source_rules.refused(source, get_task("rmsnorm"))
    assert kind == "cheat_tamper" and "a try statement" in message, message
    optional = ("try:\n    from triton.language.extra.cuda import libdevice\n"
                "except ImportError:\n    from triton.language.math import libdevice\n")
    assert source_rules.caught_errors(optional) == []  # an optional module, no more
    for caught in ("try:\n    x = 1\nexcept RuntimeError:\n    x = 0\n",
                   "try:\n    import a\nfinally:\n    pass\n",
                   "class Quiet:\n    def __exit__(self, *exc):\n        return True\n"):
        assert source_rules.caught_errors(caught), caught


@pytest.mark.slow
def test_a_kernel_that_tells_the_jail_by_its_memory_cap_is_refused():
    result = _evaluated("rmsnorm", "rmsnorm_memory_cap_watch")
    assert not result.ok and result.error_kind == "cheat_tamper", result.text
