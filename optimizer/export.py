"""Export the best kernel as a Python module usable from PyTorch.

The module is the candidate's own source (it defines ``run``) plus, where the signature
allows, a ``torch.library.custom_op`` wrapper ``torch.ops.kernelkb.<task>`` with a fake
(meta) implementation, so it composes with torch.compile. The signature is read from the
task itself: the input maker's argument types and the reference's output.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import torch

from kernels.base import DTYPES, Task, load_candidate

_SCALARS = {int: "int", float: "float", bool: "bool"}


def op_signature(task: Task, source: str, dtype: str) -> tuple[list[tuple[str, str]], str,
                                                                 int | None] | None:
    """([(param, annotation)], return annotation, input index for the fake) or None."""
    params = list(inspect.signature(load_candidate(source, "export_probe").run).parameters)
    inputs = task.make_inputs(task.cpu_shapes[0], DTYPES[dtype], 0, "cpu")
    if len(inputs) != len(params):
        return None
    annotated = []
    for name, value in zip(params, inputs, strict=True):
        if isinstance(value, torch.Tensor):
            annotated.append((name, "torch.Tensor"))
        elif type(value) in _SCALARS:
            annotated.append((name, _SCALARS[type(value)]))
        else:
            return None
    output = task.reference(*inputs)
    if isinstance(output, torch.Tensor):
        same = next((i for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)
                     and v.shape == output.shape and v.dtype == output.dtype), None)
        return annotated, "torch.Tensor", same
    if isinstance(output, tuple) and output and all(isinstance(o, torch.Tensor) for o in output):
        return annotated, f"tuple[{', '.join(['torch.Tensor'] * len(output))}]", None
    return None


def export_module(task: Task, source: str, path: Path, *, dtype: str = "float16",
                  note: str = "") -> Path:
    """Write the module; returns its path. The wrapper is skipped when types do not fit."""
    signature = op_signature(task, source, dtype)
    how = f"run(...), or torch.ops.kernelkb.{task.name}(...)" if signature else "run(...)"
    title = f"Best {task.name} kernel found by kernelkb optimize. {note}".rstrip()
    header = f'"""{title}\n\nCall {how} from PyTorch.\n"""\n'
    parts = [header, source.rstrip(), ""]
    if signature:
        parts.append(_wrapper(task.name, *signature))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n")
    return path


def _wrapper(name: str, params: list[tuple[str, str]], returns: str,
             fake_from: int | None) -> str:
    args = ", ".join(p for p, _ in params)
    typed = ", ".join(f"{p}: {a}" for p, a in params)
    lines = [
        "",
        "# -- PyTorch custom op (generated) --------------------------------------------",
        f'@torch.library.custom_op("kernelkb::{name}", mutates_args=())',
        f"def {name}_op({typed}) -> {returns}:",
        f"    return run({args})",
    ]
    if fake_from is not None:
        lines += [
            "",
            "",
            f"@{name}_op.register_fake",
            f"def _{name}_fake({args}):",
            f"    return torch.empty_like({params[fake_from][0]})",
        ]
    return "\n".join(lines)
