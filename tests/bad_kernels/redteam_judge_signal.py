"""Red team, judge signal (planted; run by test_redteam_jail.py):
a wrong kernel (all zeros) that, at its first call, sends its parent, the judge (pid 1 of the
jail's PID namespace), every signal a Python process may catch: SIGINT (Python's own
KeyboardInterrupt handler, installed in every interpreter), SIGTERM, SIGHUP, SIGUSR1,
SIGUSR2, SIGALRM, SIGQUIT, SIGXCPU, SIGVTALRM, SIGPROF, SIGWINCH. The kernel of a PID
namespace drops a signal to its init only where init has no handler, so a handler the
judge keeps is a way in from the same-user worker. A judge that dies on one of them writes
no verdict: the runner then reports a `crash` blamed on the worker ("worker crashed with
signal SIGINT") in place of the judge's `wrong_result`, a verdict set by a signal rather
than by the kernel's output. Signals are sent with os.kill from the candidate's own process
and, where that is refused, with kill(1) from a child.
Expected: the kernel's own rejection (torch_compute or wrong_result: the zeros), not a
crash, and no signal name in the message."""
import os
import signal
import subprocess

import torch

SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGQUIT", "SIGXCPU",
           "SIGVTALRM", "SIGPROF", "SIGWINCH")
_SENT = []


def _signal_the_judge():
    judge = os.getppid()
    for name in SIGNALS:
        try:
            os.kill(judge, getattr(signal, name))
        except Exception:  # noqa: BLE001 - refused in-process: a child sends it
            subprocess.run(["kill", f"-{name[3:]}", str(judge)], capture_output=True)
    _SENT.append(judge)


def run(x):
    if not _SENT:
        _signal_the_judge()
    return torch.zeros_like(x)
