"""PyTorch AutoHeuristic data sets (kb/importers/autoheuristic.py), written in the form
Inductor writes them (a metadata line, a CSV header, a row per timed choice): the Triton
GEMM choices become matmul measurements on the GPU --gpu names, cuBLAS's choice is their
peer, a GPU of another capability is refused, other heuristics are skipped with a note,
and the store takes them like any import."""

from __future__ import annotations

import json
from pathlib import Path

from kernelkb.kb.importers import ImportNote, ImportRejection, iter_import
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.shared import gpus

META = {"shared_memory": 232448, "device_capa": [9, 0], "name": "mm",
        "numerical_features": ["k", "m", "n"],
        "categorical_features": ["mat1_dtype", "mat2_dtype"]}
HEADER = "m,k,n,mat1_dtype,mat2_dtype,choice,feedback"
ROWS = [
    "64,4096,14336,torch.float16,torch.float16,"
    "type=triton_BLOCK-M=64_BLOCK-K=64_BLOCK-N=128_numstages=3_numwarps=4,0.0312",
    "64,4096,14336,torch.float16,torch.float16,"
    "type=triton_BLOCK-M=32_BLOCK-K=128_BLOCK-N=64_numstages=4_numwarps=4,0.0351",
    "64,4096,14336,torch.float16,torch.float16,extern_mm,0.0290",
    "4096,4096,4096,torch.bfloat16,torch.bfloat16,"
    "type=triton_BLOCK-M=128_BLOCK-K=64_BLOCK-N=128_numstages=3_numwarps=8,0.1953",
    "4096,4096,4096,torch.bfloat16,torch.bfloat16,not-a-choice,0.5",
]


def _write(path: Path, meta: dict = META, rows: list[str] = ROWS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([json.dumps(meta), HEADER, *rows]) + "\n")
    return path


def test_triton_choices_become_matmul_measurements_with_cublas_beside(tmp_path: Path):
    _write(tmp_path / "d" / "mm_h100.txt")
    items = dict(iter_import(tmp_path / "d", gpu=gpus.lookup("h200").name))
    records = [i for i in items.values() if isinstance(i, ExperienceRecord)]
    assert len(records) == 3
    first = next(r for r in records if r.edit.config.get("BLOCK_M") == 64)
    assert first.task.task_id == "matmul" and first.task.dtype == "float16"
    assert first.edit.config["BLOCK_N"] == 128 and first.edit.config["BLOCK_K"] == 64
    assert first.edit.config["NUM_WARPS"] == 4 and first.edit.config["NUM_STAGES"] == 3
    assert first.feedback.time_ms == 0.0312 and first.env.arch == "sm_90"
    assert "mm (ATen) took 0.0290 ms" in first.feedback.text
    assert first.provenance.agent == "autoheuristic"
    big = next(r for r in records if r.task.dtype == "bfloat16")
    assert big.feedback.timings[0].shape == "M=4096,N=4096,K=4096"
    bad = [i for i in items.values() if isinstance(i, ImportRejection)]
    assert len(bad) == 1 and "not a Triton GEMM choice" in bad[0].lines()[0]
    notes = [i.message for i in items.values() if isinstance(i, ImportNote)]
    assert any("3 Triton choices on 2 inputs" in n for n in notes)


def test_a_gpu_of_another_capability_is_refused_and_none_is_asked_for(tmp_path: Path):
    _write(tmp_path / "d" / "mm.txt")
    (only,) = dict(iter_import(tmp_path / "d", gpu=gpus.lookup("a100").name)).values()
    assert isinstance(only, ImportRejection) and "sm_90" in only.lines()[0]
    (none,) = dict(iter_import(tmp_path / "d")).values()
    assert isinstance(none, ImportRejection) and "--gpu" in none.lines()[0]


def test_a_capability_that_is_no_pair_of_integers_refuses_its_file_alone(tmp_path: Path):
    _write(tmp_path / "d" / "bad.txt", {**META, "device_capa": ["a", 1]})
    _write(tmp_path / "d" / "good.txt")
    items = dict(iter_import(tmp_path / "d", gpu=gpus.lookup("h200").name))
    bad = items["d/bad.txt"]
    assert isinstance(bad, ImportRejection) and bad.lines() == [
        "d/bad.txt: device_capa: not a (major, minor) pair of integers: ['a', 1]"]
    assert sum(isinstance(i, ExperienceRecord) for i in items.values()) == 3  # the next file


def test_other_heuristics_are_skipped_with_a_note(tmp_path: Path):
    _write(tmp_path / "d" / "pad.txt", {**META, "name": "pad_mm"},
           ["64,4096,14336,torch.float16,torch.float16,pad,0.1"])
    items = list(dict(iter_import(tmp_path / "d", gpu=gpus.lookup("h200").name)).values())
    assert all(isinstance(i, ImportNote) for i in items)
    assert "pad_mm" in items[0].message and "skipped" in items[0].message
