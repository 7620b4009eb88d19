"""The ``kernelkb`` console command: argparse subcommands from one dispatch table.

To add a subcommand, write ``_add_<name>(parser)`` and ``_run_<name>(args) -> int`` and
put a ``Command`` into ``COMMANDS`` (or call ``register`` from another entry module).
Heavy imports (torch, chromadb, the embedder) happen inside the handlers, so
``kernelkb --help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}


def register(command: Command) -> None:
    """Add (or replace) a subcommand."""
    COMMANDS[command.name] = command


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


class _Regimes:
    """``kernels.base.RecordRegimes``, imported on first use: the store asks it only for
    rows stored without a regime, and importing the tasks costs seconds (torch) that a
    query on a store whose regimes are all derived does not need."""

    @property
    def tasks(self) -> tuple[str, ...]:
        from kernels.base import RecordRegimes

        return RecordRegimes().tasks

    def of(self, record):  # type: ignore[no-untyped-def]
        from kernels.base import RecordRegimes

        return RecordRegimes().of(record)


def _knowledge():  # type: ignore[no-untyped-def]
    from kb.settings import Settings
    from retrieval.service import LocalKnowledge

    return LocalKnowledge(Settings(), regimes=_Regimes())


def _reader():  # type: ignore[no-untyped-def]
    """The store for a command that answers questions: an empty store first loads the
    shipped seeds, so a fresh install answers from its first command (as ``serve`` does);
    one kept empty by the settings says how to fill it."""
    from kb.terminal import progress

    knowledge = _knowledge()
    with progress("first use: loading the shipped seeds into the store"):
        reports = knowledge.seed_if_empty()
    if reports:
        loaded = sum(len(r.accepted) for r in reports.values())
        print(f"empty store at {knowledge.location()}: loaded {loaded} shipped experiences "
              "first", file=sys.stderr)
    note = knowledge.empty_note()
    if note:
        print(note, file=sys.stderr)
    return knowledge


class UsageError(ValueError):
    """A command given something it cannot use: printed as one line, exit status 2."""


def _registry_names() -> tuple[list[str], list[str]]:
    """(op types, task names) the task registry knows, for matching typed names."""
    from kernels.discovery import registry_summary

    summary = registry_summary()  # from disk while the task files are unchanged
    return list(summary["ops"]), list(summary["tasks"])


def _resolve(knowledge, **names: str | None) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    """The store's spelling of the names a person typed (retrieval/names.py). A typed op
    or task that the store spells exactly is itself whatever the registry holds (an exact
    spelling always wins), so the registry (every task module: torch) is read only when
    one is not."""
    from retrieval.names import UnknownName

    try:
        found = knowledge.resolve_names(**names)
        if all(found[k] == names.get(k) for k in ("op_type", "task_id")):
            return found
    except UnknownName:
        pass
    ops, tasks = _registry_names()
    return knowledge.resolve_names(known_ops=ops, known_tasks=tasks, **names)


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2, default=str))


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


# -- serve ----------------------------------------------------------------------------
def _add_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default=None, help="default: KERNELKB_HOST or 127.0.0.1")
    parser.add_argument("--port", type=int, default=None, help="default: KERNELKB_PORT or 8765")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes sharing the port and the store (default 1; "
                             "2 on a 2-core host doubles what the GIL lets one answer)")


def _run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from kb.api.access import write_policy
    from kb.api.app import create_app
    from kb.api.http_protocol import port_problem, serve_options
    from kb.settings import Settings

    if args.workers < 1:
        print(f"--workers {args.workers}: at least 1", file=sys.stderr)
        return 2
    settings = Settings()
    host = args.host or settings.host
    try:
        write_policy(host, settings.api_token)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    settings.host = host  # the app logs who may write at start-up
    port = args.port if args.port is not None else settings.port
    problem = port_problem(host, port)
    if problem:  # before the store and the model load, not 20 s later
        print(problem, file=sys.stderr)
        return 2
    if args.workers > 1:  # each worker process builds its app from the environment
        os.environ["KERNELKB_HOST"] = host
        uvicorn.run("kb.api.app:create_app", factory=True, host=host, port=port,
                    workers=args.workers, **serve_options())
        return 0
    uvicorn.run(create_app(settings), host=host, port=port, **serve_options())
    return 0


# -- ingest / seed --------------------------------------------------------------------
def _add_ingest(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="JSONL file, one experience record per line")
    _json_flag(parser)


def _print_report(name: str, report, as_json: bool,  # type: ignore[no-untyped-def]
                  line_numbers: list[int] | None = None) -> None:
    if as_json:
        _print_json({name: report.model_dump()})
        return
    print(f"{name}: {len(report.accepted)} accepted, {len(report.duplicates)} duplicate, "
          f"{len({r.index for r in report.rejected})} rejected")
    for r in report.rejected:
        line = line_numbers[r.index] if line_numbers else r.index + 1
        print(f"  {name}:{line}: {r.field}: {r.reason}")


def _quiet_batches(args: argparse.Namespace) -> None:
    """Without --verbose, ingest's per-batch INFO lines are noise beside a command's own
    summary."""
    if not args.verbose:
        logging.getLogger("kb.ingest").setLevel(logging.WARNING)


def _run_ingest(args: argparse.Namespace) -> int:
    from kb.seeds import read_jsonl

    problem = _not_a_readable_file(args.file)
    if problem:
        print(f"kernelkb ingest: {args.file}: {problem}", file=sys.stderr)
        return 2
    from kb.terminal import progress

    lines, numbers = read_jsonl(args.file, with_line_numbers=True)
    _quiet_batches(args)  # the summary below says it
    kb = _knowledge()
    kb.sync_index()  # repair what an earlier, interrupted ingest left
    with progress(f"ingest {args.file.name}", total=len(lines)) as bar:
        report = kb.ingest(lines, on_batch=bar.advance)
    _print_report(str(args.file), report, args.json, numbers)
    return 1 if report.rejected else 0


def _not_a_readable_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a data file, or None: a folder, a pipe or a device
    (/dev/zero never ends) is not one."""
    if not path.exists():
        return "no such file"
    if not path.is_file():
        return "not a regular file (a folder, a pipe or a device)"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None


def _run_seed(args: argparse.Namespace) -> int:
    reports = _knowledge().seed()
    if not reports:
        print("no seeds/*.jsonl found")
    for name, report in reports.items():
        _print_report(name, report, args.json)
    return 1 if any(r.rejected for r in reports.values()) else 0


# -- import ---------------------------------------------------------------------------
def _add_import(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", type=Path, nargs="+", metavar="PATH",
                        help="files or folders (*.json, *.json.gz, *.log, *.txt are read; "
                             "see docs/importing.md)")
    parser.add_argument("--format", dest="fmt",
                        choices=("auto", "kernel-tuner", "t4", "triton-autotune", "inductor"),
                        default="auto",
                        help="auto (default): sniff each file; or only files of that format")
    parser.add_argument("--gpu", help="GPU of files that name none (or one the table lacks); "
                                      "needed for Triton autotune caches and Inductor logs")
    parser.add_argument("--license", help="licence of the data (default: the LICENSE file "
                                          "in its folder or above, else 'unknown')")
    parser.add_argument("--kernel", help="kernel name where a file names none (T4); for a "
                                         "Triton autotune cache, the name to use instead of "
                                         "its file's (matmul maps it onto the matmul task)")
    parser.add_argument("--source", help="data set name for record sources (default: the "
                                         "folder holding the LICENSE file, else PATH)")
    _json_flag(parser)


def _run_import(args: argparse.Namespace) -> int:
    import time

    from kb.importers import iter_files
    from kb.importers.load import load_file
    from kb.limits import SHORT
    from kb.terminal import progress

    for flag, value in (("--license", args.license), ("--source", args.source),
                        ("--kernel", args.kernel)):
        if value is not None and (len(value) > SHORT or not value.strip()):
            raise UsageError(f"{flag}: 1 to {SHORT} characters (it goes into every record)")
    _quiet_batches(args)  # the per-file lines below say it
    kb = _knowledge()
    kb.sync_index()  # repair what an earlier, interrupted import or ingest left
    results = []
    start = time.perf_counter()
    try:
        with progress("import") as bar:
            def shown(r) -> None:  # type: ignore[no-untyped-def]
                rate = r.seen / r.seconds if r.seconds else 0.0
                bar.update(description=f"{r.source}: {r.seen} records, {rate:.0f}/s")

            for path in args.paths:
                for source, items in iter_files(path, args.fmt, gpu=args.gpu,
                                                license=args.license, source=args.source,
                                                kernel=args.kernel):
                    r = load_file(source, items, kb.ingest, progress=shown)
                    rate = r.seen / r.seconds if r.seconds else 0.0
                    print(f"{source}: {r.seen} records in {r.seconds:.1f} s ({rate:.0f}/s)",
                          file=sys.stderr, flush=True)
                    results.append(r)
    except (ValueError, FileNotFoundError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    total = {k: sum(getattr(r, k) for r in results)
             for k in ("accepted", "duplicates", "rejected")}
    if args.json:
        _print_json({"files": [r.as_dict() for r in results], **total,
                     "seconds": round(seconds, 2)})
    else:
        for r in results:
            print(f"{r.source}: {r.accepted} accepted, {r.duplicates} duplicate, "
                  f"{r.rejected} rejected")
            for note in r.notes:
                print(f"  note: {note}")
            for line in r.problems[:5]:
                print(f"  {line}")
            if len(r.problems) > 5:
                print(f"  ... and {len(r.problems) - 5} more")
        records = sum(r.seen for r in results)
        print(f"total: {total['accepted']} accepted, {total['duplicates']} duplicate, "
              f"{total['rejected']} rejected from {len(results)} files in {seconds:.1f} s "
              f"({records / seconds if seconds else 0:.0f} records/s)")
    return 1 if total["rejected"] else 0


# -- query ----------------------------------------------------------------------------
def _hardware_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--op", dest="op_type", help="op type, e.g. softmax")
    parser.add_argument("--gpu", dest="gpu_name", help="GPU name, e.g. 'NVIDIA H200'")
    parser.add_argument("--arch", help="e.g. sm_90")
    parser.add_argument("--triton", dest="triton_version", help="Triton version")
    parser.add_argument("--regime", help="shape regime of the op's task, e.g. long_rows "
                        "(see `kernelkb dispatch regimes TASK`)")


def _use_tasks_dirs(args: argparse.Namespace) -> None:
    """Name the task folders (setting and --tasks-dir) before the command runs; tasks
    are read from them when a command first needs a task."""
    from kb.settings import Settings
    from kernels.discovery import add_tasks_dirs, split_dirs

    add_tasks_dirs([*split_dirs(Settings().tasks_dir), *getattr(args, "tasks_dir", [])])


def _add_query(parser: argparse.ArgumentParser) -> None:
    _hardware_flags(parser)
    _optimize.tasks_dir_flag(parser)
    parser.add_argument("--task", dest="task_id")
    parser.add_argument("--dtype")
    parser.add_argument("--source", type=Path, help="file with the current kernel source")
    parser.add_argument("--feedback", dest="feedback_text", help="latest feedback text")
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--max-chars", type=int, default=4000)
    parser.add_argument("--exclude-task", action="append", default=[], dest="exclude_tasks")
    parser.add_argument("--no-related", action="store_true")
    _json_flag(parser)


def _related_ops(op_type: str) -> list[str]:
    """The op's declared relatives, from the kernels registry (Task.related_ops; read
    from disk while the task files are unchanged: kernels.discovery.registry_summary)."""
    from kernels.discovery import registry_summary

    return list(registry_summary()["related"].get(op_type, ()))


def _run_query(args: argparse.Namespace) -> int:
    from retrieval.query import RetrievalQuery

    if not args.op_type:
        raise UsageError("--op is required (e.g. --op softmax)")
    if args.source:
        problem = _not_a_readable_file(args.source)
        if problem:
            raise UsageError(f"--source {args.source}: {problem}")
        try:
            source_text = args.source.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"--source {args.source}: not UTF-8 text ({exc.reason} at "
                             f"byte {exc.start})") from exc
    query = RetrievalQuery(  # checks every value before the store opens
        op_type=args.op_type, task_id=args.task_id, dtype=args.dtype,
        gpu_name=args.gpu_name, arch=args.arch, triton_version=args.triton_version,
        kernel_source=source_text if args.source else None,
        feedback_text=args.feedback_text, k=args.k, max_chars=args.max_chars,
        exclude_tasks=args.exclude_tasks, include_related=not args.no_related, related_ops=[],
        regime=args.regime)
    knowledge = _reader()
    names = _resolve(knowledge, op_type=args.op_type, gpu_name=args.gpu_name, arch=args.arch,
                     task_id=args.task_id)
    related = _related_ops(names["op_type"] or "") if not args.no_related else []
    result = knowledge.retrieve(query.model_copy(update={**names, "related_ops": related}))
    if args.json:
        _print_json(result.model_dump(mode="json"))
    else:
        print(result.prompt_block)
    return 0


# -- insights / bootstrap -------------------------------------------------------------
def _add_insights(parser: argparse.ArgumentParser) -> None:
    _hardware_flags(parser)
    parser.add_argument("--current-triton", help="label and rank lower what was measured "
                        "under another Triton version (--triton filters instead)")
    _json_flag(parser)


def _run_insights(args: argparse.Namespace) -> int:
    knowledge = _reader()
    names = _resolve(knowledge, op_type=args.op_type, gpu_name=args.gpu_name, arch=args.arch)
    report = knowledge.insights(op_type=names["op_type"], gpu_name=names["gpu_name"],
                                arch=names["arch"], triton_version=args.triton_version,
                                current_triton=args.current_triton, regime=args.regime)
    if args.json:
        _print_json(report.model_dump(mode="json"))
        return 0
    where = ", ".join(f"{k}={v}" for k, v in names.items() if v)
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
    _hardware_flags(parser)
    parser.add_argument("--sm-count", type=int)
    parser.add_argument("--bandwidth", type=float, dest="mem_bandwidth_gbps", help="GB/s")
    parser.add_argument("--smem", type=int, dest="smem_per_sm_kib", help="KiB per SM")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--limit", type=int, default=10, help="ranked configurations shown")
    parser.add_argument("--include-own", action="store_true",
                        help="also this GPU's own experiences (a card already measured)")
    parser.add_argument("--shape", action="append", default=[], dest="shapes",
                        metavar="LABEL", help="a shape label (repeatable, e.g. "
                        "rows=1024,cols=128256): each task's best configuration is then the "
                        "fastest measured on these shapes")
    _json_flag(parser)


def _run_bootstrap(args: argparse.Namespace) -> int:
    from optimizer.spaces import space_for_op
    from retrieval.prediction import UnknownGpu

    if args.limit < 1:
        raise UsageError(f"--limit {args.limit}: show at least 1")
    _check_dtype(args.dtype)
    env = {k: getattr(args, k) for k in ("gpu_name", "arch", "sm_count", "mem_bandwidth_gbps",
                                         "smem_per_sm_kib", "triton_version")}
    from retrieval.bootstrap_target import BootstrapTarget

    BootstrapTarget.model_validate(env)  # the API's bounds: no NaN, no 0 SMs (exit 2)
    knowledge = _reader()
    op_type = _resolve(knowledge, op_type=args.op_type)["op_type"]
    space = space_for_op(op_type, args.dtype) if op_type else None
    try:
        plan = knowledge.bootstrap(env, op_type=op_type, space=space, limit=args.limit,
                                   include_own=args.include_own, shapes=args.shapes or None)
    except UnknownGpu as err:
        print(err, file=sys.stderr)
        return 2
    if args.json:
        _print_json(plan.model_dump(mode="json"))
        return 0
    for warning in plan.warnings:
        print(f"note: {warning}")
    _print_prediction(plan)
    for m in plan.similar_hardware:
        print(f"similar: {m.gpu_name} ({m.arch}) similarity {m.similarity:.2f}, "
              f"{m.experiences} experiences")
    for n, item in enumerate(plan.items, 1):
        config = f" {item.config}" if item.config else ""
        note = f" ({item.version_note})" if item.version_note else ""
        print(f"{n}. [{item.kind}] {item.category}{config}: {item.evidence}{note}")
    return 0


def _check_dtype(dtype: str) -> None:
    from kernels.base import DTYPES

    if dtype not in DTYPES:
        raise UsageError(f"--dtype {dtype!r}: one of {', '.join(DTYPES)}")


def _print_prediction(plan) -> None:  # type: ignore[no-untyped-def]
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
        rel = f"{item.predicted_rel_time:.2f}x" if item.predicted_rel_time else "?"
        if item.predicted_rel_low is not None and item.predicted_rel_high is not None:
            rel += (f" ({100 * (pred.interval_level or 0):.0f}%: {item.predicted_rel_low:.2f}"
                    f"-{item.predicted_rel_high:.2f}x)")
        config = ", ".join(f"{k}={v}" for k, v in item.config.items())
        print(f"{item.rank:3}. predicted {rel} the best | {config}")
        for line in item.evidence:
            print(f"       {line}")
    print()


# -- reindex / export / stats ---------------------------------------------------------
def _run_reindex(args: argparse.Namespace) -> int:
    from kb.terminal import progress

    kb = _knowledge()
    with progress("reindex", total=kb.stats()["experiences"]) as bar:
        done = kb.reindex(on_batch=bar.advance)
    print(f"indexed {done} experiences")
    return 0


def _add_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=Path, help="file (default: stdout)")


def _run_export(args: argparse.Namespace) -> int:
    from kb.queries import iter_records

    kb = _reader()
    skipped: list[str] = []

    def write_all(out: TextIO) -> None:
        with kb.session() as session:
            for record in iter_records(session, skipped=skipped):
                out.write(record.model_dump_json() + "\n")

    if args.output:  # whole or not at all: an existing file is replaced only once written
        from kb.atomic_file import write_atomically

        write_atomically(args.output, write_all)
    else:
        write_all(sys.stdout)
    if skipped:
        print(f"export: {len(skipped)} unreadable rows skipped (`kernelkb doctor` lists them)",
              file=sys.stderr)
    return 0


def _add_doctor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quarantine", action="store_true",
                        help="move unreadable rows into the quarantinedrow table")
    parser.add_argument("--repair", action="store_true",
                        help="index rows without a vector, drop vectors without a row")
    _json_flag(parser)


def _run_doctor(args: argparse.Namespace) -> int:
    from kb.doctor import bad_rows, quarantine, sql_ids

    kb = _knowledge()
    bad = bad_rows(kb.engine)
    out: dict[str, object] = {"unreadable": [{"id": i, "reason": r} for i, r in bad]}
    if args.quarantine and bad:
        out["quarantined"] = quarantine(kb.engine, bad)
    if kb.index is not None:
        from kb.vector_index import IndexUnusable

        try:
            if args.repair or args.quarantine:
                out["added"], out["removed"] = kb.sync_index()
        except IndexUnusable as exc:  # a folder Chroma cannot open: rebuilt beside it
            if not args.repair:
                raise
            print(f"{exc}: rebuilding", file=sys.stderr)
            out["rebuilt"] = kb.reindex()
        if args.repair:
            with kb.index.writing():
                out["stale_segment_folders_removed"] = kb.index.drop_unreferenced_segments()
        try:
            rows, vectors = sql_ids(kb.engine), kb.index.all_ids()
        except IndexUnusable as exc:
            out["vector_index"] = str(exc)
            out["rows_without_vector"] = len(sql_ids(kb.engine))
        else:
            out["rows_without_vector"] = len(rows - vectors)
            out["vectors_without_row"] = len(vectors - rows)
    if args.json:
        _print_json(out)
    else:
        for i, r in bad:
            print(f"unreadable {i}: {r}")
        for key, value in out.items():
            if key != "unreadable":
                print(f"{key}: {value}")
        print(f"{len(bad)} unreadable rows" + ("" if args.quarantine or not bad else
                                             " (--quarantine moves them aside)"))
    drift = out.get("rows_without_vector", 0) or out.get("vectors_without_row", 0)
    return 1 if (bad and not args.quarantine) or drift else 0


def _run_stats(args: argparse.Namespace) -> int:
    knowledge = _reader()
    _print_json({"store": knowledge.location(), **knowledge.stats()})
    return 0


# -- show -----------------------------------------------------------------------------
def _add_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="an experience id, or a unique prefix of one (as printed)")


def _run_show(args: argparse.Namespace) -> int:
    from kb.queries import AmbiguousId

    try:
        record = _reader().get(args.id)
    except AmbiguousId as err:
        raise UsageError(str(err)) from err
    if record is None:
        raise UsageError(f"no experience {args.id[:80]!r}")
    print(record.model_dump_json(indent=2))
    return 0


for _command in (
    Command("serve", "run the HTTP service (loads seeds into an empty store)",
            _add_serve, _run_serve),
    Command("ingest", "ingest a JSONL file of experience records", _add_ingest, _run_ingest),
    Command("import", "import Kernel Tuner, T4, Triton autotune or Inductor tuning data as "
            "experiences", _add_import,
            _run_import),
    Command("query", "retrieve experiences and print the few-shot block", _add_query, _run_query),
    Command("insights", "what worked: aggregate by edit category", _add_insights,
            _run_insights),
    Command("bootstrap", "what to try first on new hardware", _add_bootstrap, _run_bootstrap),
    Command("reindex", "rebuild the vector index from SQL", _no_arguments, _run_reindex),
    Command("export", "write every experience as JSONL", _add_export, _run_export),
    Command("doctor", "list unreadable rows and index drift; --quarantine, --repair",
            _add_doctor, _run_doctor),
    Command("stats", "counts by op, hardware, verdict (JSON)", _no_arguments, _run_stats),
    Command("show", "one experience as JSON, by id or unique id prefix", _add_show, _run_show),
    Command("seed", "ingest every seeds/*.jsonl", _json_flag, _run_seed),
):
    register(_command)

from kb.mcp import command as _mcp  # noqa: E402 - argparse only (the SDK loads on `mcp`)
from optimizer import command as _optimize  # noqa: E402 - light at import (argparse only)
from optimizer import dispatch_command as _dispatch  # noqa: E402 - argparse only
from optimizer import revalidate_command as _revalidate  # noqa: E402 - argparse only
from optimizer import task_command as _tasks  # noqa: E402 - argparse only


def _run_revalidate(args: argparse.Namespace) -> int:
    status, text = _revalidate.execute(args)
    print(text, file=sys.stderr if status else sys.stdout)
    return status


def _run_tasks(args: argparse.Namespace) -> int:
    status, text = _tasks.execute(args)
    print(text, file=sys.stderr if status == 2 else sys.stdout)
    return status


register(Command("optimize", _optimize.HELP, _optimize.add_arguments, _optimize.run))
register(Command("revalidate", _revalidate.HELP, _revalidate.add_arguments, _run_revalidate))
register(Command("tasks", _tasks.HELP, _tasks.add_arguments, _run_tasks))


def _run_dispatch(args: argparse.Namespace) -> int:
    status, text = _dispatch.execute(args)
    print(text, file=sys.stderr if status else sys.stdout)
    return status


register(Command("dispatch", _dispatch.HELP, _dispatch.add_arguments, _run_dispatch))
register(Command("mcp", _mcp.HELP, _mcp.add_arguments, _mcp.run))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelkb", description="KernelKB: an experience base for agent-driven Triton "
        "kernel optimization. Store, query and serve what worked (serve, query, insights, "
        "bootstrap); optimize a kernel (optimize); give coding agents the tools (mcp).")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_arguments(sub.add_parser(command.name, help=command.help))
    return parser


def user_error(err: BaseException) -> str | None:
    """The one-line message for an error the user can fix (a name, a value, a flag), or
    None for a fault of the program, which keeps its traceback."""
    from pydantic import ValidationError

    from retrieval.names import UnknownName

    if isinstance(err, UsageError | UnknownName):
        return str(err)
    if isinstance(err, ValidationError):  # a flag's value outside the record's bounds
        def where(loc: tuple[Any, ...]) -> str:
            if err.title == "Settings":  # an environment variable's value
                return "KERNELKB_" + "_".join(str(p) for p in loc).upper()
            return ".".join(str(p) for p in loc) or "value"

        return "; ".join(f"{where(e['loc'])}: {e['msg']}" for e in err.errors())
    if isinstance(err, KeyError) and str(err.args[0] if err.args else "").startswith(
            "unknown task"):
        return str(err.args[0])
    return _environment_error(err)


def _environment_error(err: BaseException) -> str | None:
    """One line for a store, file or task folder this machine cannot use as set up (a
    corrupt or read-only database, a bad URL, a full disk, a broken task file)."""
    from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError

    from kb.vector_index import IndexUnusable
    from kernels.validation import TaskDefinitionError

    if isinstance(err, TaskDefinitionError | IndexUnusable):
        return str(err)
    if isinstance(err, ArgumentError | NoSuchModuleError):
        return f"KERNELKB_DATABASE_URL: {err}"
    if isinstance(err, DatabaseError):  # the driver's reason, not the statement's values
        reason = str(getattr(err, "orig", None) or err).splitlines()[0]
        return f"the database cannot be used: {reason}"
    if isinstance(err, OSError) and err.strerror:
        where = f": {err.filename}" if err.filename else ""
        return f"{err.strerror}{where}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    from kb.terminal import configure_logging

    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)  # bars on a terminal only; no third-party INFO noise
    try:
        _use_tasks_dirs(args)
    except ValueError as err:  # a tasks folder that is not one
        print(f"kernelkb: error: {user_error(err) or err}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[args.command].run(args)
    except BrokenPipeError:  # `kernelkb export | head -1`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"kernelkb {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        message = user_error(err)
        if message is None:
            raise
        print(f"kernelkb {args.command}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
