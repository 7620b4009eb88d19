"""Duplicates by content, not path: a copied, renamed or gzipped file, the same Inductor log
under another name, a cache closed after its open copy was imported, add no experience;
a measurement made again (another figure) does. A real store (SQLite + Chroma + MiniLM),
through ``load_file`` as the CLI calls it and through the CLI itself."""

from __future__ import annotations

import gzip
import json
import shutil
from functools import partial
from pathlib import Path

import pytest

from kernelkb.cli import main as cli
from kernelkb.kb.importers import iter_files
from kernelkb.kb.importers.load import FileImport, load_file
from kernelkb.kb.importers.twins import stored_twins
from kernelkb.service import LocalKnowledge

DATA = Path(__file__).resolve().parents[1] / "data"
OPEN = DATA / "kernel_tuner" / "open_cache_A6000.json"
LOG = DATA / "tuner_files" / "inductor_autotune.log"
AUTOTUNE = sorted((DATA / "tuner_files" / "triton_cache").glob("*.autotune.json"))[0]


def imported(knowledge: LocalKnowledge, path: Path, **options: str) -> list[FileImport]:
    twins = partial(stored_twins, knowledge.session)
    return [load_file(source, items, knowledge.ingest, twins=twins)
            for source, items in iter_files(path, **options)]


def counts(results: list[FileImport]) -> tuple[int, int, int]:
    return (sum(r.accepted for r in results), sum(r.duplicates for r in results),
            sum(r.rejected for r in results))


def closed(text: str) -> str:
    return text.rstrip().removesuffix(",") + "}\n}"


def test_copies_renames_and_gzip_of_a_cache_add_nothing(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    first = tmp_path / "a" / "conv_A6000.json"
    first.parent.mkdir()
    first.write_text(closed(OPEN.read_text()))
    assert counts(imported(knowledge, first)) == (4, 0, 0)
    copies = tmp_path / "copies"
    (copies / "deep" / "er").mkdir(parents=True)
    shutil.copy(first, copies / "deep" / "er" / "conv_A6000.json")  # copied elsewhere
    shutil.copy(first, copies / "renamed.json")  # renamed
    (copies / "zipped.json.gz").write_bytes(gzip.compress(first.read_bytes()))
    (copies / "open.json").write_text(OPEN.read_text())  # the open cache it came from
    results = imported(knowledge, copies)
    assert len(results) == 4 and counts(results) == (0, 16, 0)
    assert knowledge.stats()["experiences"] == 4


def test_a_cache_that_grew_adds_only_its_new_measurements(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    text = OPEN.read_text()
    cut = text[: text.index('\n"128,1"')]  # killed before the fourth configuration
    early = tmp_path / "early" / "conv.json"
    early.parent.mkdir()
    early.write_text(cut)
    assert counts(imported(knowledge, early)) == (3, 0, 0)
    later = tmp_path / "later" / "conv.json"
    later.parent.mkdir()
    data = json.loads(closed(text))
    data["cache"]["32,1"]["time"] = 1.4  # measured again: another figure, its own record
    data["cache"]["32,1"]["times"] = [1.4, 1.4, 1.4]
    later.write_text(json.dumps(data))
    assert counts(imported(knowledge, later)) == (2, 2, 0)
    assert knowledge.stats()["experiences"] == 5


def test_the_same_log_or_autotune_file_under_another_name(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(LOG, logs / "inductor.log")
    shutil.copy(LOG, logs / "train_stderr.txt")
    shutil.copy(AUTOTUNE, logs / "matmul_kernel.autotune.json")
    shutil.copy(AUTOTUNE, logs / f"ABCDEFGHIJKL_{AUTOTUNE.name.split('_', 1)[1]}")
    results = {r.source: r for r in imported(knowledge, logs, gpu="h200")}
    first_log, second_log = results["logs/inductor.log"], results["logs/train_stderr.txt"]
    assert first_log.accepted > 0 and second_log.accepted == 0
    assert second_log.duplicates == first_log.accepted
    tuned = [r for name, r in results.items() if name.endswith(".autotune.json")]
    assert sorted(r.accepted for r in tuned)[0] == 0 and sorted(r.accepted for r in tuned)[1] > 0
    total = first_log.accepted + max(r.accepted for r in tuned)
    assert knowledge.stats()["experiences"] == total


def test_the_cli_counts_a_copy_as_duplicates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KERNELKB_SEEDS_DIR", str(tmp_path / "none"))
    shutil.copy(OPEN, tmp_path / "copy_of_it.json")
    assert cli.main(["import", str(OPEN)]) == 0
    capsys.readouterr()
    assert cli.main(["import", str(tmp_path / "copy_of_it.json"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["accepted"], report["duplicates"]) == (0, 4)
