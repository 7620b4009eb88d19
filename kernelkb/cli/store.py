"""The store's commands: ingest, seed, import, export, reindex, doctor, stats, show."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from kernelkb.cli.common import (
    Command,
    UsageError,
    json_flag,
    knowledge,
    no_arguments,
    not_a_readable_file,
    print_json,
    print_report,
    quiet_batches,
    reader,
)
from kernelkb.kb.importers.registry import names


def _add_ingest(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="JSONL file, one experience record per line")
    json_flag(parser)


def _run_ingest(args: argparse.Namespace) -> int:
    from kernelkb.kb.seeds import read_jsonl

    problem = not_a_readable_file(args.file)
    if problem:
        print(f"kernelkb ingest: {args.file}: {problem}", file=sys.stderr)
        return 2
    from kernelkb.kb.terminal import progress

    lines, numbers = read_jsonl(args.file, with_line_numbers=True)
    quiet_batches(args)  # the summary below says it
    kb = knowledge()
    kb.sync_index()  # repair what an earlier, interrupted ingest left
    with progress(f"ingest {args.file.name}", total=len(lines)) as bar:
        report = kb.ingest(lines, on_batch=bar.advance)
    print_report(str(args.file), report, args.json, numbers)
    return 1 if report.rejected else 0


def _run_seed(args: argparse.Namespace) -> int:
    """A line before the store and the model open, then each file's line as it is stored:
    a fresh install was silent for 28 s, then printed nine lines at once."""
    from kernelkb.kb.seeds import count_records, seed_files
    from kernelkb.kb.settings import Settings
    from kernelkb.kb.terminal import progress

    quiet_batches(args)  # the per-file lines below say it
    seeds_dir = Settings().seeds_dir
    files = seed_files(seeds_dir)
    if not files:
        print(f"kernelkb seed: no *.jsonl seed files in {seeds_dir}", file=sys.stderr)
        return 1
    print(f"loading {len(files)} seed files ({count_records(files)} records) from "
          f"{seeds_dir}: opening the store and the embedding model, then a line per file "
          "as it is stored", file=sys.stderr, flush=True)
    with progress("seed: opening the store and the embedding model") as bar:
        store = knowledge()

        def done(name: str, report: object) -> None:
            print_report(name, report, args.json)
            sys.stdout.flush()
            bar.update(description=f"seed: stored {name}")

        reports = store.seed(on_file=done)
    return 1 if any(r.rejected for r in reports.values()) else 0


def _add_import(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", type=Path, nargs="+", metavar="PATH",
                        help="files or folders (*.json, *.json.gz, *.log, *.txt are read; "
                             "see docs/importing.md)")
    parser.add_argument("--format", dest="fmt",
                        choices=names(),
                        default="auto",
                        help="auto (default): sniff each file; or only files of that format")
    parser.add_argument("--gpu", help="GPU of files that name none (or one the table lacks); "
                                      "needed for Triton autotune caches and Inductor logs")
    parser.add_argument("--license", help="licence of the data (default: the LICENSE file "
                                          "in its folder or above, else 'unknown')")
    parser.add_argument("--op", "--kernel", dest="kernel", metavar="NAME",
                        help="op (kernel) name where a file names none (T4); for a "
                                         "Triton autotune cache, the name to use instead of "
                                         "its file's (matmul maps it onto the matmul task); "
                                         "--kernel: deprecated, its older name")
    parser.add_argument("--source", help="data set name for record sources (default: the "
                                         "folder holding the LICENSE file, else PATH)")
    json_flag(parser)


def _run_import(args: argparse.Namespace) -> int:
    import time

    from kernelkb.cli.import_report import progress_line, skipped_counts, summary_lines
    from kernelkb.kb.importers import iter_files
    from kernelkb.kb.importers.load import load_file
    from kernelkb.kb.limits import SHORT
    from kernelkb.kb.terminal import progress

    for flag, value in (("--license", args.license), ("--source", args.source),
                        ("--op", args.kernel)):
        if value is not None and (len(value) > SHORT or not value.strip()):
            raise UsageError(f"{flag}: 1 to {SHORT} characters (it goes into every record)")
    quiet_batches(args)  # the per-file lines below say it
    kb = knowledge()
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
                    r = load_file(source, items, kb.ingest, progress=shown,
                                  twins=kb.stored_twins)
                    line = progress_line(r)
                    if line:
                        print(line, file=sys.stderr, flush=True)
                    results.append(r)
    except (ValueError, FileNotFoundError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    total = {k: sum(getattr(r, k) for r in results)
             for k in ("accepted", "duplicates", "rejected")}
    skipped = skipped_counts(results)
    if args.json:
        print_json({"files": [r.as_dict() for r in results], **total, "skipped": skipped,
                    "seconds": round(seconds, 2)})
    else:
        for line in summary_lines(results):
            print(line)
        records = sum(r.seen for r in results)
        read = len(results) - sum(skipped.values())
        print(f"total: {total['accepted']} accepted, {total['duplicates']} duplicate, "
              f"{total['rejected']} rejected from {read} file{'s' if read != 1 else ''}"
              + (f" ({sum(skipped.values())} skipped)" if skipped else "")
              + f" in {seconds:.1f} s ({records / seconds if seconds else 0:.0f} records/s)")
    return 1 if total["rejected"] else 0


def _run_reindex(args: argparse.Namespace) -> int:
    from kernelkb.kb.terminal import progress

    kb = knowledge()
    with progress("reindex", total=kb.stats()["experiences"]) as bar:
        done = kb.reindex(on_batch=bar.advance)
    print(f"indexed {done} experiences")
    return 0


def _add_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=Path, help="file (default: stdout)")


def _run_export(args: argparse.Namespace) -> int:
    kb = reader()
    skipped: list[str] = []

    def write_all(out: TextIO) -> None:
        for record in kb.records(skipped=skipped):
            out.write(record.model_dump_json() + "\n")

    if args.output:  # whole or not at all: an existing file is replaced only once written
        from kernelkb.kb.atomic_file import write_atomically

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
    json_flag(parser)


def _run_doctor(args: argparse.Namespace) -> int:
    kb = knowledge()
    bad = kb.unreadable_rows()
    out: dict[str, object] = {"unreadable": [{"id": i, "reason": r} for i, r in bad]}
    if args.quarantine and bad:
        out["quarantined"] = kb.quarantine(bad)
    if kb.settings.vectors:
        from kernelkb.kb.vector_index import IndexUnusable

        try:
            if args.repair or args.quarantine:
                out["added"], out["removed"] = kb.sync_index()
        except IndexUnusable as exc:  # a folder Chroma cannot open: rebuilt beside it
            if not args.repair:
                raise
            print(f"{exc}: rebuilding", file=sys.stderr)
            out["rebuilt"] = kb.reindex()
        if args.repair:
            out["stale_segment_folders_removed"] = kb.drop_stale_segments()
        try:
            out["rows_without_vector"], out["vectors_without_row"] = kb.index_drift()
        except IndexUnusable as exc:
            out["vector_index"] = str(exc)
            out["rows_without_vector"] = kb.count()
    if args.json:
        print_json(out)
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
    knowledge = reader()
    print_json({"store": knowledge.location(), **knowledge.stats()})
    return 0


def _add_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="an experience id, or a unique prefix of one (as printed)")


def _run_show(args: argparse.Namespace) -> int:
    from kernelkb.kb.queries import AmbiguousId

    try:
        record = reader().get(args.id)
    except AmbiguousId as err:
        raise UsageError(str(err)) from err
    if record is None:
        raise UsageError(f"no experience {args.id[:80]!r}")
    print(record.model_dump_json(indent=2))
    return 0


COMMANDS = (
    Command("ingest", "ingest a JSONL file of experience records", _add_ingest, _run_ingest),
    Command("import", "import Kernel Tuner, T4, Triton autotune or Inductor tuning data as "
            "experiences", _add_import, _run_import),
    Command("reindex", "rebuild the vector index from SQL", no_arguments, _run_reindex),
    Command("export", "write every experience as JSONL", _add_export, _run_export),
    Command("doctor", "list unreadable rows and index drift; --quarantine, --repair",
            _add_doctor, _run_doctor),
    Command("stats", "counts by op, hardware, verdict (JSON)", no_arguments, _run_stats),
    Command("show", "one experience as JSON, by id or unique id prefix", _add_show, _run_show),
    Command("seed", "ingest the shipped seed files (kernelkb.seeds)", json_flag, _run_seed),
)
