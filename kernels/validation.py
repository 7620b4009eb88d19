"""Checks a task's declaration when it registers, so a mistake is named where it was made.

Every message starts with the task and the field (``task fused_add_rmsnorm: field
knobs[1].category: ...``): a typo in a category, a knob that is not a header constant of
the template, a missing reference, or a naive kernel its own constraint rejects fails at
import with that message, not twenty minutes into an optimizer run.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from kernelkb.kernels.regimes import Regimes
from kernelkb.kernels.shared.errors import UserError
from kernelkb.kernels.shared.vocabulary import KNOB_CATEGORIES


class TaskDefinitionError(UserError):
    """A task's declaration is wrong; the message names the task and the field."""

    def __init__(self, task: str, field: str, problem: str):
        self.task, self.field, self.problem = task, field, problem
        super().__init__(f"task {task}: field {field}: {problem}")


class _Missing:
    """Default of a required Task field: lets a missing one be named, not a TypeError."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()

# what must be given (Task has defaults for the rest)
REQUIRED = ("name", "op_type", "description", "signature", "reference", "make_inputs",
            "shape_names", "sweep_shapes", "edge_shapes", "cpu_shapes", "dtypes",
            "tolerances", "bytes_moved", "flops", "template", "knobs")
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")  # task and op names: CLI args, record ids
PARAM_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")  # a header constant the template engine reads
FUNCTIONS = ("reference", "make_inputs", "bytes_moved", "flops", "constraint", "smem_bytes",
             "objective_weight")
OPTIONAL_FUNCTIONS = ("launch", "peers")


def closest(word: str, known: Iterable[str]) -> str:
    """'; did you mean X?' for the nearest known word, or nothing."""
    match = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else ""


def validate(task: Any, dtypes: Iterable[str], header_constants: Callable[[str], dict]) -> None:
    """Raise TaskDefinitionError for the first thing wrong with ``task``'s declaration."""
    name = task.name if isinstance(task.name, str) and task.name else "<unnamed>"

    def fail(field: str, problem: str) -> NoReturn:
        raise TaskDefinitionError(name, field, problem)

    missing = [f for f in REQUIRED if getattr(task, f) is MISSING]
    if missing:
        fail(missing[0], "missing" + (f" (also {', '.join(missing[1:])})" if missing[1:] else ""))
    for field in ("name", "op_type"):
        value = getattr(task, field)
        if not isinstance(value, str) or not NAME.match(value):
            fail(field, f"{value!r} is not a name (letters, digits, _ . -; a letter first)")
    for field in ("description", "signature"):
        if not isinstance(getattr(task, field), str) or not getattr(task, field).strip():
            fail(field, "must be a non-empty string")
    for field in FUNCTIONS:
        if not callable(getattr(task, field)):
            fail(field, f"must be a function, got {type(getattr(task, field)).__name__}")
    for field in OPTIONAL_FUNCTIONS:
        value = getattr(task, field)
        if value is not None and not callable(value):
            fail(field, f"must be a function or None, got {type(value).__name__}")
    _check_shapes(task, fail)
    _check_weights(task, fail)
    for condition in task.input_conditions:
        if not (getattr(condition, "name", None) and callable(getattr(condition, "apply", None))):
            fail("input_conditions", f"{condition!r} is not an InputCondition(name, why, apply)")
    for arg in getattr(task, "scalar_args", ()):
        if not (getattr(arg, "name", None) and callable(getattr(arg, "draw", None))):
            fail("scalar_args", f"{arg!r} is not a ScalarArg(name, default, low, high)")
    _check_regimes(task, fail)
    _check_dtypes(task, set(dtypes), fail)
    _check_template(task, fail)
    _check_params(task, header_constants, fail)
    _check_names(task, fail)
    try:
        reason = task.constraint(task.default_config)
    except Exception as err:  # a user's function: say where it broke
        fail("constraint", f"raised {type(err).__name__}: {err} on the naive configuration "
                           f"{task.default_config}")
    if reason:
        fail("constraint", f"rejects the naive kernel's own configuration "
                           f"{task.default_config}: {reason}")


def _check_regimes(task: Any, fail: Callable[[str, str], None]) -> None:
    """A Regimes declaration (its own rules are checked when it is built) whose dims are
    the task's shape names."""
    if not isinstance(task.regimes, Regimes):
        fail("regimes", f"must be a kernels.regimes.Regimes, got {type(task.regimes).__name__}")
    for dim in task.regimes.dims:
        if dim not in task.shape_names:
            fail("regimes.dims", f"{dim!r} is not a shape name; known: {task.shape_names}"
                                 + closest(dim, task.shape_names))


def _check_shapes(task: Any, fail: Callable[[str, str], None]) -> None:
    names = task.shape_names
    if not isinstance(names, tuple) or not names or not all(isinstance(n, str) for n in names):
        fail("shape_names", f"must be a non-empty tuple of strings, got {names!r}")
    wide = getattr(task, "wide_shape", None)
    listed = {field: getattr(task, field) for field in ("sweep_shapes", "edge_shapes",
                                                         "cpu_shapes")}
    for field, shapes in listed.items():
        if not isinstance(shapes, tuple) or not shapes:
            fail(field, "must be a non-empty tuple of shapes")
    listed["wide_shape"] = (wide,) if wide is not None else ()
    for field, shapes in listed.items():
        for shape in shapes:
            if not isinstance(shape, tuple) or len(shape) != len(names) or not all(
                    isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape):
                fail(field, f"shape {shape!r} is not {len(names)} integers >= 0 {names}")


def _check_dtypes(task: Any, known: set[str], fail: Callable[[str, str], None]) -> None:
    if not isinstance(task.dtypes, tuple) or not task.dtypes:
        fail("dtypes", "must be a non-empty tuple, e.g. ('float16', 'float32')")
    for dtype in task.dtypes:
        if dtype not in known:
            fail("dtypes", f"{dtype!r} is not one of {sorted(known)}{closest(str(dtype), known)}")
    missing = [d for d in task.dtypes if d not in task.tolerances]
    if missing:
        fail("tolerances", f"no tolerance for {missing}")


def _check_template(task: Any, fail: Callable[[str, str], None]) -> None:
    if not isinstance(task.template, str) or not task.template.strip():
        fail("template", "must be the kernel module's source text (read_template(__file__))")
    where = task.template_path or "the template"
    try:
        compile(task.template, where, "exec")
    except SyntaxError as err:
        fail("template", f"{where} is not valid Python (line {err.lineno}: {err.msg})")
    if not re.search(r"^def run\(", task.template, re.MULTILINE):
        fail("template", f"{where} defines no top-level run(...) (the candidate's entry)")


def _check_params(task: Any, header_constants: Callable[[str], dict],
                  fail: Callable[[str, str], NoReturn]) -> None:
    header = header_constants(task.template)
    seen: set[str] = set()
    for field in ("knobs", "variants"):
        params = getattr(task, field)
        if not isinstance(params, tuple):
            fail(field, f"must be a tuple, got {type(params).__name__}")
        for i, param in enumerate(params):
            where = f"{field}[{i}]"
            pname = getattr(param, "name", None)
            if not isinstance(pname, str) or not PARAM_NAME.match(pname):
                fail(f"{where}.name", f"{pname!r} is not a header constant name "
                                      "(UPPER_CASE, a letter first)")
            where = f"{field}[{i}] ({pname})"
            if pname in seen:
                fail(where, "declared twice (a knob and a variant share one header constant?)")
            seen.add(pname)
            if pname not in header:
                fail(where, f"the template has no header line '{pname} = <literal>'"
                            f"{closest(pname, header)}")
            if not isinstance(param.values, tuple) or not param.values:
                fail(f"{where}.values", "must be a non-empty tuple of legal values")
            if header[pname] not in param.values:
                fail(f"{where}.values", f"the template's own value {header[pname]!r} is not "
                                        f"among {param.values}")
            if param.category not in KNOB_CATEGORIES:
                fail(f"{where}.category", f"{param.category!r} is not an edit category; known: "
                     f"{', '.join(KNOB_CATEGORIES)}{closest(str(param.category), KNOB_CATEGORIES)}")
            if field == "variants" and not (isinstance(param.help, str) and param.help.strip()):
                fail(f"{where}.help", "a variant needs a help line (agents and reports show it)")


def _check_names(task: Any, fail: Callable[[str, str], None]) -> None:
    related = task.related_ops
    if not isinstance(related, tuple) or not all(isinstance(op, str) and NAME.match(op)
                                                 for op in related):
        fail("related_ops", f"must be a tuple of op names, got {related!r}"
                            + (" (a 1-tuple needs a comma: ('rmsnorm',))"
                               if isinstance(related, str) else ""))
    mutated = task.mutated_inputs
    if not isinstance(mutated, tuple) or not all(isinstance(i, int) and i >= 0 for i in mutated):
        fail("mutated_inputs", f"must be a tuple of input indices, got {mutated!r}")


def _check_weights(task: Any, fail: Callable[[str, str], None]) -> None:
    """Every sweep shape weighs a positive, finite amount in the round objective."""
    for shape in task.sweep_shapes:
        try:
            weight = float(task.objective_weight(tuple(shape)))
        except Exception as err:  # noqa: BLE001 - any failure of the user's function
            fail("objective_weight", f"raised {type(err).__name__}: {err} on {shape}")
        if not (weight > 0 and weight < float("inf")):
            fail("objective_weight", f"{weight!r} for {shape}: a weight is positive and finite")
