"""The sandbox worker run inside a test's own process (no jail, no fresh Python), for tests
that look at one layer of the judge. A pytest-xdist worker has threads of its own (execnet
starts them as it needs them, mid-test) that a jailed worker never has, and so may other
libraries a test process loaded; threads not running the candidate's code are left out of
the thread rule here, and only here."""
from __future__ import annotations

import sys
from types import FrameType
from typing import Any
from unittest import mock

import pytest

from kernelkb.optimizer.sandbox.forbidden import Forbidden
from kernelkb.optimizer.sandbox.worker import Worker


def evaluate_here(request: dict[str, Any]) -> Worker:
    """``Worker(request).evaluate()`` in this process; the worker, for its records."""
    worker = Worker(request)
    with mock.patch.object(Forbidden, "_running_threads", staticmethod(_threads_not_the_runners)):
        worker.evaluate()
    return worker


def leave_out_runner_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a whole test that keeps using a worker after ``evaluate``."""
    monkeypatch.setattr(Forbidden, "_running_threads", staticmethod(_threads_not_the_runners))


def _threads_not_the_runners() -> set[int]:
    def in_execnet(frame: FrameType | None) -> bool:
        while frame is not None:
            if frame.f_globals.get("__name__", "").startswith("execnet"):
                return True
            frame = frame.f_back
        return False

    def runs_a_candidate(frame: FrameType | None) -> bool:
        while frame is not None:
            if frame.f_code.co_filename.endswith("candidate.py"):
                return True
            frame = frame.f_back
        return False

    # a thread of the test process's own (a library's pool, a server an earlier test left)
    # may start mid-evaluation: only threads running the candidate's code count here
    return {ident for ident, frame in sys._current_frames().items()
            if not in_execnet(frame) and (runs_a_candidate(frame) or ident == _MAIN)}


_MAIN = __import__("threading").main_thread().ident
