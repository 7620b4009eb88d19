"""What a wrapper does to the tensors it is given, read from the source: an allow-list.

Why: named_compute.py refuses PyTorch ops by name, but arithmetic needs no name. A branch
no check takes can compute a norm with ``*``, ``/``, ``**`` and Python's ``sum`` over
``x.t()``, or read the values with ``tolist()`` and do the op in Python (red team 10).
A kernel's wrapper does few things to its inputs: it reads their shapes and strides,
takes views, copies, casts and allocates like them, and hands them to a launch. So the
rule follows every value made from ``run()``'s tensor arguments (or from a PyTorch call)
through the module's Python, and refuses anything else done to one: an operator (``x *
w``, ``-x``, ``x > 0``), a method off the list below (``tolist``, ``item``, ``sum``,
``requires_grad_``), a builtin or a ``math``/``operator`` function over it, iterating it,
or indexing by it. Shapes, strides and dtypes read from a tensor are plain numbers and
free. Kernel bodies (``@triton.jit``) are Triton's, not this rule's.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence

from kernelkb.optimizer.sandbox import imports

# methods whose result is a tensor laid out, copied, cast or allocated from the receiver
VIEWS_COPIES_CASTS = frozenset({
    "view", "view_as", "reshape", "reshape_as", "contiguous", "to", "float", "half",
    "bfloat16", "double", "int", "long", "short", "t", "transpose", "permute", "unsqueeze",
    "squeeze", "expand", "expand_as", "flatten", "unflatten", "narrow", "select", "chunk",
    "split", "unbind", "movedim", "swapaxes", "as_strided", "detach", "clone", "copy_",
    "fill_", "zero_", "type_as", "new_empty", "new_zeros", "new_ones", "new_full",
    "new_empty_strided", "cuda", "cpu", "record_stream"})
# methods and attributes that read the layout, not the values: plain numbers, free.
# Not ``storage_offset``: where a view begins in its storage is no wrapper's business
# (the kernel gets the view's own pointer), and a path taken only for views deep in a
# buffer is one no judge can reach for every depth (red team 11's deep-offset softmax)
LAYOUT = frozenset({
    "stride", "size", "dim", "ndimension", "numel", "nelement", "element_size", "data_ptr",
    "is_contiguous", "is_floating_point", "is_complex", "get_device",
    "shape", "dtype", "device", "ndim", "is_cuda", "itemsize", "layout"})
TENSOR_ATTRIBUTES = frozenset({"T", "mT", "data"})  # attributes that are the tensor again
# torch functions whose result is no tensor (a dtype's limits, a device, a check)
_TORCH_NOT_TENSORS = frozenset({"finfo", "iinfo", "is_tensor", "is_floating_point",
                                "result_type", "promote_types", "Size", "device", "dtype",
                                "broadcast_shapes", "get_default_dtype"})
_BUILTINS_OVER_VALUES = frozenset({
    "sum", "max", "min", "abs", "pow", "round", "divmod", "sorted", "any", "all", "float",
    "int", "bool", "complex", "set", "frozenset", "dict", "hash", "bytes", "bytearray"})
# builtins that only walk what they are given: over a literal tuple of tensors (for t in
# (q, k)) they hand out the tensors; over one tensor they hand out its values
_BUILTINS_THAT_ITERATE = frozenset({"list", "tuple", "map", "filter", "iter", "next",
                                    "reversed", "enumerate", "zip"})
_VALUE_FREE_COMPARISONS = (ast.Is, ast.IsNot, ast.In, ast.NotIn)
# builtins a wrapper may hand a tensor to: they read its type or length, never its values
_BUILTINS_ON_TENSORS = frozenset({"isinstance", "len", "type", "id", "print", "repr", "str",
                                  "hasattr", "callable"})


def problems(tree: ast.Module, aliases: dict[str, str], kernels: set[int],
             tensor_args: Sequence[bool] | None = None, constants_ok: bool = False
             ) -> list[str]:
    """One line per thing done to a tensor's values outside the kernels. ``tensor_args``:
    which of ``run()``'s parameters are tensors (None: those without a default).
    ``constants_ok``: the task takes factors callers precompute (``Task.torch_constants``),
    so a tensor PyTorch made from no input (``torch.arange``) may be computed on; one
    made from an input may not."""
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    run = functions.get("run")
    if run is None:
        return []
    tainted: dict[str, set[str]] = {name: set() for name in functions}
    params = [a.arg for a in [*run.args.posonlyargs, *run.args.args]]
    if tensor_args is None:
        defaults = len(run.args.defaults)
        tensor_args = [i < len(params) - defaults for i in range(len(params))]
    tainted["run"] = {p for p, is_tensor in zip(params, tensor_args, strict=False) if is_tensor}
    returns: set[str] = set()  # module functions whose result is a tensor
    containers = _containers(tree) | _local_containers(functions.values())
    flow = _Flow(aliases, functions, tainted, returns, containers, follow_made=not constants_ok)
    for _ in range(8):  # to a fixed point over calls between the module's functions
        before = (sum(map(len, tainted.values())), len(returns))
        for name, fn in functions.items():
            if id(fn) not in kernels:
                flow.propagate(name, fn)
        if before == (sum(map(len, tainted.values())), len(returns)):
            break
    found: list[str] = []
    for name, fn in functions.items():
        if id(fn) not in kernels:
            found += flow.violations(name, fn)
    return found


def kept_returns_in(source: str) -> list[str]:
    """``kept_returns`` over a whole source (one that does not parse breaks nothing here)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    return kept_returns(functions, _containers(tree))


def _local_containers(functions: Iterable[ast.FunctionDef]) -> set[str]:
    """Names a function binds to a list, dict or set (a literal or ``list()``...): a
    tensor put in one is followed out of it (red team 11 laundered x and the weight
    through a fresh dict, A and B through a list)."""
    found: set[str] = set()
    for fn in functions:
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and _is_container(node.value):
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return found


def _is_container(node: ast.AST) -> bool:
    return isinstance(node, (ast.Dict, ast.List, ast.Set, ast.ListComp, ast.DictComp,
                             ast.SetComp)) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id in ("list", "dict", "set", "tuple") and not node.args)


def _containers(tree: ast.Module) -> set[str]:
    """The module's containers: names bound at its top level to a dict, list or set."""
    return {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
            and isinstance(node.value, (ast.Dict, ast.List, ast.Set))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name)}


# a container's methods that hand out what it holds
_HANDING_OUT = frozenset({"get", "setdefault", "pop", "popitem", "values", "items"})


def kept_returns(functions: dict[str, ast.FunctionDef], containers: set[str]) -> list[str]:
    """What ``run()`` hands its caller must be made in the call: a value read out of one
    of the module's containers (a cache, a pool of buffers), or a view of one, returned by
    run() or by a module function run() returns from, is refused on every path, taken or
    not. Why: a buffer kept and handed out again is overwritten under a caller that still
    holds the last one (red team 9's ring of eight outputs, used only past 50,000 calls,
    which no evaluation makes). Tables a wrapper reads from its caches (RoPE's cos and
    sin) are passed to launches, not returned, and stay free."""
    found: list[str] = []
    seen: set[str] = set()
    todo = ["run"] if "run" in functions else []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        fn = functions[name]
        kept: set[str] = set()
        for _ in range(4):  # assignments in any order, to a fixed point
            for node in ast.walk(fn):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) \
                        and node.value is not None \
                        and _is_kept(node.value, kept, containers):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    kept |= {n.id for t in targets for n in ast.walk(t)
                             if isinstance(n, ast.Name)}
        for node in ast.walk(fn):
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            if _is_kept(node.value, kept, containers):
                found.append(f"line {node.lineno}: returns a tensor kept in the module "
                             f"({name}() hands out what a container holds): every output "
                             "must be allocated in the call that returns it")
            todo += _returned_calls(node.value, functions)
    return found


def _returned_calls(node: ast.AST, functions: dict[str, ast.FunctionDef]) -> list[str]:
    """The module functions whose result (or a view of it) an expression is."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return [node.func.id] if node.func.id in functions else []
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in VIEWS_COPIES_CASTS - _COPIES:
        return _returned_calls(node.func.value, functions)
    if isinstance(node, (ast.Tuple, ast.List)):
        return [n for e in node.elts for n in _returned_calls(e, functions)]
    if isinstance(node, ast.IfExp):
        return _returned_calls(node.body, functions) + _returned_calls(node.orelse, functions)
    if isinstance(node, (ast.Starred, ast.Subscript)):
        return _returned_calls(node.value, functions)
    return []


def _is_kept(node: ast.AST, kept: set[str], containers: set[str]) -> bool:
    """Whether an expression is (a view of) something a module container holds."""
    if isinstance(node, ast.Name):
        return node.id in kept or node.id in containers
    if isinstance(node, ast.Subscript):
        return _is_kept(node.value, kept, containers)
    if isinstance(node, ast.Attribute):
        return node.attr in TENSOR_ATTRIBUTES and _is_kept(node.value, kept, containers)
    if isinstance(node, (ast.Tuple, ast.List)):
        return any(_is_kept(e, kept, containers) for e in node.elts)
    if isinstance(node, ast.Starred):
        return _is_kept(node.value, kept, containers)
    if isinstance(node, ast.IfExp):
        return _is_kept(node.body, kept, containers) or _is_kept(node.orelse, kept, containers)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        receiver = node.func.value
        if isinstance(receiver, ast.Name) and receiver.id in containers:
            return node.func.attr in _HANDING_OUT
        # a view of a kept tensor is the kept tensor; a copy (clone, to another dtype) is new
        return node.func.attr in VIEWS_COPIES_CASTS - _COPIES and _is_kept(receiver, kept,
                                                                             containers)
    return False


# of VIEWS_COPIES_CASTS, the ones that return new memory (``to`` may not: not counted)
_COPIES = frozenset({"clone", "float", "half", "bfloat16", "double", "int", "long", "short",
                     "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided",
                     "type_as", "cuda", "cpu"})


class _Flow:
    def __init__(self, aliases: dict[str, str], functions: dict[str, ast.FunctionDef],
                 tainted: dict[str, set[str]], returns: set[str], containers: set[str],
                 follow_made: bool) -> None:
        self.aliases, self.functions = aliases, functions
        self.tainted, self.returns = tainted, returns
        self.containers = containers  # the module's caches: dicts and lists of tensors
        self.follow_made = follow_made
        self.holding: set[str] = set()  # containers a followed tensor was put in

    def root(self, node: ast.AST) -> str | None:
        while isinstance(node, ast.Attribute):
            node = node.value
        return self.aliases.get(node.id) if isinstance(node, ast.Name) else None

    def full_name(self, node: ast.AST) -> str:
        """A dotted name with its first part resolved through the imports (``T.tolist``
        after ``from torch import Tensor as T``: torch.Tensor.tolist)."""
        head, dot, rest = imports.dotted(node).partition(".")
        return f"{self.aliases.get(head, head)}{dot}{rest}" if head else ""

    def is_tensor(self, scope: str, node: ast.AST | None) -> bool:
        """Whether an expression holds (a view of) a tensor this rule follows."""
        names = self.tainted[scope]
        if node is None:
            return False
        if isinstance(node, ast.Name):  # a tensor, or a container holding one
            return node.id in names or node.id in self.holding
        if isinstance(node, ast.Attribute):
            return node.attr in TENSOR_ATTRIBUTES and self.is_tensor(scope, node.value)
        if isinstance(node, ast.Subscript):
            base = node.value
            if isinstance(base, ast.Name) and base.id in self.containers:
                return base.id in self.holding
            return self.is_tensor(scope, base)
        if isinstance(node, (ast.Tuple, ast.List, ast.Starred)):
            items = node.elts if not isinstance(node, ast.Starred) else [node.value]
            return any(self.is_tensor(scope, e) for e in items)
        if isinstance(node, ast.IfExp):
            return self.is_tensor(scope, node.body) or self.is_tensor(scope, node.orelse)
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            return any(self.is_tensor(scope, c) for c in ast.iter_child_nodes(node))
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and func.value.id in self.containers:
                return func.value.id in self.holding  # cache.get(key), setdefault, pop
            if isinstance(func, ast.Attribute) and self.is_tensor(scope, func.value):
                return func.attr not in LAYOUT
            if isinstance(func, ast.Name) and func.id in self.functions:
                return func.id in self.returns
            root = self.root(func)
            if root and root.split(".")[0] == "torch":
                makes = isinstance(func, ast.Attribute) and func.attr not in _TORCH_NOT_TENSORS \
                    and not (isinstance(func.value, ast.Attribute) and func.value.attr == "cuda")
                return makes and (self.follow_made or any(
                    self.is_tensor(scope, a) for a in [*node.args,
                                                       *(k.value for k in node.keywords)]))
        return False

    def propagate(self, scope: str, fn: ast.FunctionDef) -> None:
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                self._bind(scope, node.targets, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) \
                    and node.value is not None:
                self._bind(scope, [node.target], node.value)
            elif isinstance(node, (ast.For, ast.comprehension)) \
                    and self.is_tensor(scope, node.iter):
                self._bind(scope, [node.target], node.iter)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                self._bind(scope, [node.optional_vars], node.context_expr)
            elif isinstance(node, ast.Return) and self.is_tensor(scope, node.value):
                self.returns.add(scope)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id in self.containers \
                    and any(self.is_tensor(scope, a) for a in
                            [*node.args, *(k.value for k in node.keywords)]):
                self.holding.add(node.func.value.id)  # cache.append(t), d.update(k=t)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in self.functions:
                callee = self.functions[node.func.id]
                params = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args]]
                for param, arg in zip(params, node.args, strict=False):
                    if self.is_tensor(scope, arg):
                        self.tainted[callee.name].add(param)
                for kw in node.keywords:
                    if kw.arg and self.is_tensor(scope, kw.value):
                        self.tainted[callee.name].add(kw.arg)

    def _bind(self, scope: str, targets: list[ast.expr], value: ast.AST) -> None:
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple,
                                                                                ast.List)) \
                    and len(target.elts) == len(value.elts):
                for t, v in zip(target.elts, value.elts, strict=True):
                    self._bind(scope, [t], v)
            elif not self.is_tensor(scope, value):
                continue
            elif isinstance(target, ast.Name):
                if target.id in self.containers:
                    self.holding.add(target.id)
                else:
                    self.tainted[scope].add(target.id)
            elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                if target.value.id in self.containers:
                    self.holding.add(target.value.id)  # cache[key] = tensor
            elif isinstance(target, ast.Starred):
                self._bind(scope, [target.value], value)

    def violations(self, scope: str, fn: ast.FunctionDef) -> list[str]:
        found: list[str] = []
        tensor = lambda n: self.is_tensor(scope, n)  # noqa: E731

        def flag(node: ast.AST, what: str) -> None:
            found.append(f"line {getattr(node, 'lineno', 0)}: {what}")

        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and (tensor(node.left) or tensor(node.right)):
                flag(node, f"computes on a tensor with {_op(node.op)}")
            elif isinstance(node, ast.AugAssign) and (tensor(node.target) or tensor(node.value)):
                flag(node, f"computes on a tensor with {_op(node.op)}=")
            elif isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not) \
                    and tensor(node.operand):
                flag(node, "computes on a tensor with a unary operator")
            elif isinstance(node, ast.Compare) and any(
                    not isinstance(op, _VALUE_FREE_COMPARISONS) for op in node.ops) \
                    and any(tensor(x) for x in [node.left, *node.comparators]):
                flag(node, "compares a tensor's values")
            elif isinstance(node, ast.Subscript) and tensor(node.value) \
                    and not (isinstance(node.value, ast.Name)
                             and node.value.id in self.containers) \
                    and any(tensor(x) for x in ast.walk(node.slice)):  # a cache's key is free
                flag(node, "indexes a tensor by a tensor")
            elif isinstance(node, (ast.For, ast.comprehension)) and tensor(node.iter) \
                    and not isinstance(node.iter, (ast.Tuple, ast.List)):
                flag(node if isinstance(node, ast.For) else node.iter,
                     "iterates over a tensor in Python")
            elif isinstance(node, ast.Call):
                found += self._call(node, tensor)
        return found

    def _call(self, node: ast.Call, tensor) -> list[str]:
        func, line = node.func, f"line {node.lineno}"
        args = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id in self.containers:
            return []  # the cache's own methods
        if isinstance(func, ast.Attribute) and tensor(func.value):
            if func.attr not in VIEWS_COPIES_CASTS | LAYOUT:
                return [f"{line}: calls .{func.attr}() on a tensor (a wrapper only views, "
                        "copies, casts and allocates)"]
            return []
        root = self.root(func)
        if isinstance(func, ast.Attribute) and self.full_name(func.value) in (
                "torch.Tensor", "torch.TensorBase", "torch._C.TensorBase") \
                and func.attr not in VIEWS_COPIES_CASTS | LAYOUT:
            return [f"{line}: calls torch.Tensor.{func.attr}() (a tensor's method, called "
                    "on the class: a wrapper only views, copies, casts and allocates)"]
        walked = [a for a in args if tensor(a) and not isinstance(a, (ast.Tuple, ast.List))]
        if isinstance(func, ast.Name) and func.id not in self.functions and (
                func.id in _BUILTINS_OVER_VALUES and any(tensor(a) for a in args)
                or func.id in _BUILTINS_THAT_ITERATE and walked):
            return [f"{line}: hands a tensor to Python's {func.id}()"]
        if root and root.split(".")[0] in ("math", "operator") and any(tensor(a) for a in args) \
                and not (isinstance(func, ast.Attribute) and func.attr == "getitem"):
            return [f"{line}: hands a tensor to {root.split('.')[0]}.{getattr(func, 'attr', '')}"]
        if root and root.split(".")[0] not in ("torch", "triton") and any(tensor(a) for a in args):
            # fail closed: a tensor goes to the module's own functions, to PyTorch (whose
            # compute the named rule reads), to Triton and its launches, or nowhere
            return [f"{line}: hands a tensor to {self.full_name(func) or root} (a wrapper "
                    "hands its tensors to its own functions, PyTorch and Triton only)"]
        if isinstance(func, ast.Name) and func.id not in self.functions \
                and func.id not in _BUILTINS_ON_TENSORS | _BUILTINS_THAT_ITERATE \
                and func.id not in self.aliases \
                and any(tensor(a) for a in args):
            return [f"{line}: hands a tensor to {func.id}() (a wrapper hands its tensors "
                    "to its own functions, PyTorch and Triton only)"]
        return []


def _op(op: ast.operator) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
            ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>",
            ast.BitOr: "|", ast.BitAnd: "&", ast.BitXor: "^"}.get(type(op), "an operator")
