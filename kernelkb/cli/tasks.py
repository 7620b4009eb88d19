"""``kernelkb tasks``: the tasks this install sees, and ``--check TASK``, a new task's checks.

The list says where each task was found (this package, a tasks folder, an entry point).
``--check`` runs what a task must pass before an optimizer run is worth its time: the
declaration registered (validated field by field), every point of the search space
renders with its configuration in the header, and the naive kernel passes the sandbox's
correctness checks on the task's shapes (CPU and edge shapes in the interpreter; edge and
representative sweep shapes on a GPU) in each dtype.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kernelkb.cli.common import Command
from kernelkb.cli.model_flags import add_model_flags, derive, render
from kernelkb.cli.optimize import tasks_dir_flag

HELP = "list the tasks (built in, tasks folders, entry points); --check TASK tests one"
# Shipped tasks keep their grid between these sizes (tests/kernels/test_task_contract.py):
# enough points to cover every knob value, few enough for a full sweep on one GPU.
SPACE_RULE = (30, 90)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shapes", nargs="*", metavar="shapes TASK",
                        help="print TASK's shapes in --model-config's model, per regime "
                             "(read only, no GPU): `kernelkb tasks shapes matmul "
                             "--model-config llama-3-8b`")
    add_model_flags(parser)
    parser.add_argument("--check", metavar="TASK", help="run a task's checks")
    parser.add_argument("--dtype", action="append", default=[],
                        help="--check: dtypes to check (default: all the task's)")
    parser.add_argument("--timeout-s", type=float, default=300.0,
                        help="--check: time limit of one sandboxed check")
    tasks_dir_flag(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")


def describe(task: Any) -> dict[str, Any]:
    from kernelkb.kernels.discovery import describe as origin

    return {"name": task.name, "op_type": task.op_type, "from": origin(task.name),
            "template": task.template_path or "(inline)",
            "knobs": [k.name for k in task.knobs], "variants": [v.name for v in task.variants],
            "points": sum(1 for _ in task.space()), "related_ops": list(task.related_ops),
            "dtypes": list(task.dtypes), "regimes": task.regimes is not None}


def check(task: Any, dtypes: list[str], timeout_s: float) -> dict[str, Any]:
    """The checks of ``--check``: {"ok": bool, "steps": [(what, ok, detail)]}."""
    from kernelkb.kernels.config import header_constants
    from kernelkb.optimizer.sandbox import evaluate

    steps: list[tuple[str, bool, str]] = [
        ("declaration", True, f"{len(task.knobs)} knobs, {len(task.variants)} variants, "
                              f"related ops {list(task.related_ops) or 'none'}")]
    points, wrong = 0, []
    for config in task.space():
        points += 1
        header = header_constants(task.render(config))
        if {k: header.get(k) for k in config} != config:
            wrong.append(config)
    low, high = SPACE_RULE
    size_note = ""
    if points < low:
        size_note = (f" (under the {low}-{high} the shipped tasks keep: fine for a small op, "
                     "fewer lessons per knob value)")
    elif points > high:
        size_note = (f" (over the {low}-{high} the shipped tasks keep: a full grid sweep on "
                     "one GPU takes long; --agent tuner --search tpe samples instead)")
    steps.append(("search space", not wrong and points > 0,
                  f"{points} legal points render{size_note}" if not wrong
                  else f"{len(wrong)} points render a different header, e.g. {wrong[0]}"))
    for dtype in dtypes or list(task.dtypes):
        result = evaluate(task.name, task.template, dtype=dtype, shapes="auto", seeds=1,
                          timeout_s=timeout_s)
        detail = (f"{len(result.shapes_checked)} shapes ({result.shape_set}) pass"
                  if result.ok else f"{result.stage}: {result.error_kind}: "
                                    f"{(result.error_message or '')[:300]}")
        steps.append((f"naive kernel, {dtype}", result.ok, detail))
    return {"ok": all(ok for _, ok, _ in steps), "steps": steps}


def execute(args: argparse.Namespace) -> tuple[int, str]:
    """(exit status, text to print): ``run`` prints it."""
    from kernelkb.kernels.discovery import all_tasks, get_task

    if args.shapes:
        return model_shapes(args)
    if args.check:
        try:
            task = get_task(args.check)
        except KeyError as err:
            return 2, f"kernelkb: error: {err.args[0]}"
        unknown = [d for d in args.dtype if d not in task.dtypes]
        if unknown:
            return 2, (f"kernelkb: error: task {task.name} has no dtype {unknown}; "
                       f"it has {list(task.dtypes)}")
        out = check(task, args.dtype, args.timeout_s)
        text = json.dumps(out, indent=2) if args.json else "\n".join(
            f"{'ok  ' if ok else 'FAIL'} {what}: {detail}" for what, ok, detail in out["steps"])
        return (0 if out["ok"] else 1), text
    rows = [describe(task) for task in all_tasks().values()]
    if args.json:
        return 0, json.dumps(rows, indent=2)
    return 0, "\n".join(
        f"{row['name']} (op {row['op_type']}): {row['points']} points, "
        f"knobs {', '.join(row['knobs'])}"
        + (f"; variants {', '.join(row['variants'])}" if row["variants"] else "")
        + f"; related {', '.join(row['related_ops']) or 'none'}; from {row['from']}"
        for row in rows)


def model_shapes(args: argparse.Namespace) -> tuple[int, str]:
    """``tasks shapes TASK --model-config PATH``: 0 and the shapes, or 2 and one line."""
    from kernelkb.kernels.discovery import get_task

    words = list(args.shapes)
    if words[0] != "shapes" or len(words) != 2:
        return 2, (f"kernelkb: error: tasks takes `shapes TASK`, not {' '.join(words)!r}")
    if not args.model_config:
        return 2, "kernelkb: error: tasks shapes: --model-config PATH is required"
    try:
        task = get_task(words[1])
        derived = derive(args, task)
    except (KeyError, ValueError) as err:
        return 2, f"kernelkb: error: {err.args[0] if isinstance(err, KeyError) else err}"
    if args.json:
        return 0, json.dumps({
            "task": task.name, "model": derived.model, "reason": derived.reason,
            "notes": list(derived.notes), "shape_names": list(task.shape_names),
            "shapes": [{"shape": list(s), "regime": task.regime(s), "uses": derived.labels(s)}
                       for s in derived.shapes]}, indent=2)
    return 0, render(derived, task)


def run(args: argparse.Namespace) -> int:
    status, text = execute(args)
    print(text, file=sys.stderr if status == 2 else sys.stdout)
    return status


COMMANDS = (Command("tasks", HELP, add_arguments, run),)
