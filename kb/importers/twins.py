"""The same measurement is one experience, however many files carry it.

A record's id hashes its whole content, and an imported record's content names its file
(source, command, text): a copied or renamed file, a gzipped copy, or a cache closed after
a killed run imported before, made every measurement again (12 measurements became 24
experiences). Here a measurement is known by what was measured and by whom: the GPU,
the task, shape and dtype, the configuration, the tool, its figure (time or failure
label, the repeats' median) and date. Before a file's records are stored, those whose
measurement the store already holds, or an earlier record of the same batch, are
counted as duplicates.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlmodel import Session, col, select

from kernelkb.kb.models import Experience
from kernelkb.kb.record import ExperienceRecord

_CHUNK = 500  # ids per IN (...) of a query
_FIELDS = {"env": {"gpu_name"}, "task": {"op_type", "task_id", "dtype", "shape_set"},
           "edit": {"config", "child_hash"}, "verdict": True,
           "feedback": {"time_ms", "error_message", "timings"},
           "provenance": {"agent", "date"}}


def measurement_key(data: dict[str, Any]) -> str:
    """What was measured and by whom, from a record's JSON form (new or stored alike)."""
    env, task, edit = data["env"], data["task"], data["edit"]
    feedback, provenance = data["feedback"], data["provenance"]
    parts = [env["gpu_name"], task["op_type"], task["task_id"], task["dtype"],
             task["shape_set"], edit["config"], provenance["agent"], provenance.get("date"),
             data["verdict"], feedback.get("time_ms"), feedback.get("error_message"),
             [t.get("median_ms") for t in feedback.get("timings") or []]]
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def stored_twins(session_factory: Callable[[], Session],
                 records: Sequence[ExperienceRecord]) -> set[int]:
    """Positions in ``records`` of measurements already stored, or already earlier in
    ``records``. Asks the store only for rows of the same configurations (child_hash),
    GPU and tool."""
    forms = [r.model_dump(mode="json", include=_FIELDS) for r in records]  # type: ignore[arg-type]
    keys = [measurement_key(f) for f in forms]
    groups: dict[tuple[str, str], set[str]] = {}
    for form in forms:
        groups.setdefault((form["env"]["gpu_name"], form["provenance"]["agent"]),
                          set()).add(form["edit"]["child_hash"])
    stored: set[str] = set()
    with session_factory() as session:
        for (gpu, agent), hashes in groups.items():
            ordered = sorted(hashes)
            for start in range(0, len(ordered), _CHUNK):
                rows = session.exec(select(Experience.record_json).where(
                    col(Experience.child_hash).in_(ordered[start:start + _CHUNK]),
                    Experience.gpu_name == gpu, Experience.agent == agent))
                for row in rows:
                    try:
                        stored.add(measurement_key(json.loads(row)))
                    except (ValueError, KeyError, TypeError):  # a row `doctor` reports
                        continue
    twins, seen = set(), set(stored)
    for position, key in enumerate(keys):
        if key in seen:
            twins.add(position)
        seen.add(key)
    return twins
