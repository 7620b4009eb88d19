"""A task of kernels/ as the learned ranker's candidate space (retrieval.prediction.Space).

Retrieval may not import kernels, so whoever knows the task builds this: the optimizer for
its run, the entry modules (CLI, HTTP) from the registry by op type. Candidates are the
task's whole legal space; launches and bytes / FLOPs come from ``Task.launch``,
``bytes_moved`` and ``flops``, for the candidates and for the stored records of the task
the ranker learns from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.base import Shape, Task
from kernelkb.kernels.discovery import all_tasks
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.retrieval.launch import record_launch
from kernelkb.retrieval.prediction import Space


def parse_label(task: Task, label: str) -> Shape:
    """'rows=1,cols=32000' -> (1, 32000), in the task's shape order; ValueError if the
    label is not one of the task's shapes (a shape set name, another task's shape)."""
    try:
        values = dict(part.split("=", 1) for part in label.split(","))
        return tuple(int(values[name]) for name in task.shape_names)
    except (KeyError, ValueError) as err:
        raise ValueError(f"not a {task.name} shape: {label!r}") from err


def task_space(task: Task, dtype: str = "float16") -> Space:
    names = {p.name for p in task.params}

    def launch(config: Mapping[str, Any], label: str, dtype_name: str) -> Any:
        assert task.launch is not None  # Task.__post_init__ always sets one
        try:
            return task.launch({k: v for k, v in config.items() if k in names},
                               parse_label(task, label), dtype_name)
        except (KeyError, ValueError, TypeError, ZeroDivisionError):
            return None

    def cost(label: str, dtype_name: str) -> tuple[float | None, float | None]:
        try:
            shape = parse_label(task, label)
        except ValueError:
            return None, None
        torch_dtype = DTYPES.get(dtype_name, DTYPES["float16"])
        return float(task.bytes_moved(shape, torch_dtype)), float(task.flops(shape, torch_dtype))

    def config_of_record(config: Mapping[str, Any]) -> Mapping[str, Any]:
        # a record measured before a variant existed ran its first value (Task.complete)
        return task.complete(config) or config

    def launch_of_record(record: ExperienceRecord, label: str) -> Any:
        if record.task.task_id != task.name:  # imported data of the same op name
            return record_launch(record, label)
        return launch(record.edit.config, label, record.task.dtype)

    return Space(
        op_type=task.op_type, task_id=task.name, configs=list(task.space()),
        launch_of_config=lambda config, label: launch(config, label, dtype),
        launch_of_record=launch_of_record,
        cost_of_shape=lambda label: cost(label, dtype),
        cost_of_record=lambda record, label: cost(label, record.task.dtype),
        config_of_record=config_of_record)


def space_for_op(op_type: str, dtype: str = "float16") -> Space | None:
    """The space of the first registered task of ``op_type``; None for an op no task
    implements (imported data): the store's configurations stand in for it then."""
    for task in all_tasks().values():
        if task.op_type == op_type:
            return task_space(task, dtype)
    return None
