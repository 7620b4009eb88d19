"""Write ``run.json`` (optimizer/run_file.py) into run folders made before the loop wrote
one, from their report.md: what stopped the run and its sweep and peer tables.

The pages read run.json only; the H200 run folders under benchmarks/runs were written
before it existed. Usage: ``python benchmarks/run_files.py [benchmarks/runs]`` (a folder
that has a run.json already is left alone).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from kernelkb.optimizer.run_file import FILE

_STOPPED = re.compile(r"stopped by \*\*([\w-]+)\*\*")
_RUN_ID = re.compile(r"^- run id: `([^`]+)`", re.M)
_FIRST_SECTION = re.compile(r"^(# Regime |## Shape sweep|## Against the peers)", re.M)
_REGIME_ROUNDS = re.compile(r"^### Rounds\n.*?(?=^### |^# |\Z)", re.M | re.S)


def run_file_from_report(folder: Path) -> dict | None:
    """run.json's fields from ``folder/report.md``, or None without a report."""
    report = folder / "report.md"
    if not report.is_file():
        return None
    text = report.read_text(encoding="utf-8", errors="replace")
    stopped, run_id = _STOPPED.search(text), _RUN_ID.search(text)
    first = _FIRST_SECTION.search(text)
    body = _REGIME_ROUNDS.sub("", text[first.start():]) if first else ""
    sections = "\n".join(line for line in body.splitlines() if not line.startswith("!["))
    return {"run_id": run_id.group(1) if run_id else folder.name,
            "task": folder.name.split("-")[0], "state": "finished", "regime": None,
            "rounds": None, "candidate": None,
            "stop_reason": stopped.group(1) if stopped else None,
            "sections": sections.strip(), "updated_at": None,
            "note": "written from report.md by benchmarks/run_files.py"}


def main(root: Path) -> int:
    written = 0
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if (folder / FILE).exists():
            continue
        fields = run_file_from_report(folder)
        if fields is not None:
            (folder / FILE).write_text(json.dumps(fields, indent=1) + "\n")
            written += 1
    print(f"{written} run files written under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/runs")))
