"""Importing Kernel Tuner caches and T4 results into a real store (SQLite + Chroma +
MiniLM). The files are built here, small, in the two formats; only the last test reads
the shared benchmark data, and only if it is there."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kernelkb.cli import main as cli
from kernelkb.kb.importers import ImportNote, ImportRejection, iter_files, iter_import
from kernelkb.kb.importers.load import FileImport, load_file
from kernelkb.kb.queries import iter_records
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.shared import gpus
from kernelkb.service import LocalKnowledge

STAMP = "2024-01-02 03:04:05.000001+00:00"
TIMES = [1.9, 2.0, 2.1, 2.4]


def entry(bx: int, tx: int, time: Any, **extra: Any) -> dict[str, Any]:
    data = {"block_size_x": bx, "tile_size_x": tx, "time": time, "timestamp": STAMP}
    if isinstance(time, float) and math.isfinite(time) and time > 0:
        data |= {"times": TIMES, "compile_time": 300.0, "GFLOP/s": 1500.0}
    return data | extra


def kt_cache(entries: list[dict[str, Any]], device: str = "NVIDIA RTX A6000",
             kernel: str = "convolution_kernel") -> dict[str, Any]:
    return {
        "device_name": device, "kernel_name": kernel, "problem_size": [4096, 4096],
        "tune_params_keys": ["block_size_x", "tile_size_x"],
        "tune_params": {"block_size_x": [16, 32, 64], "tile_size_x": [1, 2]},
        "objective": "time",
        "cache": {f"{e['block_size_x']},{e.get('tile_size_x')}": e for e in entries},
    }


def t4_results(rows: list[tuple[int, int, Any, str]]) -> dict[str, Any]:
    """rows: (block_size_x, tile_size_x, time or failure label, invalidity)."""
    results = []
    for bx, tx, value, invalidity in rows:
        results.append({
            "timestamp": STAMP, "configuration": {"block_size_x": bx, "tile_size_x": tx},
            "times": {"compilation": 300.0, **({"runtimes": TIMES}
                                               if invalidity == "correct" else {})},
            "invalidity": invalidity, "correctness": int(invalidity == "correct"),
            "measurements": [{"name": "time", "value": value, "unit": ""}],
            "objectives": ["time"],
        })
    return {"schema_version": "1.0.0", "metadata": {"timeunit": "miliseconds"},
            "results": results}


def t1_spec(kernel: str = "convolution_kernel") -> dict[str, Any]:
    return {"General": {"BenchmarkName": "conv"},
            "ConfigurationSpace": {"TuningParameters": []},
            "KernelSpecification": {"KernelName": kernel, "ProblemSize": [4096, 4096]}}


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data).encode()  # NaN / Infinity become the JSON tokens Python reads
    path.write_bytes(gzip.compress(text) if path.name.endswith(".gz") else text)
    return path


GOOD = [entry(16, 1, 2.0), entry(32, 2, "CompilationFailedConfig"),
        entry(64, 1, "RuntimeFailedConfig")]


@pytest.fixture
def hub(tmp_path: Path) -> Path:
    """A data set folder with an MIT LICENSE and one gzipped Kernel Tuner cache."""
    root = tmp_path / "hub"
    write(root / "conv" / "A6000.json.gz", kt_cache(GOOD))
    (root / "LICENSE").write_text("MIT License\n\nCopyright (c) 2025 Someone\n")
    return root


def run(knowledge: LocalKnowledge, path: Path, **options: Any) -> dict[str, FileImport]:
    return {source: load_file(source, items, knowledge.ingest)
            for source, items in iter_files(path, **options)}


def stored(knowledge: LocalKnowledge) -> dict[str, ExperienceRecord]:
    """Records by "source:iteration"."""
    with knowledge.session() as session:
        return {f"{r.provenance.source}:{r.iteration}": r for r in iter_records(session)}


def test_kernel_tuner_configurations_become_experiences_with_provenance(
        knowledge: LocalKnowledge, hub: Path) -> None:
    results = run(knowledge, hub)
    source = "hub/conv/A6000.json.gz"
    assert (results[source].accepted, results[source].rejected) == (3, 0)
    records = stored(knowledge)
    ok, compile_failed, run_failed = (records[f"{source}:{i}"] for i in range(3))

    assert ok.task.op_type == ok.task.task_id == "convolution"
    assert (ok.task.dtype, ok.task.shape_set) == ("unspecified", "problem_size=4096x4096")
    a6000 = gpus.lookup("NVIDIA RTX A6000")
    assert a6000 is not None
    assert ok.env.model_dump(include=set(a6000.to_env_fields())) == a6000.to_env_fields()
    assert (ok.env.arch, ok.env.vendor, ok.env.triton_version) == ("sm_86", "nvidia", "none")
    assert ok.edit.config == {"block_size_x": 16, "tile_size_x": 1}
    assert ok.edit.categories == ["tiling"] and ok.edit.parent_hash is None
    assert "Kernel Tuner" in ok.edit.summary and "NVIDIA RTX A6000" in ok.edit.summary
    fb = ok.feedback
    assert (fb.stage, fb.timing_available, fb.time_ms) == ("performance", True, 2.0)
    q1, q3 = np.percentile(TIMES, [25, 75])
    assert fb.timings[0].median_ms == pytest.approx(float(np.median(TIMES)))
    assert fb.timings[0].iqr_ms == pytest.approx(q3 - q1)
    assert fb.timings[0].shape == "problem_size=4096x4096"
    assert fb.achieved_tflops == pytest.approx(1.5)
    assert ok.verdict.value == "neutral" and ok.evidence == "measured"

    prov = ok.provenance
    assert (prov.agent, prov.round_kind, prov.source) == ("kernel_tuner", "sweep", source)
    assert (prov.license, prov.device) == ("MIT", "NVIDIA RTX A6000")
    assert prov.date is not None and prov.date.isoformat() == "2024-01-02T03:04:05.000001+00:00"
    assert ok.created_at == prov.date
    sha8 = hashlib.sha256((hub / "conv" / "A6000.json.gz").read_bytes()).hexdigest()[:8]
    assert ok.run_id == f"import:convolution:NVIDIA RTX A6000:{sha8}"

    assert (compile_failed.feedback.stage, compile_failed.feedback.error_kind) == \
        ("compile", "compile_error")
    assert compile_failed.feedback.error_message == "CompilationFailedConfig"
    assert (run_failed.feedback.stage, run_failed.feedback.error_kind) == ("run", "runtime_error")
    assert {compile_failed.verdict.value, run_failed.verdict.value} == {"failed"}
    assert compile_failed.edit.child_hash != ok.edit.child_hash
    assert knowledge.stats()["hardware"] == 1


def test_a_second_import_is_all_duplicates(knowledge: LocalKnowledge, hub: Path) -> None:
    first = run(knowledge, hub)["hub/conv/A6000.json.gz"]
    second = run(knowledge, hub / "conv")["hub/conv/A6000.json.gz"]  # same name from below
    assert (first.accepted, second.accepted, second.duplicates) == (3, 0, 3)


def test_bad_records_name_file_and_position_and_the_rest_are_kept(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    bad = [entry(16, 1, 2.0), entry(16, 2, float("nan")), entry(32, 1, float("inf")),
           entry(32, 2, -1.0), {"block_size_x": 64, "time": 1.0}, entry(64, 2, None),
           entry(48, 1, 3.0, times=[3.0, float("nan")])]
    data = kt_cache(bad)
    data["cache"]["128,1"] = "not an entry"
    write(tmp_path / "data" / "A6000.json", data)
    result = run(knowledge, tmp_path / "data")["data/A6000.json"]
    assert (result.accepted, result.rejected) == (1, 7)
    text = "\n".join(result.problems)
    for line in ("data/A6000.json:16,2: feedback.time_ms:",
                 "data/A6000.json:32,1: feedback.time_ms: not a finite number: inf",
                 "data/A6000.json:32,2: feedback.time_ms: Input should be greater than or equal",
                 "data/A6000.json:64,None: edit.config: parameters missing: ['tile_size_x']",
                 "data/A6000.json:64,2: feedback.time_ms: no `time`",
                 "data/A6000.json:48,1: feedback.timings.0.median_ms:",
                 "data/A6000.json:128,1: <record>: expected an object"):
        assert line in text, text
    assert [r.edit.config for r in stored(knowledge).values()] == \
        [{"block_size_x": 16, "tile_size_x": 1}]


def test_a_gpu_the_table_lacks_is_kept_under_its_own_name_with_its_architecture(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    """A part missing from the facts table once lost the whole file ("unknown GPU"):
    now its measurements come in under the name the file gives, with the architecture
    the name implies and no other facts; --gpu still lends a known part's facts."""
    write(tmp_path / "d" / "v100.json", kt_cache(GOOD, device="Quadro GV100"))
    result = run(knowledge, tmp_path / "d")["d/v100.json"]
    assert (result.accepted, result.rejected) == (3, 0), result.problems
    assert "not in the facts table: imported under that name, architecture sm_70" \
        in result.notes[0]
    kept = next(iter(stored(knowledge).values()))
    assert (kept.env.gpu_name, kept.env.arch, kept.env.vendor, kept.env.sm_count) == \
        ("Quadro GV100", "sm_70", "nvidia", None)
    assert knowledge.insights(gpu_name="Quadro GV100").sweep_measurements == 3

    result = run(knowledge, tmp_path / "d", gpu="NVIDIA A100-PCIE-40GB")["d/v100.json"]
    assert result.accepted == 3 and "not in the facts table" in result.notes[0]
    record = next(r for r in stored(knowledge).values() if r.env.gpu_name != kept.env.gpu_name)
    assert record.env.gpu_name == "NVIDIA A100-PCIE-40GB"
    assert record.provenance.device == "Quadro GV100"
    with pytest.raises(ValueError, match="unknown GPU 'GTX 9999'"):
        next(iter_import(tmp_path / "d", gpu="GTX 9999"))
    write(tmp_path / "e" / "cache.json", kt_cache(GOOD, device=""))  # --gpu the table lacks
    result = run(knowledge, tmp_path / "e", gpu="NVIDIA RTX PRO 6000 Blackwell")["e/cache.json"]
    assert result.accepted == 3, result.problems
    assert ("NVIDIA RTX PRO 6000 Blackwell", "sm_120") in \
        {(r.env.gpu_name, r.env.arch) for r in stored(knowledge).values()}


def test_an_empty_device_name_is_read_from_the_file_name(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    write(tmp_path / "d" / "MI250X.json.gz", kt_cache(GOOD, device=""))
    write(tmp_path / "d" / "mystery.json", kt_cache(GOOD, device=""))
    results = run(knowledge, tmp_path / "d")
    assert results["d/MI250X.json.gz"].accepted == 3
    assert "file name 'MI250X.json.gz'" in results["d/MI250X.json.gz"].notes[0]
    assert "pass --gpu" in results["d/mystery.json"].problems[0]
    record = stored(knowledge)["d/MI250X.json.gz:0"]
    assert (record.env.gpu_name, record.env.arch, record.env.vendor) == \
        ("AMD Instinct MI250X", "gfx90a", "amd")
    assert record.provenance.device is None and record.provenance.license == "unknown"


def test_a_folder_of_both_formats_and_other_json(knowledge: LocalKnowledge,
                                                 tmp_path: Path) -> None:
    folder = tmp_path / "set" / "conv"
    write(folder / "A100.json.gz", kt_cache(GOOD, device="NVIDIA A100-PCIE-40GB"))
    write(folder / "A100_T4.json.gz", t4_results([
        (16, 1, 2.0, "correct"), (32, 2, "CompilationFailedConfig", "compile"),
        (64, 1, "RuntimeFailedConfig", "runtime")]))
    write(folder / "T1_search_space.json", t1_spec())
    write(folder / "notes.json", {"hello": 1})
    results = run(knowledge, tmp_path / "set", license="CC-BY-4.0")
    assert results["set/conv/T1_search_space.json"].notes == [
        "skipped: not a Kernel Tuner cache or T4 results file "
        "(top level: General, ConfigurationSpace, KernelSpecification)"]
    assert "skipped" in results["set/conv/notes.json"].notes[0]
    assert results["set/conv/A100_T4.json.gz"].accepted == 3
    # the T4 file names only the family; the cache beside it names the part
    assert "NVIDIA A100-PCIE-40GB" in results["set/conv/A100_T4.json.gz"].notes[0]

    records = stored(knowledge)
    t4_ok, kt_ok = records["set/conv/A100_T4.json.gz:0"], records["set/conv/A100.json.gz:0"]
    assert (t4_ok.provenance.agent, t4_ok.provenance.license) == ("t4", "CC-BY-4.0")
    assert t4_ok.task == kt_ok.task and t4_ok.env == kt_ok.env
    assert t4_ok.edit.child_hash == kt_ok.edit.child_hash  # one configuration, two files
    assert t4_ok.feedback.time_ms == kt_ok.feedback.time_ms
    assert t4_ok.feedback.timings == kt_ok.feedback.timings
    failed = records["set/conv/A100_T4.json.gz:1"].feedback
    assert (failed.stage, failed.error_kind, failed.error_message) == \
        ("compile", "compile_error", "CompilationFailedConfig")
    assert records["set/conv/A100_T4.json.gz:2"].feedback.stage == "run"

    forced = list(iter_import(folder / "A100.json.gz", "t4"))
    assert len(forced) == 1 and isinstance(forced[0][1], ImportNote)
    assert "a kernel-tuner file, and --format is t4" in forced[0][1].message


def test_t4_needs_a_kernel_name_and_reads_units(knowledge: LocalKnowledge,
                                                tmp_path: Path) -> None:
    data = t4_results([(16, 1, 2.0, "correct"), (32, 1, 0.5, "correctness"),
                       (64, 1, 0.7, "timeout")])
    data["metadata"]["timeunit"] = "seconds"
    write(tmp_path / "t4" / "H200.json", data)
    (tmp_path / "t4" / "LICENSE").write_text("Apache License\n   Version 2.0, January 2004\n")
    rejected = run(knowledge, tmp_path / "t4")["t4/H200.json"]
    assert rejected.rejected == 1 and "KernelName: the file names no kernel" in \
        rejected.problems[0]

    result = run(knowledge, tmp_path / "t4", kernel="gemm_kernel")["t4/H200.json"]
    assert result.accepted == 3
    records = stored(knowledge)
    ok = records["t4/H200.json:0"]
    assert (ok.task.op_type, ok.env.gpu_name, ok.task.shape_set) == \
        ("gemm", "NVIDIA H200", "problem_size=unspecified")
    assert ok.feedback.time_ms == pytest.approx(2000.0)  # seconds -> ms
    assert ok.feedback.timings[0].median_ms == pytest.approx(1000 * float(np.median(TIMES)))
    assert ok.provenance.license == "Apache-2.0"
    wrong = records["t4/H200.json:1"]
    assert (wrong.feedback.stage, wrong.verdict.value) == ("correctness", "incorrect")
    assert records["t4/H200.json:2"].feedback.error_kind == "timeout"


def test_the_iterator_pairs_each_item_with_file_and_position(tmp_path: Path) -> None:
    write(tmp_path / "d" / "A4000.json", kt_cache([entry(16, 1, 2.0), entry(16, 2, -3.0)],
                                                  device="NVIDIA RTX A4000"))
    whole = gzip.compress(json.dumps(kt_cache(GOOD)).encode())
    (tmp_path / "d" / "cut.json.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "d" / "text.json").write_text("{not json")
    items = dict(iter_import(tmp_path / "d"))
    assert isinstance(items["d/A4000.json:16,1"], ExperienceRecord)
    bad = items["d/A4000.json:16,2"]
    assert isinstance(bad, ImportRejection) and bad.where == "d/A4000.json:16,2"
    cut, text = items["d/cut.json.gz"], items["d/text.json"]
    assert isinstance(cut, ImportRejection) and cut.lines()[0].startswith(
        "d/cut.json.gz: <file>: cannot read:")
    assert isinstance(text, ImportRejection) and "<file>: invalid JSON" in text.lines()[0]


def test_cli_import_reports_per_file_and_is_idempotent(
        hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KERNELKB_SEEDS_DIR", str(tmp_path / "none"))
    write(hub / "conv" / "T1_search_space.json", t1_spec())
    assert cli.main(["import", str(hub)]) == 0
    out = capsys.readouterr()
    assert "hub/conv/A6000.json.gz: 3 accepted, 0 duplicate, 0 rejected" in out.out
    assert "1 file skipped: not tuning data (JSON of no known format, or text with no " \
           "Inductor AUTOTUNE table): hub/conv/T1_search_space.json" in out.out
    assert "hub/conv/A6000.json.gz: 3 records in" in out.err  # the progress line
    assert cli.main(["import", str(hub), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["accepted"], report["duplicates"], report["rejected"]) == (0, 3, 0)

    write(hub / "conv" / "A4000.json", kt_cache([entry(16, 1, float("nan"))],
                                                device="NVIDIA RTX A4000"))
    assert cli.main(["import", str(hub / "conv" / "A4000.json")]) == 1
    assert "hub/conv/A4000.json:16,1: feedback.time_ms:" in capsys.readouterr().out
    assert cli.main(["import", str(hub), "--gpu", "GTX 9999"]) == 2
    assert "unknown GPU 'GTX 9999'" in capsys.readouterr().err


SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "benchmark_hub"


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason=f"no shared data at {SHARED}")
def test_one_shared_benchmark_hub_file_imports_whole(knowledge: LocalKnowledge) -> None:
    """The real W7800 convolution cache: every configuration stored, its failure labels
    as failures (counted from the file here, not hard-coded)."""
    path = SHARED / "convolution_milo" / "W7800.json.gz"
    cache = json.loads(gzip.decompress(path.read_bytes()))["cache"]
    failures = sum(isinstance(e["time"], str) for e in cache.values())
    result = run(knowledge, path)["benchmark_hub/convolution_milo/W7800.json.gz"]
    assert (result.accepted, result.rejected) == (len(cache), 0)
    records = list(stored(knowledge).values())
    assert sum(r.verdict.value == "failed" for r in records) == failures
    first = records[0]
    assert (first.env.gpu_name, first.env.arch, first.env.vendor) == \
        ("AMD Radeon PRO W7800", "gfx1100", "amd")
    assert (first.task.op_type, first.provenance.license) == ("convolution", "MIT")


def test_files_of_shapes_no_check_foresaw_are_rejections(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    """An integer too large for a float is an infinite time, rejected by name; parameter
    keys that are not names, or measurements that are not a list, cost their file (one
    rejection naming it), not the import: the files after them are read."""
    write(tmp_path / "d" / "a_keys_A6000.json",
          {**kt_cache(GOOD), "tune_params_keys": [1, None, ["a"]]})
    write(tmp_path / "d" / "b_huge_A6000.json", kt_cache([entry(16, 1, 10**400)]))
    write(tmp_path / "d" / "c_good_A6000.json", kt_cache([entry(64, 1, 2.0)]))
    results = run(knowledge, tmp_path / "d")
    keys, huge, good = (results[f"d/{n}_A6000.json"] for n in ("a_keys", "b_huge", "c_good"))
    assert keys.accepted == 0 and keys.rejected >= 1
    assert "not readable as a kernel-tuner file" in keys.problems[0]
    assert (huge.accepted, huge.rejected) == (0, 1)
    assert "not a finite number" in huge.problems[0]
    assert good.accepted == 1


def test_empty_files_say_so_and_unstated_or_odd_invalidity_is_read_as_such(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    """A cache with no entries is a note, not silence; T4's invalidity left null means
    the time measurement decides (never a failure labelled "None"), and one that is not
    a label is that result's rejection."""
    write(tmp_path / "e" / "a_empty_A6000.json", kt_cache([]))
    write(tmp_path / "e" / "b_empty_T4_A6000.json", t4_results([]))
    t4 = t4_results([(16, 1, 2.0, "correct"), (32, 1, 3.0, "correct"), (64, 1, 4.0, "correct")])
    t4["results"][0]["invalidity"] = None
    t4["results"][1]["invalidity"] = 7
    del t4["results"][2]["invalidity"]
    write(tmp_path / "e" / "c_odd_T4_A6000.json", t4)
    write(tmp_path / "e" / "t1.json", t1_spec())  # names the T4 files' kernel
    results = run(knowledge, tmp_path / "e")
    for name in ("a_empty_A6000.json", "b_empty_T4_A6000.json"):
        empty = results[f"e/{name}"]
        assert (empty.accepted, empty.rejected) == (0, 0)
        assert any("no entries" in note for note in empty.notes), empty.notes
    odd = results["e/c_odd_T4_A6000.json"]
    assert (odd.accepted, odd.rejected) == (2, 1)
    assert "invalidity" in odd.problems[0] and "7" in odd.problems[0]
    kept = [r for key, r in stored(knowledge).items() if "c_odd_T4" in key]
    assert sorted(r.feedback.time_ms for r in kept) == [2.0, 4.0]
    assert all(r.verdict != "failed" and "None" not in r.feedback.text for r in kept)


def test_a_file_past_the_size_limit_is_refused_before_it_is_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small gzip can hold gigabytes: reading stops at the limit, and the file is one
    rejection naming it; the same for a plain file."""
    from kernelkb.kb.importers import files

    bomb = tmp_path / "bomb_A6000.json.gz"
    with gzip.open(bomb, "wb") as handle:
        handle.write(b'{"cache": {' + b" " * (3 * 2**20) + b"}}")
    assert bomb.stat().st_size < 2**20 // 4
    with pytest.raises(ValueError, match="over 2 MiB once gunzipped"):
        files.read_bytes(bomb, limit=2 * 2**20)
    with pytest.raises(ValueError, match="over 1 MiB"):
        files.read_bytes(write(tmp_path / "big.json", {"x": "y" * 2**20}), limit=2**20)
    assert json.loads(files.read_bytes(bomb, limit=4 * 2**20)) == {"cache": {}}
    # through the importer: one rejection naming the limit
    from kernelkb.kb import limits

    monkeypatch.setattr(limits, "IMPORT_FILE_BYTES", 2**20)
    (_, item), = iter_import(bomb)
    assert isinstance(item, ImportRejection) and "over 1 MiB once gunzipped" in str(item.errors)


def test_odd_file_names_and_paths_that_are_not_files(knowledge: LocalKnowledge,
                                                     tmp_path: Path) -> None:
    """A file name that is not UTF-8 once failed every record of its file (three errors
    each), and one with a newline broke the one-line summary; a pipe or device was "0
    files", silently."""
    import os

    folder = tmp_path / "names"
    folder.mkdir()
    raw = os.fsencode(folder) + b"/bad\xff\xfename_A6000.json"
    with open(raw, "wb") as handle:
        handle.write(json.dumps(kt_cache([entry(16, 1, 2.0)])).encode())
    write(folder / "new\nline_A6000.json", kt_cache([entry(32, 1, 3.0)]))
    results = run(knowledge, folder)
    assert sorted(results) == ["names/bad\\udcff\\udcfename_A6000.json",
                               "names/new\\nline_A6000.json"]
    assert all((r.accepted, r.rejected) == (1, 0) for r in results.values())
    assert all("\n" not in key for key in stored(knowledge))
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    with pytest.raises(ValueError, match="not a regular file or a folder"):
        run(knowledge, pipe)
