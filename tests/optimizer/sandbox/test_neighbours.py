"""Other processes on the GPU (optimizer/sandbox/neighbours.py): this process's own tree
is never a neighbour, another process is; without NVML nothing is said."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kernelkb.optimizer.sandbox import neighbours
from kernelkb.optimizer.sandbox.feedback import render
from kernelkb.optimizer.sandbox.result import EvalResult


def test_own_descendants_are_not_neighbours_and_a_stranger_is():
    child = subprocess.Popen([sys.executable, "-c",
                              "import subprocess, sys, time; subprocess.Popen([sys.executable, "
                              "'-c', 'import time; time.sleep(30)']); time.sleep(30)"])
    try:
        import time

        time.sleep(1.0)  # the grandchild started
        tree = neighbours.own_tree()
        assert os.getpid() in tree and child.pid in tree
        assert len(tree) >= 3, tree  # this process, the child and its child
        stranger = os.getppid() if os.getppid() not in tree else 1
        assert neighbours.others([child.pid, stranger, stranger], tree) == [stranger]
    finally:
        child.kill()
        child.wait()


def test_sharing_is_said_in_the_feedback_text():
    shared = EvalResult(ok=True, stage="correctness", task_name="softmax", dtype="float16",
                        shape_set="cpu",
                        gpu_shared="GPU shared with 1 other process(es) (pid 42): ...")
    assert "GPU shared with 1 other process(es)" in render(shared)
    alone = EvalResult(ok=True, stage="correctness", task_name="softmax", dtype="float16",
                       shape_set="cpu")
    assert "GPU shared" not in render(alone)


def test_without_nvml_nothing_is_known_or_said():
    try:
        import pynvml  # noqa: F401
    except ImportError:
        assert neighbours.gpu_pids() is None and neighbours.shared_note() is None
    else:  # a GPU host: whatever NVML says, this process itself is never counted
        assert os.getpid() not in neighbours.others(neighbours.gpu_pids() or [],
                                                    neighbours.own_tree())


def test_a_quiet_window_is_not_waited_for_where_nothing_is_known_or_nobody_shares():
    """Without NVML (this CPU host) or with the GPU to itself, no wait and nothing said;
    the wait is bounded by its seconds either way."""
    import time

    began = time.monotonic()
    note = neighbours.quiet_window(2.0, poll_s=0.5)
    assert time.monotonic() - began < 3.0
    assert note == neighbours.shared_note()


def test_the_limit_grows_once_where_the_gpu_is_shared(tmp_path, monkeypatch):
    """A worker past its limit on a GPU NVML sees other processes on is given
    SHARED_GPU_FACTOR times the limit, once, by the host: a neighbour's work slows every
    timed call. Where the GPU is its own, the limit stands; and a worker slower than the
    grown limit still times out."""
    import subprocess
    import sys

    from kernelkb.optimizer.sandbox import runner

    result = tmp_path / "result.json"
    result.write_text("{}")
    fd = os.open(result, os.O_RDONLY)

    def wait(seconds: float, shared: bool) -> bool:
        monkeypatch.setattr(runner, "_gpu_shared", lambda: shared)
        proc = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
        try:
            timed_out, _, limit_s = runner._wait(proc, fd, time.monotonic(), 0.6,
                                                 shared_gpu=True)
            assert limit_s == pytest.approx(1.8 if shared else 0.6)  # the message names it
        finally:
            proc.kill()
            proc.wait()
        return timed_out

    try:
        assert wait(1.2, shared=False)  # its own GPU: 0.6 s is the limit
        assert not wait(1.2, shared=True)  # shared: 1.8 s
        assert wait(3.0, shared=True)  # grown once, not again
    finally:
        os.close(fd)
