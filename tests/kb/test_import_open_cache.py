"""A Kernel Tuner cache its run never closed keeps every complete measurement.

Kernel Tuner writes the cache as it tunes and closes the brackets only when
``tune_kernel`` returns; a killed run leaves the file open (tests/data/kernel_tuner/, written
by Kernel Tuner's own cache functions). Imported into a real store (SQLite + Chroma +
MiniLM)."""

from __future__ import annotations

import gzip
from pathlib import Path

from kernelkb.cli import main as cli
from kernelkb.kb.importers import iter_files
from kernelkb.kb.importers.load import FileImport, load_file
from kernelkb.kb.queries import iter_records
from kernelkb.service import LocalKnowledge

OPEN = Path(__file__).resolve().parents[1] / "data" / "kernel_tuner" / "open_cache_A6000.json"


def _import(knowledge: LocalKnowledge, path: Path) -> FileImport:
    [(source, items)] = list(iter_files(path))
    return load_file(source, items, knowledge.ingest)


def test_an_open_cache_keeps_every_measurement_kernel_tuner_reads(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    text = OPEN.read_text()
    assert text.rstrip().endswith("},")  # as the killed run left it
    copy = tmp_path / "a" / "conv.json"
    copy.parent.mkdir()
    copy.write_text(text)
    result = _import(knowledge, copy)
    assert (result.accepted, result.rejected) == (4, 0)
    assert any("an open Kernel Tuner cache" in n and "4 complete measurements recovered" in n
               for n in result.notes), result.notes
    with knowledge.session() as session:
        times = sorted(r.feedback.time_ms or 0.0 for r in iter_records(session))
    assert times == [0.0, 1.25, 1.5078, 2.0312]  # the failed one has no time


def test_an_entry_cut_mid_write_is_dropped_not_read_short(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    text = OPEN.read_text().rstrip()
    cut = tmp_path / "b" / "conv.json.gz"
    cut.parent.mkdir()
    cut.write_bytes(gzip.compress(text[: text.rindex('"time": 1.25') + len('"time": 1.2')]
                                  .encode()))
    result = _import(knowledge, cut)
    assert (result.accepted, result.rejected) == (3, 0)
    assert any("3 complete measurements recovered; the last entry, cut off mid-write, "
               "dropped" in n for n in result.notes), result.notes
    with knowledge.session() as session:
        times = {r.feedback.time_ms for r in iter_records(session)}
    assert 1.2 not in times and 1.25 not in times


def test_a_run_killed_before_its_first_measurement_and_a_damaged_closed_file(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    text = OPEN.read_text()
    header = tmp_path / "c" / "conv.json"
    header.parent.mkdir()
    header.write_text(text[: text.index('"cache": {') + len('"cache": {')])
    empty = _import(knowledge, header)
    assert (empty.accepted, empty.rejected) == (0, 0)
    assert any("0 complete measurements recovered" in n for n in empty.notes), empty.notes

    closed = text.rstrip().removesuffix(",") + "}\n}"
    damaged = tmp_path / "d" / "conv.json"
    damaged.parent.mkdir()
    damaged.write_text(closed.replace('"32,1": {', '"32,1" {'))  # broken inside, closed
    result = _import(knowledge, damaged)
    assert (result.accepted, result.rejected) == (0, 1)
    assert "invalid JSON" in result.problems[0]


def test_the_cli_says_how_many_it_recovered(tmp_path: Path, monkeypatch,
                                            capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KERNELKB_SEEDS_DIR", str(tmp_path / "none"))
    assert cli.main(["import", str(OPEN)]) == 0
    out = capsys.readouterr().out
    assert "open_cache_A6000.json: 4 accepted, 0 duplicate, 0 rejected" in out
    assert "4 complete measurements recovered" in out
