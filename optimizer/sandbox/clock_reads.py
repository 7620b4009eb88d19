"""Kernels that read a clock or the process, refused from their IR before they run.

Why: a Triton kernel can read the GPU's own clocks (``%globaltimer``, ``%clock``,
``%clock64``), the driver's environment registers or the grid's launch number
(``%gridid``) through inline assembly or ``tl.extra.cuda.globaltimer``. The Python
readers of the clock are refused to the candidate (surroundings.py), but a kernel that
reads the time on the device itself is a time bomb no Python rule sees: honest during an
evaluation, wrong after a date, a number of seconds or a number of launches. A kernel
that computes an op has no use for any, so the rule is plain: no compiled kernel of the
process reads them.

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
# Registers"): every one that is not a thread's place in the grid or the block's shared
# memory. The global nanosecond timer, the SM cycle counters, the performance monitor
# counters, the driver's environment registers, the grid's launch number (``%gridid``
# counts launches: a time bomb without a clock, red team 18), the SM a block runs on and
# the graph being executed: none is an input of an op, each tells calls apart.
_REGISTERS = (r"globaltimer(?:_lo|_hi)?|clock(?:64|_hi)?|pm[0-7](?:_64)?|envreg\d+|gridid"
              r"|n?smid|current_graph_exec")
# what a kernel may read through LLVM's register intrinsics: where its thread lies and
# the block's shared memory (PTX spells them with ``_``, LLVM with ``.``:
# ``cluster_ctarank``, ``cluster.ctarank``)
_GEOMETRY = (r"(?:n?tid|n?ctaid|laneid|n?warpid|warpsize|n?clusterid|cluster[._]n?ctaid"
             r"|cluster[._]n?ctarank|is[._]explicit[._]cluster|lanemask[._]\w+"
             r"|(?:total|dynamic|aggr)[._]smem[._]size|reserved[._]smem[._]offset[._]\w+)"
             r"(?:\.[xyz])?")
IR_READ = re.compile(rf"%(?:{_REGISTERS})\b"
                     rf"|\bllvm\.nvvm\.read\.ptx\.sreg\.(?!{_GEOMETRY}\b)[\w.]+")
_IR_LEVELS = ("ttir", "ttgir", "llir", "ptx", "amdgcn")
_TRITON_READERS = {"globaltimer", "clock", "clock64", "smid"}  # in triton.language.extra.*


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
