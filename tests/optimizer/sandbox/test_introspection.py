"""The rule that the harness is not the candidate's to read (introspection.py): frames,
gc's object graph, code objects, ctypes and tracers are refused to the candidate's own
code, at the import or in run(), while the standard library's own uses of a frame
(namedtuple, warnings, logging) and changes to the candidate's own objects stay allowed.
The layers behind it are tested alone in test_tamper.py, test_triton_only.py and
test_judge.py, with the rule off."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import evaluate

BAD = Path(__file__).parents[2] / "bad_kernels"

# planted file -> what the refusal must name
REACHING = {
    "frames_counterfactual": "sys._getframe at line 24",  # honest only in the counterfactual
    "gc_reads_tracker": "gc.get_objects at line 24",  # the tracker's flag read through gc
    "swaps_check_code": "object.__setattr__ '__code__'",  # a check's bytecode swapped
    "swaps_event_timer": "object.__setattr__ '__code__'",  # the event timer's bytecode
    "ctypes_write": "ctypes.",  # the answer written through a raw pointer
    "skips_conditions": "gc.get_objects",  # the worker's input conditions switched off
    # the tracker taken from the dispatch mode stack, its recording switched off
    "mode_flag_sniff": "torch.utils._python_dispatch._get_current_dispatch_mode at line",
    # the GPU's own clock switched off around a side stream's work
    "clock_switched_off": "torch.autograd._disable_profiler at line 27",
}


@pytest.mark.parametrize("name", sorted(REACHING))
def test_reaching_into_the_harness_is_refused_at_the_source(name):
    result = evaluate("softmax", (BAD / f"{name}.py").read_text(), shapes=[(4, 128), (1, 7)],
                      seeds=1)
    assert not result.ok and result.error_kind == "cheat_tamper", result.text
    assert "reached into the evaluator" in result.error_message, result.error_message
    assert REACHING[name] in result.error_message, result.error_message


HONEST_EXTRAS = '''
import collections
import functools
import logging
import warnings

Pair = collections.namedtuple("Pair", "a b")  # namedtuple takes a frame for its module
log = logging.getLogger("candidate")


class Cache:
    pass


Cache.hits = 0  # its own class: the candidate's to change


def counted(fn):
    @functools.wraps(fn)  # sets attributes on its own function
    def wrapper(*args):
        Cache.hits += 1
        return fn(*args)
    wrapper.__defaults__ = None  # its own function's defaults
    return wrapper


run = counted(run)
'''


def test_the_standard_librarys_own_uses_and_the_candidates_own_objects_are_allowed():
    source = get_task("softmax").template + HONEST_EXTRAS + '''

_inner = run


def run(*args):
    warnings.warn("a warning, with the caller's frame looked up by warnings itself")
    log.warning("a log line, its caller found by logging itself")
    return _inner(*args)
'''
    result = evaluate("softmax", source, shapes=[(4, 128), (1, 7)], seeds=1)
    assert result.ok, result.text
