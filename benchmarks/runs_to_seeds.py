"""Add the experiences of optimizer runs to the shipped seeds (seeds/runs_h200.jsonl).

Why: an H200 run writes each round into its folder's journal.jsonl (the host is lent: the
journal is what comes back); the seeds are how those rounds reach every fresh store. Ids
are content hashes, so a record already in the seed file is kept as it is and a journal
line is added once, in the journal's order. Records whose run folder has no journal any
more (the early runs kept only part of theirs) stay in the file; ``--check`` lists them.

A timed round whose verdict came from a single figure (no interleaved comparison: the rule
before comparisons) is shipped without its timing (``ExperienceRecord.without_timing``):
its edit stays an example, its figure counts nowhere. A record whose code the judge now
refuses from its source (optimizer/sandbox/source_rules.py: e.g. a split-K reduction done
in PyTorch) is not shipped at all: it would teach the next agent an edit the judge
refuses. Every write applies both to the whole file, so naming no folder rewrites the
file by the rules.

    python benchmarks/runs_to_seeds.py benchmarks/runs/<run id> [...]   # append new rounds
    python benchmarks/runs_to_seeds.py --seed-file seeds/revalidate_h200.jsonl   # the rule
    python benchmarks/runs_to_seeds.py --check                          # what has no journal
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.discovery import all_tasks
from kernelkb.optimizer.sandbox import source_rules

ROOT = Path(__file__).resolve().parents[1]
SEED_FILE = ROOT / "seeds" / "runs_h200.jsonl"
RUNS = ROOT / "benchmarks" / "runs"


def journal_records(folder: Path) -> list[str]:
    """The journal's lines that validate as records, as written (the seed keeps them so)."""
    path = folder / "journal.jsonl"
    if not path.is_file():
        raise SystemExit(f"{folder}: no journal.jsonl")
    lines = [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    for line in lines:
        ExperienceRecord.model_validate_json(line)  # a bad line stops the run
    return lines


def _ids(lines: list[str]) -> list[str]:
    return [json.loads(line)["id"] for line in lines]


SINGLE_FIGURE = ("its GPU time was one figure against its parent's, with no interval "
                 "(measured before interleaved comparisons)")


def shipped(line: str) -> str | None:
    """The line as the seeds ship it: a single-figure record without its timing; None for
    a record whose code the judge refuses from the source."""
    record = ExperienceRecord.model_validate_json(line)
    if record.edit.child_source and source_rules.refused(
            record.edit.child_source, all_tasks().get(record.task.task_id)):
        return None
    if not record.single_figure:
        return line
    return record.without_timing(SINGLE_FIGURE).model_dump_json(exclude_none=True)


def _kept(lines) -> list[str]:
    return [x for x in map(shipped, lines) if x is not None]


def append(folders: list[Path], seed_file: Path = SEED_FILE) -> int:
    """Append the folders' journal records missing from the seed file (the file's and the
    journals' records as ``shipped`` makes them); returns how many were added."""
    lines = [line for line in seed_file.read_text(encoding="utf-8").split("\n") if line.strip()]
    kept = list(dict.fromkeys(_kept(lines)))
    known = set(_ids(kept))
    added = []
    for folder in folders:
        for line in _kept(journal_records(folder)):
            record_id = json.loads(line)["id"]
            if record_id not in known:
                known.add(record_id)
                added.append(line)
    seed_file.write_text("\n".join(kept + added) + "\n", encoding="utf-8")
    return len(added)


def without_journal(seed_file: Path = SEED_FILE, runs: Path = RUNS) -> Counter[str]:
    """Seed records that no run folder's journal holds, counted by run id."""
    journaled = {i for path in runs.glob("*/journal.jsonl")
                 for i in _ids(_kept(x for x in path.read_text().split("\n") if x.strip()))}
    lines = [x for x in seed_file.read_text(encoding="utf-8").split("\n") if x.strip()]
    return Counter(json.loads(x)["run_id"] for x in lines
                   if json.loads(x)["id"] not in journaled)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="run folders with a journal")
    parser.add_argument("--check", action="store_true", help="list records with no journal")
    parser.add_argument("--seed-file", type=Path, default=SEED_FILE)
    args = parser.parse_args(argv)
    if args.check:
        missing = without_journal()
        for run_id, count in sorted(missing.items()):
            print(f"{run_id}: {count} records with no journal line")
        print(f"{sum(missing.values())} of the seed file's records have no journal")
        return 0
    added = append(args.folders, args.seed_file)
    print(f"{args.seed_file}: {added} records added, single figures shipped untimed, "
          "code the judge refuses dropped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
