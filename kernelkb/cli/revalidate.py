"""``kernelkb revalidate TASK``: the CLI face of ``optimizer.revalidate``.

Light at import (argparse only). Reads the store the way ``kernelkb optimize`` does (the
service, the local store, or on a bare GPU host a local SQLite store seeded from seeds/),
always writes the new experiences to a JSONL journal (``kernelkb ingest`` it into the real
store), and also stores them where the store takes writes.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from kernelkb.cli.common import TASK_HELP, Command
from kernelkb.cli.optimize import tasks_dir_flag
from kernelkb.cli.scale_flags import add_scale_flags, open_pool

HELP = "re-time the store's best known configurations of a task on this GPU and Triton"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # a task is named as optimize and sweep name it: the first word after the command
    parser.add_argument("task", nargs="?", metavar="TASK", help=TASK_HELP)
    parser.add_argument("--task", dest="task_flag", metavar="TASK",
                        help="deprecated: the older way to name TASK")
    tasks_dir_flag(parser)
    parser.add_argument("--limit", "--top", type=int, default=5, dest="top", metavar="N",
                        help="how many distinct configurations, best measured first (--top: "
                             "deprecated, its older name)")
    parser.add_argument("--dtype", default="float16", help="dtype to time them in")
    parser.add_argument("--shapes", default="auto",
                        help="auto (GPU: each stored record's shapes; CPU: the task's cpu "
                             "shapes), stored, or a shape set: cpu, edge, tune, sweep, all")
    parser.add_argument("--seeds", type=int, default=3,
                        help="random inputs each configuration is checked on, per shape")
    parser.add_argument("--timeout-s", type=float, default=120.0,
                        help="seconds one configuration's evaluation may take")
    parser.add_argument("--journal", type=Path, default=None,
                        help="JSONL output (default: runs/<run id>/journal.jsonl)")
    add_scale_flags(parser, "a configuration")


def one_task(task: str | None, flag: str | None) -> tuple[str, str]:
    """(the task's name, why it cannot be had: '' when it can) from the positional TASK or
    the deprecated ``--task``."""
    if task and flag and task != flag:
        return "", (f"TASK {task!r} and --task {flag!r}: give one (--task is the deprecated "
                    "older way to name TASK)")
    if not (task or flag):
        return "", ("name the task: kernelkb revalidate TASK (e.g. softmax; kernelkb tasks "
                    "lists them)")
    return task or flag or "", ""


def execute(args: argparse.Namespace) -> tuple[int, str]:
    """(exit status, what to print): the drift table and where the records went."""
    from kernelkb.kb.settings import Settings
    from kernelkb.kernels.discovery import get_task
    from kernelkb.operations import open_for_runs
    from kernelkb.optimizer.revalidate import revalidate, table
    from kernelkb.optimizer.writeback import Journal

    name, problem = one_task(args.task, getattr(args, "task_flag", None))
    if problem:
        return 2, problem
    if args.top < 1:
        return 2, f"--limit {args.top}: must be at least 1"
    from kernelkb.kernels.discovery import all_tasks
    from kernelkb.retrieval.names import UnknownName, match_name

    try:
        task = get_task(match_name("task", name, all_tasks()))
    except UnknownName as err:
        return 2, str(err)
    settings = Settings()
    # the service's records could be read (Knowledge.list), but no door renders its outage
    # yet (a traceback mid-run): a local store, whose journal the service then ingests
    if settings.service_url:
        return 2, ("revalidate reads the known configurations from a local store; unset "
                   "KERNELKB_SERVICE_URL (the run's records can be ingested into the service)")
    knowledge, write_back = open_for_runs(settings)
    if knowledge is None:
        return 2, "no knowledge store here to read the known configurations from"
    from kernelkb.kernels.shared.errors import UserFixable

    try:
        pool = open_pool(args)
    except (ValueError, UserFixable) as err:
        return 2, str(err)
    try:
        result = revalidate(task, knowledge, top=args.top, dtype=args.dtype,
                            shapes=args.shapes, seeds=args.seeds, timeout_s=args.timeout_s,
                            command="kernelkb " + shlex.join(sys.argv[1:]), pool=pool)
    except (LookupError, ValueError) as err:
        return 2, str(err)
    finally:
        if pool is not None:
            pool.close()
    run_id = result.records[0].run_id
    journal = Journal(args.journal or Path("runs") / run_id / "journal.jsonl")
    for record in result.records:
        journal.append(record)
    stored = ""
    if write_back:
        knowledge.ingest(result.records)
        stored = " and stored"
    return 0, (f"{table(result)}\n{len(result.records)} experiences written to "
               f"{journal.path}{stored} (load them into the real store with: kernelkb "
               f"ingest {journal.path})")


def run(args: argparse.Namespace) -> int:
    status, text = execute(args)
    print(text, file=sys.stderr if status else sys.stdout)
    return status


COMMANDS = (Command("revalidate", HELP, add_arguments, run),)
