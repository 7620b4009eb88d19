"""PyTorch compute named in a candidate's source outside its Triton kernels, on any path.

Why: the Triton-only rule (provenance.py) is seen at run time, on the calls the judge
makes. A wrapper that takes PyTorch only on an input the judge never draws (a rank less,
a layout, a dtype pair, a row count past its reach) passes every call the judge makes,
and red teams found a new such input each round: a list of unusual inputs is a detector
race. A kernel's wrapper allocates, lays out, copies and casts; it never needs to name
softmax, sum or matmul. So the source may not: a call of a PyTorch op that computes
(``torch.softmax``, ``F.silu``, ``x.pow``, ``x.sum``, ``a @ b``), read before anything
runs, on every path, taken or not. Bodies of ``@triton.jit`` functions are the kernels
and are not read.

Which names compute is read from ATen's own schemas, not listed here: an op whose
schema takes a tensor and returns a fresh one, unless the tracker calls it allocation,
movement or a range (provenance.py's sets, the one copy of that fact); views, casts,
shape queries and allocations stay free. Tasks whose callers precompute factors
(``Task.torch_constants``: RoPE's cos/sin of positions) may name the few ops such tables
need. Arithmetic operators on tensors (``x * w``) are not named ops and stay with the
run-time rule.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence

import torch

from kernelkb.optimizer.sandbox import imports, provenance, tensor_flow

# the ops a table of precomputed factors needs (Task.torch_constants)
CONSTANTS_OPS = frozenset({"cos", "sin", "outer", "exp", "pow", "reciprocal"})
# attributes of a block only the CPU interpreter has (a tl.tensor's .handle is its numpy
# array there, an IR value in a GPU compile)
INTERPRETER_ONLY = frozenset({"handle"})
# names whose ATen op computes but whose wrapper spelling only moves data
_MOVES = frozenset({"pad"})  # F.pad: aten::constant_pad_nd beneath
_FREE = {op.removeprefix("aten::") for op in (provenance.ALLOCATION_OPS | provenance.MOVEMENT_OPS
                                             | provenance.RANGE_OPS | provenance.HOST_MADE_OPS)}
_KERNEL_ROOTS = ("triton",)  # chains into Triton are the module-chain rule's, not this one's


@functools.cache
def computes(name: str) -> bool:
    """Whether ATen's op of this name (or of its in-place form's base) takes a tensor and
    returns a fresh tensor computed from it."""
    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    if {name, base, base + "_"} & (_FREE | _MOVES) or name.startswith("_"):
        return False
    for schema in torch._C._jit_get_schemas_for_operator(f"aten::{base}"):
        takes_tensor = any("Tensor" in str(a.type) for a in schema.arguments)
        fresh = [r for r in schema.returns if "Tensor" in str(r.type) and r.alias_info is None]
        if takes_tensor and fresh:
            return True
    return False


def _is_module_class(path: str) -> bool:
    """``torch.nn.Linear`` and the like: a PyTorch layer computes when called."""
    obj: object = torch
    for part in path.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return isinstance(obj, type) and issubclass(obj, torch.nn.Module) \
        and obj is not torch.nn.Module


def problems(source: str, constants_ok: bool = False,
             tensor_args: Sequence[bool] | None = None) -> list[str]:
    """One line per PyTorch compute the source names outside its kernels, then per thing
    it does to a tensor's values there (tensor_flow.py; ``tensor_args``: which of run()'s
    parameters are tensors). Empty: none. A source that does not parse is the syntax
    check's to report."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    allowed = CONSTANTS_OPS if constants_ok else frozenset()
    aliases = _module_aliases(tree)
    kernels = _kernel_nodes(tree, aliases)
    called = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
    found: list[str] = []

    def flag(node: ast.AST, what: str) -> None:
        found.append(f"line {getattr(node, 'lineno', 0)}: {what}")

    for node in ast.walk(tree):
        if id(node) in kernels and isinstance(node, ast.Attribute) \
                and node.attr in INTERPRETER_ONLY:
            # the interpreter's block is a tl.tensor over a numpy array (.handle.data): a
            # body that reads it runs Python on the CPU and compiles on no GPU (red team 11)
            flag(node, f"reads .{node.attr} of a block in a kernel: the interpreter's "
                       "numpy array, which no GPU compile has")
            continue
        if id(node) in kernels and not (isinstance(node, ast.Attribute) and aliases.get(
                imports.dotted(node).split(".")[0], "").startswith("torch")):
            continue  # a kernel's body is Triton's; PyTorch named there is not (its .fn)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            flag(node, "multiplies matrices with PyTorch (@)")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            for alias in node.names:
                if alias.name not in allowed and computes(alias.name):
                    flag(node, f"imports the PyTorch op {alias.name}")
        elif isinstance(node, ast.Attribute):
            chain = _chain(node)
            root = aliases.get(chain[0]) if chain else None
            if root and root.split(".")[0] == "torch":
                path = ".".join([root, *chain[1:]])
                ops = [p for p in chain[1:] if p not in allowed and computes(p)]
                functional = path.rpartition(".")[0] == "torch.nn.functional" and \
                    node.attr not in _MOVES | allowed and node.attr[:1].islower()
                if ops or functional or _is_module_class(path):
                    flag(node, f"names the PyTorch op {'.'.join(chain)}")
            elif root is None and node.attr not in allowed and computes(node.attr) \
                    and hasattr(torch.Tensor, node.attr) and called.get(id(node)) is not None \
                    and not _list_sort(called[id(node)]):
                flag(node, f"calls the tensor method .{node.attr}()")
    found += tensor_flow.problems(tree, aliases, kernels, tensor_args, constants_ok)
    return list(dict.fromkeys(found))


def message(found: list[str]) -> str:
    return (f"{provenance.RULE}; the source names PyTorch compute outside its Triton "
            "kernels, which the rule refuses on every path, taken or not: "
            + "; ".join(found[:6]) + (f" (+{len(found) - 6} more)" if len(found) > 6 else ""))


def _module_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> the module (or module attribute) it names: ``math.sqrt`` is math's,
    ``F.silu`` torch's."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = \
                    a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _kernel_nodes(tree: ast.AST, aliases: dict[str, str]) -> set[int]:
    """Every node inside a function a Triton decorator compiles (jit, autotune, ...)."""
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in fn.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            chain = _chain(target)
            if chain and aliases.get(chain[0], "").split(".")[0] in _KERNEL_ROOTS:
                inside.update(id(n) for stmt in fn.body for n in ast.walk(stmt))
                break
    return inside


def _chain(node: ast.AST) -> list[str]:
    """``a.b.c`` as [a, b, c]; [] when the chain does not start at a name."""
    text = imports.dotted(node)
    return text.split(".") if text else []


def _list_sort(call: ast.Call) -> bool:
    """``names.sort(key=...)`` / ``(reverse=...)``: a Python list's sort, not a tensor's."""
    return bool(call.keywords) and all(k.arg in ("key", "reverse") for k in call.keywords)
