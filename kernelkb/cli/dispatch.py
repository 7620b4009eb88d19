"""``kernelkb dispatch``: merge per-GPU dispatch tables, show what a table picks, list regimes.

Light at import (argparse only), like the other command modules.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernelkb.cli.common import Command

HELP = "dispatch tables of exported kernels: merge (several GPUs), show, regimes"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="dispatch_command", required=True)
    merge = sub.add_parser("merge", help="merge tables of one task from several GPUs")
    merge.add_argument("tables", nargs="+", type=Path, help="*.dispatch.json files")
    merge.add_argument("-o", "--out", type=Path, required=True, help="merged table to write")
    show = sub.add_parser("show", help="which entry each regime runs on a GPU")
    show.add_argument("table", type=Path, help="a *.dispatch.json file")
    show.add_argument("--gpu", help="GPU name (default: every GPU of the table)")
    show.add_argument("--arch", help="its architecture, e.g. sm_90 (for a GPU not in it)")
    show.add_argument("--sms", type=int, help="its SM count (for a GPU not in it)")
    regimes = sub.add_parser("regimes", help="each task's regimes and why")
    regimes.add_argument("task", nargs="?", help="one task (default: all)")


def execute(args: argparse.Namespace) -> tuple[int, str]:
    """(exit status, text to print): 2 with the reason for a table that cannot be read,
    merged or selected from; nothing is written then."""
    from kernelkb.optimizer.dispatch import MERGE_RULES, merge_tables, read_table, write_table

    try:
        if args.dispatch_command == "merge":
            merged = merge_tables([read_table(p) for p in args.tables])
            write_table(merged, args.out)
            lines = [f"{args.out}: {merged['task']}, GPUs {', '.join(merged['gpus'])}; "
                     f"{len(merged['conflicts'])} conflicts resolved ({MERGE_RULES})"]
            lines += [f"  {c['gpu']} / {c['regime']}: kept {json.dumps(c['kept'])}, "
                      f"dropped {json.dumps(c['dropped'])}" for c in merged["conflicts"]]
            return 0, "\n".join(lines)
        if args.dispatch_command == "show":
            return 0, _show(read_table(args.table), args)
        return 0, _regimes(args.task)
    except (ValueError, KeyError, LookupError) as err:
        return 2, f"error: {err}"


def _show(table: dict, args: argparse.Namespace) -> str:
    from kernelkb.kernels.dispatch_runtime import dispatch_select

    targets = [{"gpu_name": args.gpu, "arch": args.arch or table["gpus"].get(args.gpu, {})
                .get("facts", {}).get("arch"), "sm_count": args.sms}] if args.gpu else \
        [{"gpu_name": g, **{k: v.get("facts", {}).get(k) for k in ("arch", "sm_count")}}
         for g, v in table["gpus"].items()]
    lines = [f"{table['task']}: regimes by {' x '.join(table['rule']['dims']) or '-'}: "
             + ", ".join(f"{n} (<= {b})" if b is not None else n
                         for n, b in table["rule"]["classes"])]
    for here in targets:
        lines.append(f"\n{here['gpu_name']}:")
        for name, _ in table["rule"]["classes"]:
            gpu, used, entry, why = dispatch_select(table, here, name)
            figure = f"{entry['time_ms']:.4f} ms" if entry.get("time_ms") else "untimed"
            lines.append(f"  {name:14} {json.dumps(entry['config'])} ({figure})"
                         + (f"  <- fallback: {why}" if why else ""))
    return "\n".join(lines)


def _regimes(name: str | None) -> str:
    from kernelkb.kernels.discovery import all_tasks, get_task

    tasks = [get_task(name)] if name else list(all_tasks().values())
    lines = []
    for task in tasks:
        rule = task.regimes
        sweep = task.shapes_by_regime(task.sweep_shapes)
        lines.append(f"{task.name}: by {' x '.join(rule.dims) or '-'}: {rule.reason}")
        for regime, bound in rule.classes:
            shapes = "; ".join(task.shape_label(s) for s in sweep.get(regime, [])) or "-"
            limit = f"<= {bound}" if bound is not None else ""
            lines.append(f"  {regime:14} {limit:>12}  sweep: {shapes}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    status, text = execute(args)
    print(text, file=sys.stderr if status else sys.stdout)
    return status


COMMANDS = (Command("dispatch", HELP, add_arguments, run),)
