"""Kernels that read a clock or the process, refused from their IR before they run.

Why: a Triton kernel can read the GPU's own clocks (``%globaltimer``, ``%clock``,
``%clock64``) or the driver's environment registers through inline assembly or
``tl.extra.cuda.globaltimer``. The Python readers of the clock are refused to the
candidate (surroundings.py), but a kernel that reads the time on the device itself is a
time bomb no Python rule sees: honest during an evaluation, wrong after a date or past a
number of seconds since its first call. A kernel that computes an op has no use for
either, so the rule is plain: no compiled kernel of the process reads them.

How: on a GPU, the text of every level of a compiled kernel's IR (``CompiledKernel.asm``:
TTIR, TTGIR, LLVM IR, PTX) is read before the kernel is loaded (forbidden.py wraps
``CompiledKernel._init_handles``, which every first launch goes through, whoever
compiled it). Under the CPU interpreter no IR exists, so the candidate file's source is
read instead when it defines a kernel: a string naming those registers (an asm
template, wherever it is kept) or a use of ``globaltimer`` / ``clock`` / ``clock64`` from
Triton's ``extra`` modules.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

# special registers a kernel reads the time or the process through (PTX ISA, "Special
# Registers"): the global nanosecond timer, the SM cycle counters, the performance
# monitor counters and the driver's environment registers
_REGISTERS = r"globaltimer(?:_lo|_hi)?|clock(?:64|_hi)?|pm[0-7](?:_64)?|envreg\d+"
IR_READ = re.compile(rf"%(?:{_REGISTERS})\b|\bllvm\.nvvm\.read\.ptx\.sreg\.(?:{_REGISTERS})\b")
_IR_LEVELS = ("ttir", "ttgir", "llir", "ptx", "amdgcn")
_TRITON_READERS = {"globaltimer", "clock", "clock64"}  # names in triton.language.extra.*


def ir_reads(asm: Mapping[str, object]) -> list[str]:
    """'%globaltimer in ptx', ... for each level of ``asm`` (a compiled kernel's IR by
    level) that reads one of the registers."""
    found = []
    for level in _IR_LEVELS:
        text = asm.get(level) if hasattr(asm, "get") else None
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        match = IR_READ.search(text) if isinstance(text, str) else None
        if match:
            found.append(f"{match.group(0)} in its {level.upper()}")
    return found


def source_reads(source: str) -> list[str]:
    """'line N: ...' for each place the source reads a clock register or calls a clock
    reader of Triton's ``extra`` modules (the interpreter's rule: no IR there)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = IR_READ.search(node.value)
            if match:
                found.append(f"line {node.lineno}: {match.group(0)} in a string")
        elif isinstance(node, ast.Attribute) and node.attr in _TRITON_READERS \
                and "extra" in _dotted(node.value):
            found.append(f"line {node.lineno}: {_dotted(node)}")
        elif isinstance(node, ast.ImportFrom) and "extra" in (node.module or ""):
            found += [f"line {node.lineno}: {alias.name} from {node.module}"
                      for alias in node.names if alias.name in _TRITON_READERS]
    return found


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def message(what: list[str], where: str) -> str:
    return (f"a kernel reads the GPU's clock or the process ({', '.join(what[:3])}, {where}):"
            " a kernel that computes an op has no use for the time, and one that reads it "
            "can behave differently after the evaluation (refused from its IR before it "
            "runs)")
