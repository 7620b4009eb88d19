"""Candidates that attack the jail (optimizer/sandbox/jail.py, runner.py, limits.py).

Each planted candidate in tests/bad_kernels/ tries one way out: undo the jail from
inside (remount, unmount, new namespaces, setns, ptrace), read host secrets, write the
host's /dev, plant links and a FIFO where a runner would look, fill the disk, take the
host's memory through children, start threads without end. Every attempt must fail,
and the evaluation must come back promptly with the candidate's own error.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import evaluate, jail, limits

BAD = Path(__file__).parents[2] / "bad_kernels"
pytestmark = pytest.mark.skipif(jail.unavailable_reason() is not None,
                                reason=f"no namespaces here: {jail.unavailable_reason()}")


def run_probe(name: str, **fill: str) -> tuple[object, str]:
    source = (BAD / name).read_text()
    for token, value in fill.items():
        source = source.replace(f"__{token}__", value)
    began = time.monotonic()
    # the rule that refuses reads of the surroundings first is off: the jail holds alone
    result = evaluate("softmax", source, shapes=[(1, 7)], seeds=1, timeout_s=120,
                      refuse_surroundings=False)
    assert time.monotonic() - began < 100, "the runner blocked"
    assert result.error_kind == "runtime_error", result.text
    return result, result.error_message.split("RuntimeError: ", 1)[-1]


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "id_rsa"
    path.write_text("FAKE-PRIVATE-KEY-" + uuid.uuid4().hex)
    return path


def test_nothing_undoes_the_jail_or_reaches_the_host(secret):
    marker = f"kkb_{uuid.uuid4().hex[:12]}"
    secrets = [str(secret), "/etc/shadow", str(Path(__file__).resolve())]
    result, message = run_probe("jailbreak_probe.py", MARKER=marker,
                                SECRET_FILES="|".join(secrets))
    report = message.split("PROBE ")[1].splitlines()[0]
    attempts = report.split(" | ")
    assert attempts[0] == "lock=CapEff=0000000000000000,CapBnd=0000000000000000," \
                          "NoNewPrivs=1,Seccomp=2", report
    assert attempts[1:] == [], f"escapes that worked: {attempts[1:]}"
    assert not os.path.exists(f"/dev/{marker}")  # its /dev was its own
    assert secret.read_text() not in result.text + str(result.artifacts)


def test_the_working_tree_is_bounded():
    _, message = run_probe("fills_disk.py")
    written, why = message.split("FILLED ")[1].split()[:2]
    assert why in ("ENOSPC", "EFBIG"), message
    assert int(written) <= 512 * 2**20


def test_threads_are_capped_for_the_whole_evaluation():
    probe = limits.per_evaluation(False, None)
    with probe as confine:
        if confine.note:
            pytest.skip(confine.note)
    _, message = run_probe("thread_bomb.py")
    assert int(message.split("THREADS ")[1].split()[0]) < limits.PIDS_MAX


@pytest.mark.slow
def test_memory_is_capped_for_the_whole_tree_not_per_process():
    with limits.per_evaluation(False, None) as confine:
        if confine.note:
            pytest.skip(confine.note)
    source = (BAD / "many_children.py").read_text()
    result = evaluate("softmax", source, shapes=[(1, 7)], seeds=1, timeout_s=120,
                      mem_limit_mb=4096, refuse_surroundings=False)  # the limits alone
    codes = result.error_message.split("CHILDREN ", 1)[-1].splitlines()[0]
    assert "-9" in codes, f"all three 1600 MiB children lived under a 4096 MiB limit: {codes}"


@pytest.mark.slow  # > 20 s on two cores
def test_evaluations_at_once_are_capped_and_the_queue_is_bounded(monkeypatch):
    """Four threads evaluate at once under a cap of one and a queue of two: never more
    than one worker runs, and the fourth is refused with a clear error."""
    import threading

    from kernelkb.optimizer.sandbox import runner

    monkeypatch.setenv("KERNELKB_SANDBOX_CONCURRENCY", "1")
    monkeypatch.setenv("KERNELKB_SANDBOX_QUEUE", "2")
    seen, peak, lock = [], [0], threading.Lock()
    real = runner._run_worker

    def counted(*args, **kwargs):
        with lock:
            peak[0] = max(peak[0], runner.SLOTS.running)
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "_run_worker", counted)
    source = (BAD / "_good.py").read_text()

    def one():
        try:
            # the judge's whole evaluation on a GPU: 96.6 s for this one on an H100 (its
            # timestamps through the profiler), past the default 60 s, which timed out all
            # three there
            result = evaluate("softmax", source, shapes=[(1, 7)], seeds=1, timeout_s=600)
            # True, or what went wrong
            seen.append(result.ok or f"{result.error_kind}: {result.error_message}"[:600])
        except runner.SandboxBusy as err:
            seen.append(str(err))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert peak[0] == 1
    assert seen.count(True) == 3 and any("try again later" in str(s) for s in seen), seen
