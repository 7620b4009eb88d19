"""A rule of compiled Triton that the CPU interpreter does not keep: a ``@triton.jit``
function may read a module-level name only if it is a constexpr, a module, another jit
function, a ``triton.language`` object or a dtype. ``K = 1.59`` read inside a kernel runs
under ``TRITON_INTERPRET=1`` and fails to compile on every GPU (a user task's template
once passed ``tasks --check`` on a CPU and could not start on the H200). The worker checks
the rule on the CPU, so a kernel that cannot compile does not pass there.
"""

from __future__ import annotations

import dis
from types import CodeType, ModuleType
from typing import Any

import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

JIT_TYPES = (JITFunction, InterpretedFunction)  # what @triton.jit makes, compiled or not


def non_constexpr_globals(module: ModuleType) -> list[str]:
    """``"kernel: NAME"`` for each global a jit function of ``module`` reads that
    compiled Triton refuses."""
    problems = []
    for value in vars(module).values():
        fn = getattr(value, "fn", None)
        if isinstance(value, JIT_TYPES) and fn is not None \
                and getattr(fn, "__module__", None) == module.__name__:
            for name in sorted(_loaded_globals(fn.__code__)):
                if not _allowed(name, fn.__globals__):
                    problems.append(f"{fn.__name__}: {name}")
    return problems


def _loaded_globals(code: CodeType) -> set[str]:
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname == "LOAD_GLOBAL"}
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _loaded_globals(const)
    return {n for n in names if isinstance(n, str)}


def _allowed(name: str, scope: dict[str, Any]) -> bool:
    if name not in scope:
        return True  # a builtin (range, min, ...) or undefined: Triton's own error then
    value = scope[name]
    return (isinstance(value, (ModuleType, *JIT_TYPES, tl.constexpr, tl.dtype))
            or getattr(value, "__triton_builtin__", False)
            or (getattr(value, "__module__", None) or "").startswith("triton.language")
            or (isinstance(value, tuple) and hasattr(value, "_fields")))


def message(problems: list[str]) -> str:
    first = problems[0].split(": ", 1)[1]
    return (f"Cannot access global variable(s) from within @jit'ed function(s): "
            f"{'; '.join(problems)}. Compiled Triton reads only constexpr globals (the CPU "
            f"interpreter lets this pass, a GPU refuses it): write `{first} = "
            f"tl.constexpr(...)`, or pass the value as an argument")
