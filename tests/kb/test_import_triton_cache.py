"""``kernelkb import ~/.triton/cache --gpu h200`` over a real-shaped Triton cache: hundreds
of compiled kernels (each folder: the kernel's metadata JSON, its group file, its IR and
binary) beside an autotune file. The compile metadata is skipped and counted in one line;
only files that look like tuning data and fail get a line each, capped.

The compiled kernel's files in tests/data/triton_compiled/ came from ``triton.compile`` of
Triton 3.9.0 for sm_90 on a CPU; the autotune file from an H200 (tests/data/tuner_files/).
The store is real (SQLite + Chroma + MiniLM), through the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelkb.cli import main as cli

DATA = Path(__file__).resolve().parents[1] / "data"
COMPILED = DATA / "triton_compiled"
AUTOTUNE = sorted((DATA / "tuner_files" / "triton_cache").glob("*.autotune.json"))[0]
KERNELS = 400


def compiled_kernel(root: Path, folder: str, name: str) -> None:
    """One compiled kernel as Triton leaves it in its cache, renamed."""
    where = root / folder
    where.mkdir(parents=True)
    meta = json.loads((COMPILED / "add_kernel.json").read_text())
    (where / f"{name}.json").write_text(json.dumps({**meta, "name": name, "hash": folder}))
    group = json.loads((COMPILED / "__grp__add_kernel.json").read_text())
    (where / f"__grp__{name}.json").write_text(json.dumps({"child_paths": {
        key.replace("add_kernel", name): str(where / key.replace("add_kernel", name))
        for key in group["child_paths"]}}))
    for suffix in ("ttir", "ttgir", "llir", "ptx", "source"):
        (where / f"{name}.{suffix}").write_text("// IR\n")
    (where / f"{name}.cubin").write_bytes(b"\x7fELF")


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    root = tmp_path / "triton" / "cache"
    for n in range(KERNELS):
        compiled_kernel(root, f"{n:052d}", f"kernel_{n % 37}")
    compiled_kernel(root, "M" * 52, "matmul_kernel")  # the autotuned kernel's binary
    (root / ("A" * 52)).mkdir()
    (root / ("A" * 52) / "matmul_kernel.autotune.json").write_bytes(AUTOTUNE.read_bytes())
    return root


@pytest.fixture
def store_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's store in tmp_path, through the environment."""
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KERNELKB_SEEDS_DIR", str(tmp_path / "no-seeds"))


def test_a_triton_cache_prints_its_tuning_data_and_one_line_for_the_rest(
        cache: Path, store_home: None, capsys: pytest.CaptureFixture[str]) -> None:
    configs = len(json.loads(AUTOTUNE.read_text())["configs_timings"])
    assert cli.main(["import", str(cache), "--gpu", "h200"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines == [
        f"cache/{'A' * 52}/matmul_kernel.autotune.json: {configs} accepted, 0 duplicate, "
        "0 rejected",
        *[line for line in lines if line.startswith("  note: ")],
        f"{2 * (KERNELS + 1)} files skipped: Triton compile metadata (a compiled kernel's "
        "files in a Triton cache, not tuning data)",
        lines[-1]]
    assert lines[-1].startswith(f"total: {configs} accepted, 0 duplicate, 0 rejected from 1 "
                                f"file ({2 * (KERNELS + 1)} skipped) in ")
    assert len(err.splitlines()) <= 3  # the autotune file's progress line, no per-file noise
    assert "not a Kernel Tuner cache" not in out + err


def test_files_that_look_like_tuning_data_and_fail_are_listed_capped(
        cache: Path, store_home: None, capsys: pytest.CaptureFixture[str]) -> None:
    for n in range(12):  # a tuning run killed mid-write, twelve times over
        broken = cache / f"{'B' * 50}{n:02d}" / "matmul_kernel.autotune.json"
        broken.parent.mkdir()
        broken.write_text('{"key": [16, 40')
    (cache / "notes.json").write_text(json.dumps({"owner": "me", "purpose": "scratch"}))
    assert cli.main(["import", str(cache), "--gpu", "h200"]) == 1
    out = capsys.readouterr().out
    refused = [line for line in out.splitlines() if line.endswith("(not imported)")]
    assert len(refused) == 10
    assert all("matmul_kernel.autotune.json: <file>: invalid JSON" in line for line in refused)
    assert "... and 2 more files not imported (--json lists each)" in out
    assert "1 file skipped: not tuning data (JSON of no known format, or text with no " \
           "Inductor AUTOTUNE table): cache/notes.json" in out
    assert f"{2 * (KERNELS + 1)} files skipped: Triton compile metadata" in out
    assert len(out.splitlines()) < 25

    assert cli.main(["import", str(cache), "--gpu", "h200", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["skipped"] == {"triton-compiled": 2 * (KERNELS + 1), "not-tuning-data": 1}
    assert report["rejected"] == 12
