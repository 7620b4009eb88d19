"""Turns on one GPU between evaluations running at once (an MCP server, several loops).

A timing phase needs the GPU to itself: another process's kernels, time-sliced in beside
the timed ones, stretch host-side clocks (on the H200, with eight evaluations at once,
honest 0.01 ms kernels read 0.4 ms synchronised) and widen the comparison's interval. So
the GPU is shared as a readers-writer lock over two lock files the runner opens:

- checks take it *shared*: any number of evaluations check shapes at once;
- timing takes it *exclusive*: it waits for the checks in flight to finish their shape,
  and no new check starts until the timing is done.

The *gate* gives timing its priority: a timer holds the gate while it waits, and a check
passes through the gate before it takes its share, so a stream of checks cannot starve a
timer. Waiting is bounded (``MAX_WAIT_S``: a stuck or hostile worker must not stop every
other), and the time spent waiting is reported, so the runner does not count it against
the candidate's time limit (``waited_s``).
"""

from __future__ import annotations

import fcntl
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

MAX_WAIT_S = 300.0
POLL_S = 0.02


class GpuTurns:
    """The worker's side of the lock: ``share()`` around GPU checks, ``exclusive()``
    around timing. ``report(waited_s)`` is called while waiting (about once a second)
    and after, with the evaluation's total wait so far. Without descriptors (no GPU, or
    a caller that runs alone) both are no-ops."""

    def __init__(self, gate_fd: int | None, lock_fd: int | None,
                 report: Callable[[float], None] = lambda waited: None) -> None:
        self.gate_fd, self.lock_fd, self.report = gate_fd, lock_fd, report
        self.waited_s = 0.0

    @contextmanager
    def share(self) -> Iterator[None]:
        if self.lock_fd is None or self.gate_fd is None:
            yield
            return
        gate = self._take(self.gate_fd, fcntl.LOCK_SH)
        held = self._take(self.lock_fd, fcntl.LOCK_SH)
        if gate:
            fcntl.flock(self.gate_fd, fcntl.LOCK_UN)
        try:
            yield
        finally:
            if held:
                fcntl.flock(self.lock_fd, fcntl.LOCK_UN)

    @contextmanager
    def exclusive(self) -> Iterator[float | None]:
        """Yields the seconds waited, negative when the wait gave up and timing goes on
        without the GPU to itself (the report says so)."""
        if self.lock_fd is None or self.gate_fd is None:
            yield None
            return
        began = time.monotonic()
        gate = self._take(self.gate_fd, fcntl.LOCK_EX)
        held = gate and self._take(self.lock_fd, fcntl.LOCK_EX, since=began)
        waited = round(time.monotonic() - began, 3)
        try:
            yield waited if held else -waited
        finally:
            if held:
                fcntl.flock(self.lock_fd, fcntl.LOCK_UN)
            if gate:
                fcntl.flock(self.gate_fd, fcntl.LOCK_UN)

    def _take(self, fd: int, mode: int, since: float | None = None) -> bool:
        """Poll for the lock (a blocking flock cannot be bounded); False after
        ``MAX_WAIT_S`` or on a descriptor that cannot be locked."""
        began = time.monotonic() if since is None else since
        last_report = time.monotonic()
        start = time.monotonic()
        try:
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    now = time.monotonic()
                    if now - began >= MAX_WAIT_S:
                        log.warning("gave up waiting %.0f s for the GPU: going on", now - began)
                        return False
                    if now - last_report >= 1.0:
                        self.report(self.waited_s + now - start)
                        last_report = now
                    time.sleep(POLL_S)
                except OSError as err:  # not a lockable descriptor: go on without
                    log.warning("GPU lock unusable: %s", err)
                    return False
        finally:
            waited = time.monotonic() - start
            if waited > POLL_S:
                self.waited_s += waited
                self.report(self.waited_s)
