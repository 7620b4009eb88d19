"""Export the best kernel as a Python module usable from PyTorch.

The module carries the candidate's source (its kernels and ``run``), the launch-plan
runtime (kernels/launch_hooks.py, plan_record.py and plan_bind.py, verbatim: torch +
triton only) and, with a dispatch table (optimizer/dispatch.py), the dispatch runtime
(kernels/dispatch_runtime.py) and the table, both as a ``<module>.dispatch.json`` file
beside it (what a user replaces with a merged table) and embedded (used when the file is
missing).

What a call runs is the launch plan, not ``run``: the first call of an input layout calls
the configuration's ``run`` once while its Triton launches and buffer allocations are
recorded (from its module as imported: state kept by earlier calls never reaches a plan),
and binds them into a generated launcher (each compiled kernel called directly
with its grid and arguments); later calls of that layout run the launcher after one tuple
and one dictionary lookup (kernels/plan_bind.py). ``launch(...)`` (``dispatch_run`` with a
table) is that path; ``torch.ops.<namespace>.<task>`` registers it through torch.library
(define + impl + a fake that reads the output sizes from the inputs, optimizer/op_fake.py),
so torch.compile and CUDA graphs take the op whole. ``KERNELKB_LAUNCH_PLAN=0`` at import
calls ``run`` per call instead (with its per-shape launch cache).
"""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import Any

import torch

from kernelkb.kernels.base import Task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.plan_bind import PLAN_BEGIN, PLAN_END

_SCALARS = {int: "int", float: "float", bool: "bool"}


def run_parameters(source: str) -> list[inspect.Parameter] | None:
    """``run``'s parameters read from the source's syntax tree, never by importing it: a
    candidate's module code runs only in a jail (the runner's host holds API tokens and
    the store). None when there is no plain top-level ``def run`` with literal defaults."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run"]
    if not defs:
        return None
    args = defs[-1].args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        return None
    defaults: list[Any] = [inspect.Parameter.empty] * (len(args.args) - len(args.defaults))
    for node in args.defaults:
        try:
            defaults.append(ast.literal_eval(node))
        except ValueError:
            return None
    return [inspect.Parameter(a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
            for a, d in zip(args.args, defaults, strict=True)]


def op_signature(task: Task, source: str, dtype: str) -> tuple[list[tuple[Any, ...]], str,
                                                                 int | None] | None:
    """([(param, annotation[, default])], return annotation, input index for the fake) or
    None. The task's inputs fill the first parameters; a parameter after them needs a
    scalar default (rmsnorm's ``eps=1e-6``), which the op's schema keeps."""
    params = run_parameters(source)
    if params is None:
        return None
    inputs = task.make_inputs(task.cpu_shapes[0], DTYPES[dtype], 0, "cpu")
    if len(inputs) > len(params):
        return None
    annotated: list[tuple[Any, ...]] = []
    for param, value in zip(params, inputs, strict=False):
        if isinstance(value, torch.Tensor):
            annotated.append((param.name, "torch.Tensor"))
        elif type(value) in _SCALARS:
            annotated.append((param.name, _SCALARS[type(value)]))
        else:
            return None
    for param in params[len(inputs):]:
        if type(param.default) not in _SCALARS:
            return None
        annotated.append((param.name, _SCALARS[type(param.default)], param.default))
    output = task.reference(*inputs)
    if isinstance(output, torch.Tensor):
        same = next((i for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)
                     and v.shape == output.shape and v.dtype == output.dtype), None)
        return annotated, "torch.Tensor", same
    if isinstance(output, tuple) and output and all(isinstance(o, torch.Tensor) for o in output):
        return annotated, f"tuple[{', '.join(['torch.Tensor'] * len(output))}]", None
    return None


# the lines around the candidate's text (plan_bind.PlanFresh imports it afresh from them)
BEGIN, END = PLAN_BEGIN, PLAN_END


def export_module(task: Task, source: str, path: Path, *, dtype: str = "float16",
                  note: str = "", table: dict[str, Any] | None = None,
                  sources: dict[str, str] | None = None, namespace: str = "kernelkb") -> Path:
    """Write the module; returns its path. The wrapper is skipped when types do not fit.
    ``table``: a dispatch table whose entries are configurations of ``source``'s header
    (or name a hash in ``sources``, the other kernels the module must carry);
    ``namespace``: the op's, ``torch.ops.<namespace>.<task>``."""
    signature = op_signature(task, source, dtype)
    entry = "dispatch_run" if table else "launch"
    how = f"{entry}(...), or torch.ops.{namespace}.{task.name}(...)" if signature else \
        f"{entry}(...)"
    title = f"Best {task.name} kernel found by kernelkb optimize. {note}".rstrip()
    extra = (f"\n\nThe configuration is picked per call by the input shape's regime "
             f"({', '.join(task.regimes.names)}) and this GPU from {path.stem}.dispatch.json "
             "beside this file (or $KERNELKB_DISPATCH_TABLE; else the copy embedded "
             "below).") if table else ""
    header = f'"""{title}\n\nCall {how} from PyTorch.{extra}\n"""\n'
    parts = [header, BEGIN, source.rstrip(), END, ""]
    parts.append(_plan_glue(task.name))
    if table:
        from kernelkb.optimizer.dispatch import write_table

        write_table(table, path.with_name(f"{path.stem}.dispatch.json"))
        parts.append(_dispatch_glue(task, path.stem, table, sources or {}, (dtype,)))
    else:
        parts.append(_single_glue(task.name, (dtype,)))
    if signature:
        from kernelkb.optimizer.op_fake import fake_rule

        parts.append(_wrapper(task.name, *signature, call=entry,
                              mutated=task.mutated_inputs, namespace=namespace,
                              fake=fake_rule(task)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n")
    return path


def _runtime_text(module: Any) -> str:
    """A runtime file of kernels/ without its docstring, __future__ import and imports of
    KernelKB (the module inlines those files before it)."""
    text = Path(module.__file__).read_text()
    body = text.split('"""', 2)[2].replace("from __future__ import annotations\n", "", 1)
    lines, skipping = [], False
    for line in body.splitlines():
        if line.startswith("from kernelkb."):
            skipping = "(" in line and ")" not in line
            continue
        if skipping:
            skipping = not line.startswith(")")
            continue
        lines.append(line)
    return "\n".join(lines).strip()


def _plan_glue(name: str) -> str:
    from kernelkb.kernels import launch_hooks, plan_bind, plan_record

    return "\n".join([
        "",
        "# -- launch plans (kernels/launch_hooks.py, plan_record.py, plan_bind.py of "
        "KernelKB, generated) ---",
        _runtime_text(launch_hooks),
        "",
        "",
        _runtime_text(plan_record),
        "",
        "",
        _runtime_text(plan_bind),
        "",
    ])


def _single_glue(name: str, dtypes: tuple[str, ...]) -> str:
    return "\n".join([
        "",
        "# -- this kernel's launcher (generated) -------------------------------------------",
        f"launcher = PlanLauncher(lambda args: run, {name!r}, checked={dtypes!r}, fresh=True)",
        "# run(...)'s launch plan per input layout: the launches, without run()'s Python",
        "launch = launcher.call",
        "",
    ])


def _dispatch_glue(task: Task, stem: str, table: dict[str, Any],
                   sources: dict[str, str], dtypes: tuple[str, ...]) -> str:
    from kernelkb.kernels import dispatch_runtime

    return "\n".join([
        "",
        "# -- dispatch runtime (kernels/dispatch_runtime.py of KernelKB, generated) ------",
        _runtime_text(dispatch_runtime),
        "",
        "",
        "# -- dispatch of this kernel (generated) -------------------------------------------",
        "import json as _kkb_json",
        "",
        f"_KKB_TABLE = _kkb_json.loads({json.dumps(json.dumps(table))})",
        f"_KKB_SOURCES = _kkb_json.loads({json.dumps(json.dumps(sources))})",
        "",
        "",
        "def _kkb_table():",
        "    here = os.environ.get('KERNELKB_DISPATCH_TABLE') or os.path.join(",
        f"        os.path.dirname(os.path.abspath(__file__)), {stem + '.dispatch.json'!r})",
        "    if os.path.exists(here):",
        "        with open(here) as handle:",
        "            return dispatch_check(_kkb_json.load(handle))",
        "    return _KKB_TABLE",
        "",
        "",
        "def _kkb_body():",
        "    with open(__file__) as handle:",
        "        text = handle.read()",
        f"    return text.split({BEGIN!r} + '\\n', 1)[1].split({END!r}, 1)[0]",
        "",
        "",
        "def _kkb_load(entry):",
        "    config, source = entry['config'], entry.get('source')",
        "    here = globals()",
        "    if source is None and all(type(here.get(k)) is type(v) and here.get(k) == v",
        "                              for k, v in config.items()):",
        "        return run  # this module's own configuration",
        "    text = _KKB_SOURCES[source] if source in _KKB_SOURCES else \\",
        "        dispatch_render(_kkb_body(), config)",
        "    name = 'kkb_' + __name__.replace('.', '_') + '_' + str(len(_KKB_LOADED))",
        "    module = dispatch_load(text, name)",
        "    if _KKB_FAST:",
        "        dispatch_fast_launch_module(vars(module))",
        "    _KKB_LOADED.append(module)",
        "    return module.run",
        "",
        "",
        "_KKB_LOADED = []",
        "# the launch plans replace run()'s per-shape launch cache; KERNELKB_LAUNCH_PLAN=0 at",
        "# import calls run() per call with it (KERNELKB_FAST_LAUNCH=0: Triton's own path)",
        "_KKB_FAST = os.environ.get('KERNELKB_LAUNCH_PLAN') == '0' and \\",
        "    os.environ.get('KERNELKB_FAST_LAUNCH') != '0'",
        "if _KKB_FAST:",
        "    dispatch_fast_launch_module(globals())",
        "dispatcher = Dispatcher(_kkb_table(), _kkb_load)",
        f"launcher = PlanLauncher(dispatcher.pick, {task.name!r}, checked={dtypes!r}, "
        "fresh=True)",
        "",
        "",
        "# the launch plan of run(...) with the configuration of the inputs' regime on this GPU",
        "dispatch_run = launcher.call",
        "",
    ])


_SCHEMA_TYPES = {"torch.Tensor": "Tensor", "int": "int", "float": "float", "bool": "bool"}


def op_schema(name: str, params: list[tuple[Any, ...]], returns: str,
              mutated: tuple[int, ...] = ()) -> str:
    """The operator schema, e.g. ``attention(Tensor q, ..., Tensor(a3!) k_cache, ...) ->
    Tensor``: an input the op writes carries an alias annotation, so that torch.compile
    keeps the write."""
    args = []
    for i, (param, annotation, *default) in enumerate(params):
        kind = _SCHEMA_TYPES[annotation]
        args.append(f"{kind}(a{i}!) {param}" if i in mutated and kind == "Tensor"
                    else f"{kind} {param}" + (f"={default[0]!r}" if default else ""))
    outputs = returns.count("torch.Tensor")
    result = "Tensor" if returns == "torch.Tensor" else f"({', '.join(['Tensor'] * outputs)})"
    return f"{name}({', '.join(args)}) -> {result}"


def _wrapper(name: str, params: list[tuple[Any, ...]], returns: str,
             fake_from: int | None, call: str = "run", mutated: tuple[int, ...] = (),
             namespace: str = "kernelkb", fake: Any = None) -> str:
    """``torch.ops.<namespace>.<name>``, registered through torch.library.Library (define +
    impl) rather than ``@torch.library.custom_op``: the same op (schema, fake, works under
    torch.compile) for ~5 us of host time a call instead of ~35 us of custom_op's Python
    layers. A later import of a kernel of the same op replaces the implementation, as a
    second custom_op of one name would."""
    args = ", ".join(p[0] for p in params)
    lines = [
        "",
        "# -- PyTorch op (generated) ---------------------------------------------------",
        "import warnings as _kkb_warnings",
        "",
        f'_kkb_lib = torch.library.Library("{namespace}", "FRAGMENT")',
        f'if not hasattr(torch.ops.{namespace}, "{name}"):',
        f"    _kkb_lib.define({op_schema(name, params, returns, mutated)!r})",
    ]
    made = None
    if fake is not None:
        from kernelkb.optimizer.op_fake import fake_source

        made = fake_source(fake, [p[0] for p in params])
    elif fake_from is not None:
        made = f"torch.empty_like({params[fake_from][0]})"
    if made is not None:
        lines += [
            "",
            f'    @torch.library.register_fake("{namespace}::{name}", lib=_kkb_lib)',
            f"    def _{name}_fake({args}):",
            f"        return {made}",
        ]
    lines += [
        "with _kkb_warnings.catch_warnings():",
        "    _kkb_warnings.simplefilter('ignore')  # 'overriding a previously registered kernel'",
        f'    _kkb_lib.impl("{name}", {call}, "CompositeExplicitAutograd")',
        f"{name}_op = torch.ops.{namespace}.{name}.default",
    ]
    return "\n".join(lines)
