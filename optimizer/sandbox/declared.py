"""What a candidate declares must be what it does: ``run()``'s signature as the task names
it, and the configuration header as what it launches.

**The signature.** A task's scalar arguments (``Task.scalar_args``: RMSNorm's ``eps``)
are passed by position and by the names the task's signature gives them, as users write
both (``run(x, w, 1e-5)``, ``run(x, w, eps=1e-5)``; ``kernels.scalar_args.scalar_arguments``
draws the form). ``signature_problem`` reads ``run()``'s signature once, after the
import: a ``run`` that cannot take the arguments by position, or by their names, is
refused in words, and so is one that takes an argument by position as one parameter and
by the task's name into another (``run(x, w, epsilon=1e-6, **_)``: ``eps=`` lands in
``**_`` and is ignored, while the positional value reaches ``epsilon``). A forwarding
``run(*args, **kwargs)`` is left to the calls, which meet both forms.

**The configuration.** The store files a candidate's verdict and timings under its header
(``NAME = literal`` lines: ``kernels.config.header_constants``), and ``insights``,
``query``, the ranker and ``bootstrap`` learn from it. A header that is not what the
wrapper launches (the wrapper hard-codes ``num_warps=4`` under ``NUM_WARPS = 16``, or
never reads ``BLOCK_SIZE``) files a timing under a configuration that never ran. Two
rules, both cheap, whose finding (``config_mismatch``) is said after the checks and only
when none of them failed, the least specific verdict: a plant whose header is idle and
whose answer comes from PyTorch is ``torch_compute``:

- ``unread_constants`` (before the import, from the syntax tree): every header constant
  that names a parameter of the task's space must be read somewhere in the module besides
  its own assignment. A constant the code never reads configures nothing;
- ``launch_problem`` (after a checked call, from the launches the tracker recorded): the
  header's ``NUM_WARPS`` must be the ``num_warps`` of at least one of the candidate's own
  launches (Triton's default, 4, where a launch passes none), and its ``NUM_STAGES`` the
  ``num_stages`` of one that passes it (the default differs by backend, so a launch that
  passes none says nothing).

Why reject, not correct the stored configuration from the launches: a launch's values
are not the header's in general (``BLOCK_SIZE = 0`` means "the whole row", launched as
``BLOCK=next_power_of_2(cols)``, which differs per shape; ``ROWS_PER_PROGRAM`` and
``ONLINE`` have no launch argument of that name), so a corrected record would be a guess
of the evaluator's, and its configuration would no longer render the source that was
timed (``Task.render``): the record would pair a source with a configuration of neither.
A rejection names the mismatch, costs an honest agent one edit (use the constant), and
keeps every stored configuration one the candidate wrote and ran. What this does not
see: a constant read and then not used for what its name says (``_ = BLOCK_SIZE``), or a
block constexpr launched under another name than the header's: the header's meaning per
knob is the task's, and no general rule maps it to launch arguments.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kernelkb.kernels.config import header_constants

TRITON_DEFAULT_WARPS = 4
# header knob -> the launch keyword it sets, and the value a launch that passes none gets
# (None: backend-dependent, so a launch without it says nothing)
LAUNCH_KNOBS: dict[str, tuple[str, int | None]] = {
    "NUM_WARPS": ("num_warps", TRITON_DEFAULT_WARPS),
    "NUM_STAGES": ("num_stages", None),
}


def signature_problem(run: Callable[..., Any], tensors: int, names: Sequence[str],
                      signature: str = "") -> str | None:
    """Why ``run`` cannot take the task's scalar arguments ``names`` after ``tensors``
    tensor inputs both by position and by name, to the same parameters (None: it can, or
    its signature cannot be read)."""
    if not names:
        return None
    try:
        sig = inspect.signature(run)
    except (TypeError, ValueError):
        return None
    placeholders = [object()] * tensors
    values = [object() for _ in names]
    shown = f"run{sig}"
    task = f" (the task's: {signature})" if signature else ""
    try:
        by_position = sig.bind(*placeholders, *values)
    except TypeError as err:
        return (f"{shown} cannot take {', '.join(names)} by position after the "
                f"{tensors} tensor input(s): {err}{task}")
    try:
        by_name = sig.bind(*placeholders, **dict(zip(names, values, strict=True)))
    except TypeError as err:
        return (f"{shown} cannot take {', '.join(names)} by name, as the task's signature "
                f"names them: {err}{task}")
    params = sig.parameters
    for name, value in zip(names, values, strict=True):
        positional = _bound_to(by_position.arguments, value)
        named = _bound_to(by_name.arguments, value)
        if positional is None or named is None or positional == named:
            continue
        gathered = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        one, other = params[positional].kind in gathered, params[named].kind in gathered
        if one and other:
            continue  # a forwarding run(*args, **kwargs): the calls decide
        if one or other:
            return (f"{shown} takes {name} by position {_as(positional, one, '*')} but "
                    f"by its name {_as(named, other, '**')}: one of the two is lost. Take "
                    f"it as one parameter named {name}, as the task's signature does{task}")
    return None


def _as(param: str, gathered: bool, stars: str) -> str:
    return f"into '{stars}{param}'" if gathered else f"as '{param}'"


def _bound_to(arguments: dict[str, Any], value: object) -> str | None:
    """The parameter a placeholder ``value`` was bound to (inside *args / **kwargs too)."""
    for param, bound in arguments.items():
        if bound is value:
            return param
        if isinstance(bound, tuple) and any(v is value for v in bound):
            return param
        if isinstance(bound, dict) and any(v is value for v in bound.values()):
            return param
    return None


def unread_constants(source: str, knobs: Iterable[str]) -> list[str]:
    """The header constants that name a parameter of the task's space (``knobs``) and
    that no code of the module reads (its own assignment aside)."""
    space = set(knobs)
    declared = [name for name in header_constants(source) if name in space]
    if not declared:
        return []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the import names it
    read = {node.id for node in ast.walk(tree)
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store)}
    read |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    return [name for name in declared if name not in read]


def unread_message(names: Sequence[str]) -> str:
    return (f"the configuration header declares {', '.join(names)}, which no code of the "
            "module reads: the stored configuration would not be the one that ran. Use "
            "each constant where it configures the launch, or drop it from the header")


def launch_problem(header: dict[str, Any], launches: Iterable[tuple[Any, ...]]
                   ) -> str | None:
    """Why the header's launch knobs are not what the candidate's own launches passed
    (``launches``: each launch's signature as the tracker records it, its keyword
    arguments last); None where they agree or nothing was launched."""
    kwargs = [dict(sig[2]) for sig in launches if len(sig) >= 3]
    if not kwargs:
        return None
    for knob, (keyword, default) in LAUNCH_KNOBS.items():
        value = header.get(knob)
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        passed: set[int] = {v for k in kwargs
                             if isinstance(v := k.get(keyword, default), int)}
        if passed and value not in passed:
            return (f"the header says {knob} = {value}, but the candidate's launches passed "
                    f"{keyword}={', '.join(str(v) for v in sorted(passed))}: the stored "
                    "configuration would not be the one that ran. Launch with the header's "
                    "constant")
    return None
