"""Whether a profiler has a Triton launch hook set, where the op is served.

Why: the exported op's fast paths (a launch plan, the per-shape launch cache) call the
compiled kernel's launcher directly, past Triton's hooks; while a profiler has a hook set
they must take Triton's own path so the profiler sees every launch. From Triton 3.5 on
the hook is a chain that is never None (an empty chain is no hook): testing it against
None held on every call and sent every launch of the exported op down the slow path.
``optimizer/export.py`` writes this file's text verbatim into the exported module (before
plan_record.py): no import of torch or KernelKB; names prefixed ``plan_``.
"""

from __future__ import annotations

import typing


def plan_hook_test() -> typing.Callable[[], bool]:
    """A test of no arguments, cheap enough for every call: is a launch hook set now?"""
    try:
        from triton import knobs
    except ImportError:  # before Triton 3.4: no process-wide hook to honour
        return lambda: False
    runtime = knobs.runtime

    def hooked() -> bool:
        hook = runtime.launch_enter_hook
        return hook is not None and bool(getattr(hook, "calls", True))

    return hooked
