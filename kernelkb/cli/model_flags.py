"""``--model-config``, ``--batch``, ``--seq`` and ``--shapes A1xB1,...``: the shapes a run
tunes on, from a user's model or listed by hand, for ``optimize`` and ``tasks shapes``.

Why here: both commands read the same flags the same way (kernels/model_shapes.py
derives); argparse only at import, the tasks when a command runs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

DEFAULT_BATCH = "1,8,32"
DEFAULT_SEQ = "2048"


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-config", metavar="PATH",
                        help="a Hugging Face config.json (read locally), or a shipped "
                             "example's name (llama-3-8b, qwen2.5-7b, mixtral-8x7b): the "
                             "task's shapes in that model for prefill and decode")
    parser.add_argument("--batch", default=DEFAULT_BATCH, metavar="B1,B2",
                        help=f"--model-config: batch sizes (default {DEFAULT_BATCH})")
    parser.add_argument("--seq", default=DEFAULT_SEQ, metavar="S1,S2",
                        help="--model-config: prompt lengths of prefill, KV lengths of "
                             f"decode (default {DEFAULT_SEQ})")


def derive(args: argparse.Namespace, task: Any) -> Any:
    """The task's ``ModelShapes`` in ``--model-config``'s model; ValueError naming the
    flag for a bad config or size list."""
    from kernelkb.kernels.model_config import read_model_config
    from kernelkb.kernels.model_shapes import model_shapes, sizes

    lists = []
    for flag, text in (("--batch", args.batch), ("--seq", args.seq)):
        try:
            lists.append(sizes(text))
        except ValueError as err:
            raise ValueError(f"{flag} {err}") from None
    return model_shapes(task, read_model_config(args.model_config), *lists)


@dataclass
class RunShapes:
    """What LoopOptions gets: round shapes, sweep shapes, regimes; and a line to say."""

    shapes: Any
    sweep_shapes: Any
    regimes: tuple[str, ...]
    said: list[str] = field(default_factory=list)


def run_shapes(args: argparse.Namespace, task: Any, on_gpu: bool) -> RunShapes:
    """The shapes of an optimize run. A listed ``--shapes`` is used as given, for the
    rounds and the sweep. A model's shapes are the sweep (on a GPU) and pick the regimes
    tuned; each regime's rounds time up to four of them beside its edge shapes
    (session.regime_plan). On a CPU they pick the regimes only: they are GPU sizes, and
    the interpreter checks its own small shapes."""
    from kernelkb.kernels.model_shapes import is_shape_list, parse_shapes

    asked = tuple(getattr(args, "regime", []))
    listed = is_shape_list(args.shapes)
    if listed and args.model_config:
        raise ValueError("--shapes lists shapes and --model-config derives them: give one")
    if listed:
        try:
            shapes = parse_shapes(args.shapes, task)
        except ValueError as err:
            raise ValueError(f"--shapes: {err}") from None
        sweep = shapes if args.sweep_shapes == "auto" else args.sweep_shapes
        return RunShapes(shapes, sweep, asked)
    if not args.model_config:
        return RunShapes(args.shapes, args.sweep_shapes, asked)
    derived = derive(args, task)
    if derived.reason:
        raise ValueError(f"--model-config: {task.name} has no shape in {derived.model}: "
                         f"{derived.reason}")
    reached = tuple(task.shapes_by_regime(derived.shapes))
    regimes = tuple(r for r in asked if r in reached) if asked else reached
    if not regimes:
        raise ValueError(f"--regime {', '.join(asked)}: {derived.model}'s shapes of "
                         f"{task.name} fall in {', '.join(reached)} only")
    said = [f"{task.name} in {derived.model}: {len(derived.shapes)} shapes in regimes "
            f"{', '.join(regimes)}" + "".join(f"; {note}" for note in derived.notes)]
    sweep = args.sweep_shapes
    if on_gpu and sweep == "auto":
        sweep = derived.shapes
    elif not on_gpu:
        own = task.shapes_by_regime([*task.cpu_shapes, *task.edge_shapes])
        left = [r for r in regimes if r not in own]
        said.append("no GPU here: the model's shapes pick the regimes; the interpreter "
                    "checks the task's own small shapes of them (`kernelkb tasks shapes` "
                    "lists the model's)" + (f"; {', '.join(left)}: none small enough for "
                                            "it, tuned on a GPU only" if left else ""))
    return RunShapes(args.shapes, sweep, regimes, said)


def render(derived: Any, task: Any) -> str:
    """``kernelkb tasks shapes``: the model's shapes of a task per regime, each with the
    steps that call it, or why there are none."""
    head = f"{task.name} in {derived.model}"
    if derived.reason:
        return f"{head}: no shape: {derived.reason}"
    lines = [f"{head}: {len(derived.shapes)} shapes "
             f"({' x '.join(task.shape_names)}), by regime"]
    for regime, shapes in task.shapes_by_regime(derived.shapes).items():
        lines.append(f"  {regime}:")
        lines += [f"    {'x'.join(map(str, s)):<22} {'; '.join(derived.labels(s))}"
                  for s in shapes]
    lines += [f"  note: {note}" for note in derived.notes]
    return "\n".join(lines)
