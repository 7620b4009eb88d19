"""Importing the tuning files Triton and PyTorch users already have: Triton's autotuner disk
cache and Inductor's max-autotune log, both made on the H200 (benchmarks/tuner_files.py,
tests/data/tuner_files/), mapped onto the matmul task. Expectations are read from the
fixture files here, not copied from the importer."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from kernelkb.cli import main as cli
from kernelkb.kb.importers import ImportNote, ImportRejection, iter_import
from kernelkb.kb.importers import tasks as task_map
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.discovery import get_task

DATA = Path(__file__).resolve().parents[1] / "data" / "tuner_files"
LOG = DATA / "inductor_autotune.log"
TRITON = DATA / "triton_cache"
TRITON_FILES = sorted(TRITON.glob("*.autotune.json"))
H200 = "NVIDIA H200"
SHAPES = {f"M={m},N=4096,K=4096" for m in (16, 128, 1024, 4096)}


def split(items: list[tuple[str, Any]]) -> tuple[list[ExperienceRecord], list[ImportRejection],
                                                  list[str]]:
    records = [i for _, i in items if isinstance(i, ExperienceRecord)]
    rejected = [i for _, i in items if isinstance(i, ImportRejection)]
    notes = [i.message for _, i in items if isinstance(i, ImportNote)]
    return records, rejected, notes


def log_choices(text: str) -> list[tuple[str, float, str]]:
    """(name, ms, config text) of every choice line of the log's tables, read plainly."""
    return [(m.group(1), float(m.group(2)), m.group(3))
            for m in re.finditer(r"^  (\S+) ([\d.]+) ms [\d.]+% ?(.*)$", text, re.M)]


def config_text(text: str) -> dict[str, Any]:
    pairs = (part.split("=", 1) for part in text.split(", "))
    return {k: json.loads(v.lower()) if v[0].isdigit() or v in ("True", "False") else v
            for k, v in pairs}


def assert_matmul_points(records: list[ExperienceRecord]) -> None:
    """Every mapped config is a whole point of the task (kb/importers/tasks.py mirrors
    kernels/matmul.py's knobs) that the task's launch model reads on its shape."""
    task = get_task("matmul")
    for r in records:
        assert task.complete(r.edit.config) == r.edit.config, r.edit.config
        assert task.launch(r.edit.config, task.parse_shape(r.task.shape_set), "float16")


# -- Inductor ------------------------------------------------------------------------
def test_the_inductor_log_becomes_matmul_measurements_on_the_gpu_given() -> None:
    text = LOG.read_text()
    choices = log_choices(text)
    triton = [c for c in choices if c[2]]
    extern = [c for c in choices if not c[2]]
    assert len(re.findall(r"^AUTOTUNE mm\(", text, re.M)) == 4
    assert len(triton) == 37 and [c[0] for c in extern] == ["mm", "mm", "mm"]

    records, rejected, notes = split(list(iter_import(LOG, gpu="h200")))
    assert rejected == [] and len(records) == len(triton)
    assert {r.task.shape_set for r in records} == SHAPES
    assert {(r.task.op_type, r.task.task_id, r.task.dtype) for r in records} == \
        {("matmul", "matmul", "float16")}
    assert {(r.env.gpu_name, r.env.arch, r.provenance.agent) for r in records} == \
        {(H200, "sm_90", "inductor")}
    assert all(r.evidence == "measured" and r.verdict.value == "neutral" for r in records)
    assert_matmul_points(records)

    # the first table's best row, as the log prints it
    name, ms, config = triton[0]
    raw = config_text(config)
    best = records[0]
    assert name == "triton_mm_8" and best.feedback.time_ms == pytest.approx(ms)
    assert best.task.shape_set == "M=16,N=4096,K=4096"
    assert best.feedback.timings[0].shape == best.task.shape_set
    assert best.edit.config == {
        "BLOCK_M": raw["BLOCK_M"], "BLOCK_N": raw["BLOCK_N"], "BLOCK_K": raw["BLOCK_K"],
        "GROUP_M": raw["GROUP_M"], "NUM_WARPS": raw["num_warps"],
        "NUM_STAGES": raw["num_stages"], "EVEN_K": raw["EVEN_K"],
        "SPLIT_K": 1, "SPLIT_REDUCE": "kernel", "PERSISTENT_TMA": False, "FLATTEN": False}
    assert "left out: ACC_TYPE='tl.float32', ALLOW_TF32=False, USE_FAST_ACCUM=False" in \
        best.feedback.text
    assert best.feedback.achieved_tflops == pytest.approx(2 * 16 * 4096 * 4096 / ms / 1e9)

    # cuBLAS is the peer's time beside the configurations, never one of them
    second = [r for r in records if r.task.shape_set == "M=128,N=4096,K=4096"]
    assert len(second) == 9
    assert all(f"ATen mm (cuBLAS) took {extern[0][1]:.4f} ms" in r.feedback.text
               for r in second)
    assert len(notes) == 4 and "10 Triton choices of 29 benchmarked" in notes[0]
    assert "ATen mm 0.0310 ms kept as the peer's time" in notes[1]


def test_a_log_or_a_triton_cache_without_gpu_is_refused_by_name(tmp_path: Path) -> None:
    (_, item), = iter_import(LOG)
    assert isinstance(item, ImportRejection)
    assert item.errors[0][0] == "env.gpu_name" and "pass --gpu NAME" in item.errors[0][1]
    path = write_triton(tmp_path / "c" / "matmul_kernel.autotune.json", triton_data())
    (_, item), = iter_import(path)
    assert isinstance(item, ImportRejection) and "Triton autotuner file does not name the " \
        "GPU" in item.lines()[0]


def test_truncated_and_garbled_logs_lose_only_what_is_damaged(tmp_path: Path) -> None:
    text = LOG.read_text()
    lines = text.splitlines(keepends=True)

    def line_of(name: str) -> int:
        return next(i for i, line in enumerate(lines) if line.startswith(f"  {name} "))

    # cut in the middle of a knob name of the last table's fourth choice line
    cut, before = lines[line_of("triton_mm_117")], "".join(lines[: line_of("triton_mm_117")])
    head = before + cut[: cut.index("BLOCK_M") + 5]
    (tmp_path / "cut.log").write_text(head)
    records, rejected, _ = split(list(iter_import(tmp_path / "cut.log", gpu=H200)))
    assert len(records) == len([c for c in log_choices(before) if c[2]])  # all before it
    (bad,) = rejected
    assert "cannot read the config at 'BLOCK'" in bad.lines()[0]
    assert bad.where.endswith(f"/cut.log:{line_of('triton_mm_117') + 1}")  # file:line
    # cut after a whole knob: the knobs Inductor prints last are missing
    (tmp_path / "cut2.log").write_text(head[: head.rindex(", ") + 2])
    (_, bad2), = [(w, i) for w, i in iter_import(tmp_path / "cut2.log", gpu=H200)
                  if isinstance(i, ImportRejection)]
    assert "no BLOCK_M, BLOCK_N, num_stages, num_warps (is the line cut short?)" in \
        bad2.lines()[0]

    for name, old, new in (("triton_mm_4", "0.0269 ms", "0.02x69 ms"),
                           ("triton_mm_86", "BLOCK_K=64,", "BLOCK_K=6#4,")):
        lines[line_of(name)] = lines[line_of(name)].replace(old, new)
    garbled = "".join(lines).replace("AUTOTUNE mm(128x4096, 4096x4096)",
                                     "AUTOTUNE mm(128x4096, 4095x4096)")
    (tmp_path / "garbled.log").write_text(garbled)
    records, rejected, _ = split(list(iter_import(tmp_path / "garbled.log", gpu=H200)))
    reasons = "\n".join(line for r in rejected for line in r.lines())
    assert "feedback.time_ms: not a number: '0.02x69'" in reasons
    assert "BLOCK_K is '6#4', not a positive integer" in reasons
    assert reasons.count("K differs") == 10  # every choice of that table, by its line
    assert len(records) == 37 - 2 - 9

    gz = gzip.compress(text.encode())
    (tmp_path / "cut.log.gz").write_bytes(gz[: len(gz) * 2 // 3])
    records, rejected, _ = split(list(iter_import(tmp_path / "cut.log.gz", gpu=H200)))
    assert records and "<file>: cannot read" in rejected[-1].lines()[0]
    (tmp_path / "noise.log").write_bytes(b"\x00\xff not a log\n" * 100)
    (_, item), = iter_import(tmp_path / "noise.log", gpu=H200)
    assert isinstance(item, ImportNote) and "not an Inductor max-autotune log" in item.message


def test_addmm_tma_failed_and_other_tables(tmp_path: Path) -> None:
    """Forms the H200 log lacks, as log_results writes them (torch/_inductor/
    select_algorithm.py): addmm (bias first), a rank prefix, the persistent TMA template, a
    choice timed inf, a decompose-k choice, and a bmm table (no task: skipped, said)."""
    first = LOG.read_text().split("AUTOTUNE mm(16x4096, 4096x4096)\n")[1]
    mm_line = next(line for line in first.splitlines() if line.startswith("  triton_mm_8 "))
    failed = mm_line.replace("triton_mm_8 0.0260 ms 100.0%", "triton_mm_9 inf ms 0.0%")
    tma = ("  triton_mm_persistent_tma_3 0.0300 ms 66.7% A_ROW_MAJOR=True, B_ROW_MAJOR=False, "
           "BLOCK_K=64, BLOCK_M=64, BLOCK_N=128, EVEN_K=True, GROUP_M=8, NUM_SMS=132, "
           "TMA_SIZE=128, num_stages=4, num_warps=4")
    lines = ["AUTOTUNE addmm(4096, 16x4096, 4096x4096)", "strides: [0, 1], [4096, 1], [1, 4096]",
             "dtypes: torch.bfloat16, torch.bfloat16, torch.bfloat16",
             "  bias_addmm 0.0200 ms 100.0% ", mm_line, tma,
             "  decompose_k_mm_256_4096 0.0400 ms 50.0% k_split=256", failed,
             "SingleProcess AUTOTUNE benchmarking takes 0.1 seconds and 0.2 seconds "
             "precompiling for 5 choices",
             "AUTOTUNE bmm(8x16x64, 8x64x32)", "dtypes: torch.float16, torch.float16",
             "  triton_bmm_1 0.0100 ms 100.0% BLOCK_K=32, BLOCK_M=16, BLOCK_N=32, "
             "num_stages=2, num_warps=2"]
    (tmp_path / "rank0.txt").write_text("".join(f"[rank0]:{line}\n" for line in lines))
    records, rejected, notes = split(list(iter_import(tmp_path / "rank0.txt", gpu=H200)))
    assert rejected == [] and len(records) == 3
    assert {(r.task.op_type, r.task.dtype, r.task.shape_set) for r in records} == \
        {("matmul", "bfloat16", "M=16,N=4096,K=4096")}
    plain, persistent, broken = records
    assert (plain.edit.config["PERSISTENT_TMA"], persistent.edit.config["PERSISTENT_TMA"]) == \
        (False, True)
    assert "NUM_SMS=132, TMA_SIZE=128" in persistent.feedback.text
    assert (broken.verdict.value, broken.feedback.stage) == ("failed", "run")
    assert "ATen bias_addmm (cuBLAS) took 0.0200 ms" in plain.feedback.text
    assert_matmul_points([plain, persistent])
    assert "3 Triton choices of 5 benchmarked" in notes[0]
    assert "not imported: decompose_k_mm_256_4096" in notes[0]
    assert "bmm(8x16x64, 8x64x32) at line 10: skipped" in notes[1]


# -- Triton autotune cache -------------------------------------------------------------
def triton_data() -> dict[str, Any]:
    return json.loads(TRITON_FILES[0].read_text())


def write_triton(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))  # an inf timing becomes Infinity, as Triton's is
    return path


def test_the_h200_triton_cache_maps_onto_matmul() -> None:
    files = [json.loads(f.read_text()) for f in TRITON_FILES]
    assert len(files) == 4
    keys = {tuple(d["key"][:3]) for d in files}
    assert keys == {(m, 4096, 4096) for m in (16, 128, 1024, 4096)}
    items = list(iter_import(TRITON, gpu="h200"))
    records, rejected, notes = split(items)
    assert rejected == []
    assert len(records) == sum(len(d["configs_timings"]) for d in files)
    assert {r.task.shape_set for r in records} == SHAPES
    assert {(r.task.op_type, r.task.dtype, r.env.gpu_name) for r in records} == \
        {("matmul", "float16", H200)}
    assert_matmul_points([r for r in records if r.verdict.value != "failed"])
    assert any("read as M, N, K" in n for n in notes)

    first = json.loads(TRITON_FILES[0].read_text())
    config, timing = first["configs_timings"][0]
    name = TRITON_FILES[0].name
    record = next(r for w, r in items if w.endswith(f"{name}:0"))
    m, n, k = first["key"][:3]
    assert record.task.shape_set == f"M={m},N={n},K={k}"
    assert record.feedback.time_ms == pytest.approx(timing[0])
    kwargs = config["kwargs"]
    assert record.edit.config == {
        "BLOCK_M": kwargs["BLOCK_M"], "BLOCK_N": kwargs["BLOCK_N"],
        "BLOCK_K": kwargs["BLOCK_K"], "GROUP_M": kwargs["GROUP_M"],
        "NUM_WARPS": config["num_warps"], "NUM_STAGES": config["num_stages"],
        "EVEN_K": False, "SPLIT_K": 1, "SPLIT_REDUCE": "kernel", "PERSISTENT_TMA": False,
        "FLATTEN": False}
    assert "the task's default taken: EVEN_K=False" in record.feedback.text
    assert f"p20 / p80 {timing[1]:.4g} / {timing[2]:.4g} ms" in record.feedback.text


def test_triton_files_other_kernels_failures_and_damage(tmp_path: Path) -> None:
    data = triton_data()
    config = data["configs_timings"][0][0]
    root = tmp_path / "cache"
    # the real layout: <hash>/<kernel>.autotune.json beside <hash>/<kernel>.json metadata
    write_triton(root / "AAAA" / "matmul_kernel.autotune.json", {
        **data, "configs_timings": [
            *data["configs_timings"],
            [{**config, "num_stages": 7}, [float("inf")] * 3],
            [{**config, "kwargs": {**config["kwargs"], "BLOCK_K": "x"}}, [1.0, 1.0, 1.0]],
            ["garbage"], [config, "slow"]]})
    write_triton(root / "BBBB" / "matmul_kernel.json", {"hash": "b", "triton_version": "3.6.0",
                                                       "target": {"arch": 90}})
    write_triton(root / "CCCC" / "softmax_kernel.autotune.json", {
        "key": [4096, "torch.float32"], "configs_timings": [
            [{"kwargs": {"BLOCK_SIZE": 1024}, "num_warps": 8, "num_stages": 1, "num_ctas": 1},
             [0.01, 0.009, 0.011]]]})
    (root / "DDDD").mkdir()
    (root / "DDDD" / "matmul_kernel.autotune.json").write_text('{"key": [16, 40')
    results = dict(iter_import(root, gpu=H200))
    at = len(data["configs_timings"])  # the positions of the entries added above
    good = results["cache/AAAA/matmul_kernel.autotune.json:0"]
    assert isinstance(good, ExperienceRecord) and good.env.triton_version == "3.6.0"
    failed = results[f"cache/AAAA/matmul_kernel.autotune.json:{at}"]
    assert isinstance(failed, ExperienceRecord) and failed.verdict.value == "failed"
    assert (failed.feedback.stage, failed.feedback.error_kind) == ("compile", "compile_error")
    for position, reason in ((1, "BLOCK_K is 'x'"), (2, "expected [config with kwargs"),
                             (3, "not a number or a list of quantiles")):
        item = results[f"cache/AAAA/matmul_kernel.autotune.json:{at + position}"]
        assert isinstance(item, ImportRejection) and reason in item.lines()[0]
    other = results["cache/CCCC/softmax_kernel.autotune.json:0"]
    assert isinstance(other, ExperienceRecord)
    assert (other.task.op_type, other.task.dtype, other.task.shape_set) == \
        ("softmax", "float32", "problem_size=4096")
    assert other.edit.config == {"BLOCK_SIZE": 1024, "num_warps": 8, "num_stages": 1}
    broken = results["cache/DDDD/matmul_kernel.autotune.json"]
    assert isinstance(broken, ImportRejection) and "invalid JSON" in broken.lines()[0]


# -- through the CLI and the real store --------------------------------------------------
def fastest_at_m16() -> dict[str, Any]:
    """The fastest configuration either H200 file measured at M=16 (N=K=4096), as the
    matmul task's config, read from the files."""
    _, ms, text = min((c for c in log_choices(LOG.read_text().split("AUTOTUNE mm(128x")[0])
                          if c[2]), key=lambda c: c[1])
    raw = config_text(text)
    best = {"time": ms, "BLOCK_M": raw["BLOCK_M"], "BLOCK_N": raw["BLOCK_N"],
            "BLOCK_K": raw["BLOCK_K"], "GROUP_M": raw["GROUP_M"],
            "NUM_WARPS": raw["num_warps"], "NUM_STAGES": raw["num_stages"],
            "EVEN_K": raw["EVEN_K"]}
    for path in TRITON_FILES:
        data = json.loads(path.read_text())
        if data["key"][0] != 16:
            continue
        for config, timing in data["configs_timings"]:
            if timing[0] < best["time"]:
                best = {"time": timing[0], **config["kwargs"],
                        "NUM_WARPS": config["num_warps"], "NUM_STAGES": config["num_stages"],
                        "EVEN_K": False}
    best.pop("time")
    return {k: best[k] for k in task_map.KNOBS[:7]} | {"SPLIT_K": 1, "SPLIT_REDUCE": "kernel",
                                                       "PERSISTENT_TMA": False, "FLATTEN": False}


def test_imported_configurations_reach_the_matmul_bootstrap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The user's path: `kernelkb import` the H200 files (the folder: both formats sniffed),
    then ask what to try first on an H100 at the decode shape: the fastest configuration
    measured there leads, and the ranker learned from the imported rows."""
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KERNELKB_SEEDS_DIR", str(tmp_path / "none"))
    assert cli.main(["import", str(LOG)]) == 1
    assert "env.gpu_name: a PyTorch Inductor max-autotune file does not name the GPU" in \
        capsys.readouterr().out
    expected = 37 + sum(len(json.loads(f.read_text())["configs_timings"]) for f in TRITON_FILES)
    assert cli.main(["import", str(DATA), "--gpu", "h200"]) == 0
    out = capsys.readouterr().out
    assert "inductor_autotune.log: 37 accepted, 0 duplicate, 0 rejected" in out
    assert f"total: {expected} accepted, 0 duplicate, 0 rejected" in out
    assert cli.main(["bootstrap", "--op", "matmul", "--gpu", "NVIDIA H100 80GB HBM3",
                     "--shape", "M=16,N=4096,K=4096"]) == 0
    out = capsys.readouterr().out
    assert f"[config] tiling {fastest_at_m16()}: fastest measured matmul float16 config on " \
           "NVIDIA H200" in out
    assert f"from {expected} measurements on 1 other GPU" in out
    assert "over M=16,N=4096,K=4096)" in out  # ranked for the shape asked


def test_the_mapping_follows_the_task() -> None:
    task = get_task("matmul")
    assert set(task_map.KNOBS) == {p.name for p in (*task.knobs, *task.variants)}
    assert task_map.DEFAULTS == {v.name: v.values[0] for v in task.variants} | \
        {"GROUP_M": task.default_config["GROUP_M"]}
    assert task_map.shape_label(16, 4096, 4096) == task.shape_label((16, 4096, 4096))
