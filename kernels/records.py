"""A stored experience record seen through its registered task: its regime, the launch
and the cost of its configuration on a shape. What the store and the learned ranker are
given by the layers that may import the tasks (they import none themselves).
"""

from __future__ import annotations

from typing import Any

import torch

from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.shared.launch import Launch


def record_launch(record: Any, shape_label: str) -> Launch | None:
    """``launch_of`` for the learned ranker (retrieval/ranker.py): the Launch of an
    experience record's configuration on one of its shapes, for a registered task (None
    for another task, a shape set name such as "sweep", or a config the task rejects)."""
    try:
        task = get_task(record.task.task_id)
        dtype = record.task.dtype if record.task.dtype in DTYPES else "float16"
        assert task.launch is not None  # Task.__post_init__ always sets one
        return task.launch(dict(record.edit.config), task.parse_shape(shape_label), dtype)
    except (KeyError, ValueError, TypeError):
        return None


def record_regime(record: Any) -> str | None:
    """An experience record's regime: the one it recorded, else derived from the shapes it
    was timed or checked on (its timings, else the labels of its shape set), joined with
    "+" in the task's order when they span several; None for a task not registered here
    or a record that names no parsable shape (imported data, shape sets such as "tune")."""
    if getattr(record.task, "regime", None):
        return record.task.regime
    try:
        task = get_task(record.task.task_id)
    except KeyError:
        return None
    labels = [t.shape for t in record.feedback.timings] or \
        record.task.shape_set.split(":", 1)[-1].split(";")
    found = set()
    for label in labels:
        try:
            found.add(task.regime(task.parse_shape(label)))
        except ValueError:
            continue
    return "+".join(n for n in task.regimes.names if n in found) or None


class RecordRegimes:
    """``record_regime`` for the store (kernelkb.service.RegimeSource): the registered
    tasks and the derivation, given to LocalKnowledge by the entry modules."""

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(all_tasks())

    def of(self, record: Any) -> str | None:
        return record_regime(record)


def record_cost(record: Any, shape_label: str) -> tuple[float | None, float | None]:
    """``cost_of`` for the ranker: (bytes moved, flops) of a record's shape, or Nones."""
    try:
        task = get_task(record.task.task_id)
        shape = task.parse_shape(shape_label)
        dtype = DTYPES.get(record.task.dtype, torch.float16)
        return float(task.bytes_moved(shape, dtype)), float(task.flops(shape, dtype))
    except (KeyError, ValueError):
        return None, None
