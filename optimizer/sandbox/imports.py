"""What a candidate's source may name, read before any of it runs: an allow-list.

Why: the rules behind this one are detectors, each of one route (a clock, a file read, a
thread, a way out of the dispatch mode), and a third round of held-out cheats went
through routes none of them names: numpy's own clock and file readers, ``getattr`` on a
name split in two, an ATen op installed as a kernel's pre-run hook, a Python helper
wrapped as a constexpr and run by the interpreter. A Triton kernel's wrapper needs
Triton, torch and a little arithmetic, so the rule is what it may use, not what it may
not:

* imports of ``triton``, ``triton.language`` (and its submodules), ``torch``,
  ``torch.nn`` (``.functional``), ``torch.cuda``, and the standard library's ``math``,
  ``functools``, ``itertools``, ``operator``, ``typing``, ``dataclasses`` and
  ``__future__``; nothing else (numpy, os, sys, time, ctypes, ...);
* no attribute chain from those modules that reaches another module
  (``torch.sys``, ``triton.runtime``, ``torch.utils._python_dispatch``);
* none of the builtins that reach past the source (``getattr``, ``setattr``,
  ``delattr``, ``__import__``, ``eval``, ``exec``, ``compile``, ``open``, ``globals``,
  ``locals``, ``vars``, ``breakpoint``, ``input``), no dunder attribute
  (``x.__class__``, ``f.__globals__``);
* no private attribute (``x._name``) of an object the candidate did not make (only
  ``self`` in a method of its own class), no private name imported: a library's
  internals are where text is made code (``ForwardRef._evaluate``);
* no string handed to a typing object (``List["..."]``, ``TypeVar(bound="...")``) and
  none of typing's machinery that makes or hands back a forward reference
  (``get_args``, ``ForwardRef``, ``get_type_hints``);
* no builtin or another module's function stored as an attribute of an object (an
  ``nn.Module``'s ``forward``): the library would call it from its own frame;
* no reader of the random generators' seeds or state (``initial_seed``,
  ``get_rng_state``): how the caller seeded, not what it computes; no torch setter
  (``torch.set_*``, ``torch.cuda.set_*``: autocast left on, a current device) and no star
  import, which names what it brings in nowhere in the source;
* no attribute set or deleted on an object the candidate did not make (a module, a
  library's class, a caller's tensor, whatever a local name holds): state kept there
  outlives the module and each fresh import of it (kernels/plan_bind.PlanFresh); nor a
  read of what Triton caches on a kernel (``device_caches``, an autotuner's ``cache``),
  which those imports share;
* no ``data_ptr()`` but in ``x.data_ptr() % 16`` (or a divisor of 16), no ``id``,
  ``hash``, ``untyped_storage`` or ``storage``: a plan is keyed on the inputs' layout and
  16-byte alignment alone, so any other fact of where memory sits is frozen into it;
* no Python run inside a launch: no pre-run hook (``add_pre_run_hook``,
  ``pre_run_hooks``, a config's ``pre_hook`` / ``post_hook``), and no function of the
  module passed to ``tl.constexpr`` (the interpreter would run it as kernel code; a GPU
  could not compile it).

The evaluator's request flag ``refuse_imports`` turns it off only for tests of the
layers behind it, each of which must still hold alone.
"""

from __future__ import annotations

import ast
import builtins
import importlib
from types import ModuleType

ALLOWED = frozenset({"__future__", "math", "functools", "itertools", "operator", "typing",
                     "dataclasses", "triton", "triton.language", "torch",
                     "torch.nn", "torch.nn.functional", "torch.cuda"})
ALLOWED_PREFIXES = ("triton.language.",)
REFUSED_NAMES = frozenset({"getattr", "setattr", "delattr", "__import__", "eval", "exec",
                           "compile", "open", "globals", "locals", "vars", "breakpoint",
                           "input", "__builtins__", "__loader__", "__spec__", "format",
                           "hasattr", "dir", "type", "super", "object", "memoryview",
                           # where an object sits in the process: a fact no plan key holds
                           "id", "hash"})
# names a wrapper never needs, by why: read from attributes, keywords and imported names
REFUSED_ATTRIBUTES = {
    **dict.fromkeys(("add_pre_run_hook", "pre_run_hooks", "pre_hook", "post_hook",
                     "launch_enter_hook", "launch_exit_hook"), "runs Python in a launch"),
    **dict.fromkeys(("format", "format_map", "attrgetter", "methodcaller"),
                    "reads attributes or code by name"),
    # typing's forward references: a string made code, and what hands one back
    **dict.fromkeys(("get_type_hints", "ForwardRef", "get_args", "get_origin",
                     "evaluate_forward_ref", "TypeAliasType"),
                    "reaches typing's evaluation of strings as code"),
    "tofile": "reads or writes files or host memory",
    # Python over a tensor's memory, element by element, with no ATen op for the dispatch
    # mode to see (red team 9 computed a whole RMSNorm so)
    **dict.fromkeys(("apply_", "map_", "map2_"), "runs Python over a tensor's memory"),
    # what Triton caches on a kernel (compiled binaries, an autotuner's timings and choices)
    # is shared by every fresh import of the module (kernels/plan_bind.PlanFresh): read,
    # it would count the layouts met across them (``.cache`` below, where not functools')
    **dict.fromkeys(("device_caches", "kernel_cache", "configs_timings", "best_config"),
                    "reads Triton's caches, shared by every import of the module"),
    # the memory behind a view (where it begins, how far it runs): not the view's layout,
    # which is all a launch plan is keyed on
    **dict.fromkeys(("untyped_storage", "storage"), "reads the storage behind a view"),
}
# names refused on torch (torch.X, torch.cuda.X, a tensor method is no module chain): tl.load
# and a tensor's own methods stay free
TORCH_REFUSED = {
    **dict.fromkeys(("from_file", "load", "save", "from_numpy", "frombuffer"),
                    "reads or writes files or host memory"),
    **dict.fromkeys(("manual_seed", "seed", "set_rng_state", "set_float32_matmul_precision",
                     "set_default_dtype", "set_default_device", "use_deterministic_algorithms",
                     "set_printoptions", "set_grad_enabled", "set_flush_denormal"),
                    "changes the caller's global state"),
    **dict.fromkeys(("is_grad_enabled", "is_inference_mode_enabled", "is_autocast_enabled",
                     "is_autocast_cpu_enabled", "get_autocast_dtype", "get_autocast_gpu_dtype",
                     "get_default_dtype", "get_float32_matmul_precision",
                     "are_deterministic_algorithms_enabled"),
                    "reads how it is called, not what"),
    # the random generators' state and seeds: how the caller seeded, not what is computed
    **dict.fromkeys(("get_rng_state", "get_rng_state_all", "initial_seed",
                     "default_generator", "default_generators", "seed_all",
                     "manual_seed_all", "set_rng_state_all", "fork_rng", "get_state",
                     "set_state", "graphsafe_get_state", "graphsafe_set_state"),
                    "reads or changes the random generators' state"),
}
CONSTEXPR = frozenset({"tl.constexpr", "triton.language.constexpr", "constexpr"})


def allowed(module: str) -> bool:
    return module in ALLOWED or module.startswith(ALLOWED_PREFIXES)


def problems(source: str) -> list[str]:
    """What the source names that a wrapper may not, one line each (empty: none). A
    source that does not parse is the syntax check's to report, not this one's."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    aliases: dict[str, str] = {}  # local name -> module it names
    functions = {n.name for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                 and not isinstance(n, ast.Lambda)}
    own = _own_instances(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not allowed(alias.name):
                    found.append(f"line {line}: imports {alias.name}")
                aliases[alias.asname or alias.name.split(".")[0]] = \
                    alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level or not allowed(module):
                found.append(f"line {line}: imports from {'.' * node.level}{module}")
                continue
            for alias in node.names:
                if alias.name == "*":
                    found.append(f"line {line}: a star import (it names what it brings in "
                                 "nowhere in the source)")
                if alias.name.startswith("_") and module != "__future__":
                    found.append(f"line {line}: imports the private name {alias.name}")
                why = REFUSED_ATTRIBUTES.get(alias.name) or (
                    TORCH_REFUSED.get(alias.name) if module.startswith("torch") else None)
                if why or alias.name in REFUSED_NAMES:
                    found.append(f"line {line}: imports {alias.name} ({why or 'reaches past'})")
                target = f"{module}.{alias.name}"
                if _is_module(target) and not allowed(target):
                    found.append(f"line {line}: imports the module {target}")
        elif isinstance(node, ast.Name) and node.id in REFUSED_NAMES:
            found.append(f"line {line}: uses {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr.endswith("__"):
                found.append(f"line {line}: reads the attribute {node.attr}")
            elif node.attr.startswith("_") and id(node.value) not in own:
                found.append(f"line {line}: reads the private attribute {node.attr} of an "
                             "object it did not make (a library's internals)")
            elif node.attr in REFUSED_ATTRIBUTES:
                found.append(f"line {line}: {REFUSED_ATTRIBUTES[node.attr]} ({node.attr})")
            elif node.attr == "cache" and dotted(node.value) != "functools":
                found.append(f"line {line}: reads Triton's caches, shared by every import of "
                             "the module (cache)")
        elif isinstance(node, ast.keyword) and node.arg in REFUSED_ATTRIBUTES:
            found.append(f"line {line}: {REFUSED_ATTRIBUTES[node.arg]} ({node.arg}=)")
        elif isinstance(node, ast.Match):
            found.append(f"line {line}: a match statement (its patterns read attributes "
                         "by name)")
        elif isinstance(node, ast.keyword) and node.arg and node.arg.startswith("__"):
            found.append(f"line {line}: a dunder keyword ({node.arg}=)")
        elif isinstance(node, ast.Call) and dotted(node.func) in CONSTEXPR and any(
                isinstance(a, (ast.Lambda,)) or (isinstance(a, ast.Name) and a.id in functions)
                for a in node.args):
            found.append(f"line {line}: wraps a Python function as a constexpr")
    found += _module_chains(tree, aliases)
    found += _annotations(tree, aliases)
    found += _typing_strings(tree, aliases)
    found += _handed_callables(tree, aliases)
    found += _foreign_stores(tree, own)
    found += _pointer_reads(tree)
    return list(dict.fromkeys(found))


PLAN_ALIGNMENT = 16  # bytes: the alignment class a launch plan's key holds (plan_bind.py)


def _pointer_reads(tree: ast.AST) -> list[str]:
    """``x.data_ptr()`` anywhere but in ``x.data_ptr() % n`` with n dividing 16. Where a
    tensor sits reaches a launch only as its 16-byte alignment, which each layout's plan
    is keyed on; any other fact of an address (its phase past 16 bytes, where another
    input begins) is frozen into the plan of the layout's first call and wrong for the
    next call's buffers (red team 13: a row phase mod 64, q and k read through one
    pointer when they happened to sit back to back)."""
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr == "data_ptr"):
            continue
        call = parents.get(id(node))
        mod = parents.get(id(call)) if isinstance(call, ast.Call) and call.func is node \
            and not call.args and not call.keywords else None
        if isinstance(mod, ast.BinOp) and isinstance(mod.op, ast.Mod) and mod.left is call \
                and isinstance(mod.right, ast.Constant) and type(mod.right.value) is int \
                and 0 < mod.right.value <= PLAN_ALIGNMENT \
                and PLAN_ALIGNMENT % mod.right.value == 0:
            continue
        found.append(f"line {node.lineno}: reads where a tensor sits beyond its 16-byte "
                     "alignment (data_ptr() other than `% 16`): a launch plan is keyed on that "
                     "alignment alone")
    return found


def _foreign_stores(tree: ast.AST, own: set[int]) -> list[str]:
    """An attribute set or deleted on an object the candidate did not make: a module
    (``torch.seen = {}``), a library's class, a caller's tensor (a parameter) or whatever
    a local name holds. State kept there outlives the module: every fresh import of it
    (each recording of a launch plan starts from one, kernels/plan_bind.PlanFresh) and
    every call would share it. Allowed bases: the module's own functions and classes
    (a kernel object, a class attribute), ``self`` in its own class's methods, and a
    module-level name assigned once from a call of its own class."""
    top = tree.body if isinstance(tree, ast.Module) else []
    defined = {n.name for n in top if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.ClassDef))}
    classes = {n.name for n in top if isinstance(n, ast.ClassDef)}
    assigned: dict[str, int] = {}
    for node in ast.walk(tree):
        for target in _targets(node):
            if isinstance(target, ast.Name):
                assigned[target.id] = assigned.get(target.id, 0) + 1
    instances = {t.id for n in top if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                 and isinstance(n.value.func, ast.Name) and n.value.func.id in classes
                 for t in n.targets if isinstance(t, ast.Name) and assigned.get(t.id) == 1}
    params = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    mine = (defined - set(assigned) - params) | (instances - params)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or isinstance(node.ctx, ast.Load):
            continue
        base = node.value
        if id(base) in own or (isinstance(base, ast.Name) and base.id in mine):
            continue
        found.append(f"line {node.lineno}: sets the attribute {node.attr} of "
                     f"{dotted(base) or 'an object'}, which it did not make (state there "
                     "outlives the module and every call)")
    return found


def _targets(node: ast.AST) -> list[ast.AST]:
    """The names a statement binds at its own level (assignments, loops, with, imports)."""
    if isinstance(node, ast.Assign):
        out = [e for t in node.targets for e in _flat(t)]
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
        out = [node.target]
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        out = _flat(node.target)
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        out = _flat(node.optional_vars)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        return [ast.Name(id=(a.asname or a.name).split(".")[0]) for a in node.names]
    else:
        out = []
    return out


def _flat(target: ast.AST) -> list[ast.AST]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [e for t in target.elts for e in _flat(t)]
    if isinstance(target, ast.Starred):
        return _flat(target.value)
    return [target]


def _own_instances(tree: ast.AST) -> set[int]:
    """The ``self`` (first parameter) of each method of the candidate's own classes, where
    the method never rebinds it: the one base a private attribute may be read from. Any
    other ``x._name`` reads a library's internals (``ForwardRef._evaluate``,
    ``torch._C``), which a wrapper has no use for and which are where strings are made
    code."""
    own: set[int] = set()
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = [*method.args.posonlyargs, *method.args.args]
            if not params:
                continue
            name = params[0].arg
            names = [n for n in ast.walk(method) if isinstance(n, ast.Name) and n.id == name]
            if any(not isinstance(n.ctx, ast.Load) for n in names) or any(
                    isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(method)) or any(
                    isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                   ast.ClassDef)) and n is not method
                    for n in ast.walk(method)):
                continue  # rebound, or shadowed in an inner scope: not certainly its own
            own.update(id(n) for n in names)
    return own


def _typing_strings(tree: ast.AST, aliases: dict[str, str]) -> list[str]:
    """A string handed to one of typing's objects (a subscript ``List["..."]``, a
    ``TypeVar(bound="...")``, a ``NamedTuple`` field's type) becomes a forward
    reference: text typing compiles and may evaluate as code. A wrapper's types are
    names, never text; only a call's first argument (a new type's name) may be one."""
    from_typing = {a.asname or a.name for n in ast.walk(tree)
                   if isinstance(n, ast.ImportFrom) and n.module in ("typing",
                                                                     "typing_extensions")
                   for a in n.names}
    typing_aliases = {name for name, module in aliases.items() if module == "typing"}

    def is_typing(node: ast.AST) -> bool:
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return isinstance(node, ast.Name) and (node.id in from_typing
                                               or node.id in typing_aliases)

    def has_text(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Constant) and isinstance(n.value, str)
                   or isinstance(n, ast.JoinedStr) for n in ast.walk(node))

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_typing(node.value) and has_text(node.slice):
            found.append(f"line {node.lineno}: a string subscript of a typing object (a "
                         "forward reference: text made code)")
        elif isinstance(node, ast.Call) and is_typing(node.func) and any(
                has_text(a) for a in [*node.args[1:], *(k.value for k in node.keywords)]):
            found.append(f"line {node.lineno}: a string handed to a typing object (a "
                         "forward reference: text made code)")
    return found


def _handed_callables(tree: ast.AST, aliases: dict[str, str]) -> list[str]:
    """A library's function or a builtin stored as an attribute of an object (an
    ``nn.Module``'s ``forward``, a callback): the library then calls it from its own
    frame, so whatever it reads reads as the library's. A wrapper stores values, and
    its own functions, never another module's callables."""
    imported = {a.asname or a.name: f"{n.module}.{a.name}" for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module for a in n.names}

    def library_callable(node: ast.AST) -> bool:
        text = dotted(node)
        if not text:
            return False
        head, _, rest = text.partition(".")
        if head in aliases:
            path = f"{aliases[head]}.{rest}" if rest else aliases[head]
        elif head in imported:
            path = f"{imported[head]}.{rest}" if rest else imported[head]
        elif hasattr(builtins, head) and not rest:
            return callable(getattr(builtins, head)) and not isinstance(
                getattr(builtins, head), type)
        else:
            return False
        obj = _resolve(path)
        return obj is not None and callable(obj) and not isinstance(obj, (type, ModuleType))

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Attribute) for t in targets) and library_callable(value):
            found.append(f"line {node.lineno}: stores another module's callable as an "
                         "attribute (a library would make its calls)")
    return found


def _resolve(path: str) -> object | None:
    """The object a dotted path of an allowed module names, or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if not allowed(module):
            continue
        try:
            obj: object = importlib.import_module(module)
        except ImportError:
            return None
        for part in parts[cut:]:
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj
    return None


# builtin types an annotation may name; anything else it names must be imported or a
# class of the module
ANNOTATION_BUILTINS = frozenset({"int", "float", "bool", "str", "bytes", "complex",
                                 "tuple", "list", "dict", "set", "frozenset", "slice"})


def _annotations(tree: ast.AST, aliases: dict[str, str]) -> list[str]:
    """Annotations name types; they do not compute. A library may evaluate an annotation
    (functools.singledispatch's register, dataclasses, typing's hints), and one that is
    a string, or a name bound to a string built at run time, is then code run in the
    candidate's globals, past every rule above."""
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                for a in n.names}
    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    known = ANNOTATION_BUILTINS | imported | classes | set(aliases)

    def names_a_type(node: ast.AST | None) -> bool:
        if node is None or (isinstance(node, ast.Constant) and node.value in (None, ...)):
            return True
        if isinstance(node, ast.Name):
            return node.id in known
        if isinstance(node, ast.Attribute):
            return dotted(node).split(".")[0] in aliases
        if isinstance(node, ast.Subscript):
            inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return names_a_type(node.value) and all(names_a_type(e) for e in inner)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return names_a_type(node.left) and names_a_type(node.right)
        return False

    found = []
    for node in ast.walk(tree):
        hints: list[ast.AST | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            hints = [node.returns, *(x.annotation for x in
                                     [*a.posonlyargs, *a.args, *a.kwonlyargs,
                                      *([a.vararg] if a.vararg else []),
                                      *([a.kwarg] if a.kwarg else [])])]
        elif isinstance(node, ast.AnnAssign):
            hints = [node.annotation]
        for hint in hints:
            if not names_a_type(hint):
                found.append(f"line {getattr(hint, 'lineno', 0)}: an annotation that is not "
                             "a type's name (a string, or a name of the module's own)")
    return found


def message(found: list[str]) -> str:
    return ("the candidate's source names what a kernel's wrapper may not (only triton, "
            "torch and math-like standard modules; no getattr, dunder attributes or "
            "Python inside a launch): " + "; ".join(found[:6]) +
            (f" (+{len(found) - 6} more)" if len(found) > 6 else ""))


def _module_chains(tree: ast.AST, aliases: dict[str, str]) -> list[str]:
    """Attribute chains from an imported module that reach another module, or a name
    refused on torch."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        text = dotted(node)
        if not text or text.split(".")[0] not in aliases:
            continue
        head, *rest = text.split(".")
        path = aliases[head]
        if path.split(".")[0] == "torch" and node.attr in TORCH_REFUSED:
            found.append(f"line {node.lineno}: {TORCH_REFUSED[node.attr]} ({text})")
            continue
        if path.split(".")[0] == "torch" and node.attr.startswith("set_"):
            # any setter: autocast left on, a current device, a default: the caller's state
            found.append(f"line {node.lineno}: changes the caller's global state ({text})")
            continue
        for part in rest:
            path = f"{path}.{part}"
            if _is_module(path) and not allowed(path):
                found.append(f"line {node.lineno}: reaches the module {path}")
                break
    return found


def dotted(node: ast.AST) -> str:
    """``a.b.c`` as text; "" when the chain does not start at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def _is_module(path: str) -> bool:
    """Whether ``path`` names a module reachable as attributes from its top package."""
    head, _, rest = path.partition(".")
    if head not in {"torch", "triton"}:  # only allowed roots are walked
        return False
    try:
        obj: object = importlib.import_module(head)
    except ImportError:
        return False
    for part in rest.split(".") if rest else []:
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return isinstance(obj, ModuleType)
