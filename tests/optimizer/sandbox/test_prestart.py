"""Workers started ahead (runner.WARM): each is used once, by an evaluation of the kind
it was made for, and gives the result a fresh one gives."""

from __future__ import annotations

import time

import pytest

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import evaluate, runner

SHAPES = [(1, 7)]


def _evaluate(source: str):
    return evaluate("softmax", source, shapes=SHAPES, seeds=1, conditions=False,
                    timeout_s=300)


def _ready(key, timeout: float = 120.0):
    with runner.WARM.lock:
        runner.WARM.lock.wait_for(lambda: key not in runner.WARM.starting, timeout=timeout)
        return runner.WARM.ready.get(key)


def test_a_worker_started_ahead_is_used_once_and_judges_alike(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELKB_PRESTART", "1")
    naive = get_task("softmax").template
    wrong = naive.replace("tl.exp(", "tl.exp(2 * ", 1)
    assert wrong != naive
    first = _evaluate(naive)
    key = runner._warm_key(use_gpu=False, mem_limit_mb=None)
    ahead = _ready(key)
    time.sleep(2)  # it outlives the thread that started it (the parent-death signal)
    assert ahead is not None and ahead.alive()  # imports done, waiting for a request
    second = _evaluate(wrong)  # takes the one started ahead
    assert ahead.proc is not None and ahead.proc.poll() is not None  # used once, ended
    assert first.ok and not second.ok and second.error_kind == "wrong_result"
    again = _ready(key)
    assert again is not None and again is not ahead  # the next one, started after


def test_another_kind_of_evaluation_gets_a_fresh_worker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELKB_PRESTART", "1")
    _evaluate(get_task("softmax").template)
    key = runner._warm_key(use_gpu=False, mem_limit_mb=None)
    ahead = _ready(key)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # an environment the worker sees changed
    assert runner._warm_key(use_gpu=False, mem_limit_mb=None) != key
    assert _evaluate(get_task("softmax").template).ok
    assert ahead is not None and ahead.alive()  # not taken: made for the other environment


def test_off_starts_nothing_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELKB_PRESTART", "0")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # a kind no other test made
    assert _evaluate(get_task("softmax").template).ok
    assert _ready(runner._warm_key(use_gpu=False, mem_limit_mb=None), timeout=1) is None
