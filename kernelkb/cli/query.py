"""The commands that ask the store: query (few-shot experiences), insights (what worked),
bootstrap (what to try first on a GPU)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kernelkb import operations
from kernelkb.cli.common import (
    Command,
    UsageError,
    hardware_flags,
    json_flag,
    not_a_readable_file,
    print_json,
    reader,
)
from kernelkb.cli.optimize import tasks_dir_flag


def _add_query(parser: argparse.ArgumentParser) -> None:
    hardware_flags(parser)
    tasks_dir_flag(parser)
    parser.add_argument("--task", dest="task_id", metavar="TASK",
                        help="the task the kernel is for (ranks its own experiences first)")
    parser.add_argument("--dtype", help="dtype of the kernel, e.g. float16 (a match ranks "
                        "higher; others are not dropped)")
    parser.add_argument("--source", type=Path, help="file with the current kernel source")
    parser.add_argument("--feedback", dest="feedback_text", help="latest feedback text")
    parser.add_argument("--limit", "-k", type=int, default=5, dest="k", metavar="N",
                        help="experiences in the block at most (-k: deprecated, its older "
                        "name)")
    parser.add_argument("--max-chars", type=int, default=4000,
                        help="size of the few-shot block in characters at most")
    parser.add_argument("--exclude-task", action="append", default=[], dest="exclude_tasks",
                        metavar="TASK", help="leave this task's experiences out (repeatable; "
                        "a held-out test)")
    parser.add_argument("--no-related", action="store_true",
                        help="only the op's own experiences, none from related ops")
    json_flag(parser)


def _run_query(args: argparse.Namespace) -> int:
    from kernelkb.kb.embedder import prefetch_query_runner
    from kernelkb.kb.settings import Settings

    settings = Settings()
    if settings.vectors and not settings.service_url:  # this process embeds the query
        prefetch_query_runner()  # loading while the store opens
    from kernelkb.retrieval.query import RetrievalQuery

    if not args.op_type:
        raise UsageError("--op is required (e.g. --op softmax)")
    if args.source:
        problem = not_a_readable_file(args.source)
        if problem:
            raise UsageError(f"--source {args.source}: {problem}")
        try:
            source_text = args.source.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"--source {args.source}: not UTF-8 text ({exc.reason} at "
                             f"byte {exc.start})") from exc
    from pydantic import ValidationError

    try:
        query = RetrievalQuery(  # checks every value before the store opens
            op_type=args.op_type, task_id=args.task_id, dtype=args.dtype,
            gpu_name=args.gpu_name, arch=args.arch, triton_version=args.triton_version,
            kernel_source=source_text if args.source else None,
            feedback_text=args.feedback_text, k=args.k, max_chars=args.max_chars,
            exclude_tasks=args.exclude_tasks, include_related=not args.no_related,
            related_ops=[] if args.no_related else None, regime=args.regime)
    except ValidationError as err:  # said with the flag the user typed, not the field
        raise UsageError(flag_reasons(err, args)) from None
    from kernelkb.kb.terminal import progress

    with progress("query: opening the store, loading the embedding model"):  # a terminal
        result = operations.retrieve(reader(), query)
    if args.json:
        print_json(result.model_dump(mode="json"))
    else:
        print(result.prompt_block)
    return 0


# RetrievalQuery's fields (and their aliases) as query's flags name them
QUERY_FLAGS = {"op_type": "--op", "op": "--op", "task_id": "--task", "dtype": "--dtype",
               "gpu_name": "--gpu", "arch": "--arch", "triton_version": "--triton",
               "kernel_source": "--source", "feedback_text": "--feedback", "k": "--limit",
               "limit": "--limit", "max_chars": "--max-chars",
               "exclude_tasks": "--exclude-task", "regime": "--regime"}


def flag_reasons(err: Any, args: argparse.Namespace) -> str:
    """``--limit 0: Input should be ...; ...``: each refused value under its flag."""
    said = []
    for e in err.errors(include_url=False):
        field = str(e["loc"][0]) if e["loc"] else ""
        flag = QUERY_FLAGS.get(field, field or "query")
        value = getattr(args, {"op": "op_type", "limit": "k"}.get(field, field), None)
        shown = f" {value}" if isinstance(value, int | float) else ""  # not a whole text
        said.append(f"{flag}{shown}: {e['msg']}")
    return "; ".join(said)


def _add_insights(parser: argparse.ArgumentParser) -> None:
    hardware_flags(parser)
    parser.add_argument("--current-triton", help="label and rank lower what was measured "
                        "under another Triton version (--triton filters instead)")
    json_flag(parser)


def _run_insights(args: argparse.Namespace) -> int:
    knowledge = reader()
    names = operations.resolve(knowledge, op_type=args.op_type, gpu_name=args.gpu_name,
                               arch=args.arch)
    report = knowledge.insights(op_type=names["op_type"], gpu_name=names["gpu_name"],
                                arch=names["arch"], triton_version=args.triton_version,
                                current_triton=args.current_triton, regime=args.regime)
    if args.json:
        print_json(report.model_dump(mode="json"))
        return 0
    said = {"op_type": "op", "gpu_name": "gpu"}  # the flags' names, as the user typed them
    where = ", ".join(f"{said.get(k, k)}={v}" for k, v in names.items() if v)
    print(f"{report.total} experiences" + (f" ({where})" if where else ""))
    if report.note:
        print(report.note)
    if not report.categories:
        return 0
    print(f"{'category':16} {'n':>5} {'wins':>5} {'sure':>5} {'win%':>6} {'timed':>5} "
          f"{'median':>7} "
          f"{'best':>6}  examples (id prefixes: kernelkb show ID, GET /experiences/ID)")
    for c in report.categories:
        med = f"{c.median_speedup:.2f}x" if c.median_speedup else "-"
        best = f"{c.best_speedup:.2f}x" if c.best_speedup else "-"
        print(f"{c.category:16} {c.count:5} {c.wins:5} {c.significant_wins:5} "
              f"{100 * c.win_rate:5.0f}% {c.gains:5} "
              f"{med:>7} {best:>6}  {', '.join(i[:10] for i in c.example_ids)}")
        if c.version_note:
            print(f"{'':16} ({c.version_note})")
    print(f"({report.basis}; timed: the wins they are over)")
    return 0


def _add_bootstrap(parser: argparse.ArgumentParser) -> None:
    hardware_flags(parser)
    parser.add_argument("--sm-count", type=int, help="SMs of a GPU the table lacks")
    parser.add_argument("--bandwidth", type=float, dest="mem_bandwidth_gbps", help="GB/s")
    parser.add_argument("--smem", type=int, dest="smem_per_sm_kib", help="KiB per SM")
    parser.add_argument("--dtype", default="float16", help="dtype of the configurations")
    parser.add_argument("--limit", type=int, default=10, help="ranked configurations shown")
    parser.add_argument("--include-own", action="store_true",
                        help="also this GPU's own experiences (a card already measured)")
    parser.add_argument("--shape", action="append", default=[], dest="shapes",
                        metavar="LABEL", help="a shape label (repeatable, e.g. "
                        "rows=1024,cols=128256): each task's best configuration is then the "
                        "fastest measured on these shapes")
    json_flag(parser)


def _run_bootstrap(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UsageError(f"--limit {args.limit}: show at least 1")
    check_dtype(args.dtype)
    env = {k: getattr(args, k) for k in ("gpu_name", "arch", "sm_count", "mem_bandwidth_gbps",
                                         "smem_per_sm_kib", "triton_version")}
    from kernelkb.retrieval.bootstrap_target import BootstrapTarget

    BootstrapTarget.model_validate(env)  # the API's bounds: no NaN, no 0 SMs (exit 2)
    plan = operations.bootstrap(reader(), env, op_type=args.op_type, dtype=args.dtype,
                                limit=args.limit, include_own=args.include_own,
                                shapes=args.shapes)
    if args.json:
        print_json(plan.model_dump(mode="json"))
        return 0
    for warning in plan.warnings:
        print(f"note: {warning}")
    _print_first(plan)
    _print_prediction(plan)
    for m in plan.similar_hardware:
        print(f"similar: {m.gpu_name} ({m.arch}) similarity {m.similarity:.2f}, "
              f"{m.experiences} experiences")
    if plan.items:
        print("what worked there, best first:")
    for n, item in enumerate(plan.items, 1):
        config = f" {item.config}" if item.config else ""
        note = f" ({item.version_note})" if item.version_note else ""
        print(f"{n}. [{item.kind}] {item.category}{config}: {item.evidence}{note}")
    return 0


def check_dtype(dtype: str) -> None:
    from kernelkb.kernels.dtypes import DTYPES

    if dtype not in DTYPES:
        raise UsageError(f"--dtype {dtype!r}: one of {', '.join(DTYPES)}")


def _config_text(config: dict) -> str:  # type: ignore[type-arg]
    return ", ".join(f"{k}={v}" for k, v in config.items())


def _percent(rel: float) -> str:
    return f"{round(100 * (rel - 1.0)):+d}%"


def _print_first(plan) -> None:  # type: ignore[no-untyped-def]
    first = plan.try_first
    if first is None:
        return
    what = _config_text(first.config) if first.config else f"{first.category} edits"
    print(f"try first: {what}\n  ({first.evidence})")


def _print_prediction(plan) -> None:  # type: ignore[no-untyped-def]
    from kernelkb.retrieval.first_try import time_vs_best

    pred = plan.prediction
    if pred is None:
        if plan.prediction_note:
            print(f"no ranked configurations: {plan.prediction_note}")
        return
    print(f"ranked configurations of {pred.task_id or pred.op_type} on {pred.target_gpu} "
          f"({pred.note}; over {', '.join(pred.shapes)}):")
    if pred.interval_note:
        print(f"  intervals: {pred.interval_note}")
    for item in pred.items:
        rel = time_vs_best(item.predicted_rel_time, "the best per shape")
        if item.predicted_rel_low is not None and item.predicted_rel_high is not None:
            rel += (f" ({100 * (pred.interval_level or 0):.0f}%: "
                    f"{_percent(item.predicted_rel_low)} to {_percent(item.predicted_rel_high)})")
        print(f"{item.rank:3}. predicted {rel} | {_config_text(item.config)}")
        for line in item.evidence:
            print(f"       {line}")
    print()


COMMANDS = (
    Command("query", "retrieve experiences and print the few-shot block", _add_query, _run_query),
    Command("insights", "what worked: aggregate by edit category", _add_insights,
            _run_insights),
    Command("bootstrap", "what to try first on new hardware", _add_bootstrap, _run_bootstrap),
)
