"""The rules read from a candidate's source before any of it runs, as one verdict.

Why: the judge's worker refuses a source on them, and the shipped seeds must hold no
code the judge would refuse: one place says which rules a source meets and what kind of
failure breaking each is.
"""

from __future__ import annotations

from kernelkb.optimizer.sandbox import imports, named_compute


def refused(source: str, torch_constants: bool = False) -> tuple[str, str] | None:
    """(error kind, message) for the first rule the source breaks, or None.
    ``torch_constants``: the task takes precomputed factors (``Task.torch_constants``)."""
    named = imports.problems(source)
    if named:
        return "cheat_tamper", imports.message(named)
    computed = named_compute.problems(source, torch_constants)
    if computed:
        return "torch_compute", named_compute.message(computed)
    return None
