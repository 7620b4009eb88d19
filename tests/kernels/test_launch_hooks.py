"""The exported op's fast paths step aside only while a launch hook is really set.

From Triton 3.5 on, ``knobs.runtime.launch_enter_hook`` is a chain that is never None; a
test against None held on every call and sent every launch of an exported op (its launch
plan and its per-shape launch cache) down Triton's slow path, and with fresh imports the
plan's slow path imports the module again per call: 1.6-2.9 ms a call on an H100 where
``run()`` took 25-48 µs.
"""

from __future__ import annotations

import pytest

from kernelkb.kernels.launch_hooks import plan_hook_test

knobs = pytest.importorskip("triton.knobs")


def test_an_empty_hook_chain_is_no_hook():
    assert knobs.runtime.launch_enter_hook is not None  # why `is not None` was wrong
    assert plan_hook_test()() is False


def test_a_profilers_hook_is_seen_while_set_and_not_after():
    hooked = plan_hook_test()
    chain = knobs.runtime.launch_enter_hook

    def profiler_hook(metadata):
        return None

    chain.add(profiler_hook)
    try:
        assert hooked() is True
    finally:
        chain.remove(profiler_hook)
    assert hooked() is False


def test_a_hook_set_as_a_plain_function_counts(monkeypatch):
    hooked = plan_hook_test()
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", lambda metadata: None)
    assert hooked() is True
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", None)
    assert hooked() is False
