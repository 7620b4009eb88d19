"""The rule that a kernel's wrapper does not read where or when it runs (surroundings.py):
a candidate honest only inside the evaluator (a time bomb, a jail, variable, file or
module check) is refused for the read itself, at the import or in run(), while torch,
Triton, the import system and logging read as they like."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import evaluate
from kernelkb.optimizer.sandbox.surroundings import source_reads

BAD = Path(__file__).parents[2] / "bad_kernels"

# planted file -> what the refusal must name
READING = {
    "time_bomb": "time.monotonic at line 23",  # the import's clock
    "date_bomb": "datetime.datetime.now at line",  # run()'s clock, through datetime
    "jail_detect": "os.getpid at line 23",  # the process's identity
    "env_detect": "os.environ (__iter__) at line 22",  # the evaluator's variables
    "file_detect": "open('/proc/self/cgroup') at line 21",  # read, its refusal swallowed
    "modules_detect": "sys.modules at line 27",  # the evaluator's modules (read in the source)
}


@pytest.mark.parametrize("name", sorted(READING))
def test_a_kernel_honest_only_inside_the_evaluator_is_refused_for_the_read(name):
    result = evaluate("softmax", (BAD / f"{name}.py").read_text(), shapes=[(4, 128)], seeds=1)
    assert not result.ok and result.error_kind == "cheat_tamper", result.text
    assert "read its surroundings" in result.error_message, result.error_message
    assert READING[name] in result.error_message, result.error_message


def test_a_read_in_run_is_refused_where_it_is_made():
    source = get_task("softmax").template + '''

import os as _os

_inner = run


def run(*args):
    if _os.path.exists("/.dockerenv"):
        pass
    return _inner(*args)
'''
    result = evaluate("softmax", source, shapes=[(4, 128)], seeds=1)
    assert result.error_kind == "cheat_tamper", result.text
    assert "os.stat at line" in result.error_message, result.error_message


@pytest.mark.parametrize(("read", "named"), [
    ("torch.cuda.memory_allocated() > 2**30", "torch.cuda.memory_allocated at line"),
    ("__import__('importlib.machinery').machinery.SourceFileLoader("
     "'x', '/proc/self/cgroup').get_data('/proc/self/cgroup')", "open('/proc/self/cgroup')"),
    ("__import__('os').cpu_count() < 4", "os.cpu_count at line"),
    ("__import__('signal').alarm(600)", "signal.alarm at line"),  # a timer is a clock
])
def test_the_gpus_state_a_loader_on_a_path_and_the_hosts_size_are_surroundings_too(read, named):
    source = get_task("softmax").template + f"""

_inner = run


def run(*args):
    if {read}:
        pass
    return _inner(*args)
"""
    result = evaluate("softmax", source, shapes=[(4, 128)], seeds=1)
    assert result.error_kind == "cheat_tamper", result.text
    assert named in result.error_message, result.error_message


def test_libraries_and_the_standard_librarys_own_reads_are_allowed():
    source = get_task("softmax").template + '''

import functools
import logging

log = logging.getLogger("candidate")
_inner = run


@functools.lru_cache(maxsize=None)
def _block(cols):
    return cols


def run(*args):
    log.warning("a record, stamped with the time by logging itself")
    import colorsys  # the import system finds and reads a module the process lacked

    assert colorsys.rgb_to_hsv(0, 0, 0)[2] == 0
    return _inner(*args)
'''
    result = evaluate("softmax", source, shapes=[(4, 128), (1, 7)], seeds=1)
    assert result.ok, result.text


def test_the_source_read_names_every_form_of_the_interpreters_state():
    source = "import sys\nfrom sys import argv\nx = sys.modules\ny = sys.maxsize\n"
    assert source_reads(source) == ["sys.argv at line 2", "sys.modules at line 3"]
    assert source_reads("def broken(:\n") == []  # the import names a syntax error


@pytest.mark.parametrize(("setup", "call", "named"), [
    ("import time as _t\n_m = torch.nn.Module()\n_m.forward = _t.time\n", "_m()",
     "time.time at line"),
    ("import datetime as _d\n_m = torch.nn.Module()\n_m.forward = _d.datetime.now\n",
     "_m()", "datetime.datetime.now at line"),
    ("import os as _o\n_m = torch.nn.Module()\n_m.forward = _o.environ.get\n",
     "_m('HOME')", "os.environ (get) at line"),
    ("_m = torch.nn.Module()\n_m.forward = open\n", "_m('/proc/self/cgroup')",
     "open('/proc/self/cgroup')"),
])
def test_a_reader_handed_to_a_library_is_the_candidates_read(setup, call, named):
    """A reader stored as an nn.Module's forward is called from torch's frame: torch was
    handed it, so the read is the candidate's (handed.py)."""
    source = get_task("softmax").template + f"""

{setup}
_inner = run


def run(*args):
    try:
        {call}
    except OSError:
        pass
    return _inner(*args)
"""
    result = evaluate("softmax", source, shapes=[(4, 128)], seeds=1, refuse_imports=False)
    assert result.error_kind == "cheat_tamper", result.text
    assert named in result.error_message, result.error_message
