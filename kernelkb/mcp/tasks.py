"""The task catalogue an agent reads before it writes a kernel: signature, reference
source, starting kernel, shapes, tolerances and knobs of each registered task."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelkb.kernels.base import Task


def _source_of(fn: Any) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):  # a lambda built at run time, a C function
        return f"# source not available for {getattr(fn, '__name__', fn)!r}"


def task_entry(task: Task, *, with_kernel: bool = False) -> dict[str, Any]:
    """One task as plain data; ``with_kernel`` adds the starting kernel's source."""
    entry: dict[str, Any] = {
        "name": task.name,
        "op_type": task.op_type,
        "description": task.description,
        "signature": task.signature,
        "reference_source": _source_of(task.reference),
        "shape_names": list(task.shape_names),
        "shapes": {"sweep": [list(s) for s in task.sweep_shapes],
                   "edge": [list(s) for s in task.edge_shapes],
                   "cpu": [list(s) for s in task.cpu_shapes]},
        "dtypes": list(task.dtypes),
        "tolerances": {d: {"atol": t.atol, "rtol": t.rtol, "max_bias": t.max_bias}
                       for d, t in task.tolerances.items()},
        "knobs": [{"name": k.name, "values": list(k.values), "category": k.category,
                   "help": k.help} for k in task.knobs],
        "variants": [{"name": v.name, "values": list(v.values), "category": v.category,
                      "help": v.help} for v in task.variants],
        "related_ops": list(task.related_ops),
        "uri": f"kernelkb://tasks/{task.name}",
    }
    if with_kernel:
        entry["starting_kernel"] = task.template
    return entry


def catalogue() -> list[dict[str, Any]]:
    """Every registered task, by name."""
    from kernelkb.kernels.discovery import all_tasks  # torch: on first read

    return [task_entry(task) for _, task in sorted(all_tasks().items())]
