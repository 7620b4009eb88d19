"""Test-only crash points: kill this process at a named step, to test crash repair.

``KERNELKB_TEST_CRASH=<point>:<n>`` makes the n-th arrival at ``<point>`` SIGKILL the
process (no cleanup, like a power cut). Unset (always, outside tests) it costs one dict
lookup. Points: ``ingest.after_sql`` (rows committed, vectors not written),
``ingest.after_vectors``, ``reindex.batch`` (a rebuild half-way).
"""

from __future__ import annotations

import os
import signal
from collections import Counter

_SPEC = os.environ.get("KERNELKB_TEST_CRASH", "")
_POINT, _, _AT = _SPEC.partition(":")
_seen: Counter[str] = Counter()


def crash_point(name: str) -> None:
    if not _SPEC or name != _POINT:
        return
    _seen[name] += 1
    if _seen[name] >= int(_AT or 1):
        os.kill(os.getpid(), signal.SIGKILL)
