"""Failing draws kept per task, asked first by every later evaluation of the task.

Why: the property-based draw (properties.py) finds a failing case by chance and shrinks
it; without a memory the next evaluation (the agent's next edit) may never draw it again
and a regression slips back in. The host keeps the shrunk case from the judge's record
and hands the task's kept cases to the next request; a case is a shape, a drawn
condition's name and a seed, so it replays exactly.

Where: ``$KERNELKB_HOME/regressions/<task>.json``, else under the user's data folder
(kernels/shared/folders.py, the store's default home); at most ``KEEP`` cases a task,
the newest kept. The file is replaced whole (kernels/shared/atomic.py): two evaluations
of one task may keep a case at once, and a reader never sees half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kernelkb.kernels.shared.atomic import replaced
from kernelkb.kernels.shared.folders import user_data

KEEP = 8


def folder() -> Path:
    home = os.environ.get("KERNELKB_HOME")
    return (Path(home) if home else user_data()) / "regressions"


def load(task: str) -> list[dict[str, Any]]:
    """The task's kept cases, newest first ([] where none or unreadable)."""
    try:
        data = json.loads((folder() / f"{task}.json").read_text())
    except (OSError, ValueError):
        return []
    return [c for c in data if isinstance(c, dict)][:KEEP] if isinstance(data, list) else []


def keep(task: str, judge: dict[str, Any] | None) -> dict[str, Any] | None:
    """Keep the shrunk case of a judge's record (None where it found none)."""
    case = ((judge or {}).get("property") or {}).get("shrunk")
    if not isinstance(case, dict):
        return None
    cases = [case, *(c for c in load(task) if c != case)][:KEEP]
    path = folder() / f"{task}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with replaced(path) as tmp:
            tmp.write_text(json.dumps(cases, indent=1))
    except OSError:
        return None
    return case
