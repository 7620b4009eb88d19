"""The trusted compile layer (sandbox/trusted_cache.py, layered_cache.py): which code it
takes, that the worker's Triton reads it and writes only its own folder, that a kernel's
cache key does not depend on the module name it was loaded under, and that a fill runs
once per code. The jail's read-only mount of it is tested in test_jail_root.py; what it
saves on a GPU is measured by benchmarks/eval_cost.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import judge, layered_cache, trusted_cache

SHAPES = [[1, 7], [64, 1000], [256, 4096]]


def _request(source: str, **extra: object) -> dict:
    return {"task": "softmax", "dtype": "float16", "source": source, "shapes": SHAPES,
            "conditions": True, **extra}


def test_only_what_the_template_renders_byte_for_byte_is_generated() -> None:
    task = get_task("softmax")
    assert trusted_cache.is_generated(task, task.template)
    point = task.render({"NUM_WARPS": 8, "BLOCK_SIZE": 1024, "ONLINE": True})
    assert trusted_cache.is_generated(task, point)
    assert not trusted_cache.is_generated(task, point + "\n# an agent's note\n")
    assert not trusted_cache.is_generated(task, point.replace("NUM_WARPS = 8", "NUM_WARPS = 3"))
    body = point.replace("tl.max(", "tl.min(", 1)
    assert body != point and not trusted_cache.is_generated(task, body)
    assert not trusted_cache.is_generated(task, get_task("rmsnorm").template)


def test_the_jobs_are_the_generated_codes_foreseeable_compiles_only() -> None:
    task = get_task("softmax")
    template = task.template
    timed = [(64, 1000), (256, 4096)]
    request = _request(template, parent_source=template, timing=True)
    found = trusted_cache.jobs(task, request, timed)
    foreseen = judge.foreseen_shapes(task, request)
    assert foreseen  # the shapes past every list and the other dtypes' shape
    assert found == ([(template, s, "float16", True) for s in SHAPES]
                     + [(template, list(s), d, False) for s, d in foreseen]
                     + [(template, list(s), "float16", False) for s in timed])
    edited = template.replace("NUM_WARPS = 4", "NUM_WARPS = 4  # tuned")
    assert trusted_cache.jobs(task, _request(edited, parent_source=template, timing=True),
                              timed) == [(template, list(s), "float16", False) for s in timed]
    assert trusted_cache.jobs(task, _request(edited, parent_source=template), timed) == []


def _layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A kernel group written by Triton's own manager in one folder, then moved to
    another (the layer as the jail shows it): its recorded paths are stale there."""
    from triton.runtime.cache import FileCacheManager

    written, layer, own = tmp_path / "written", tmp_path / "layer", tmp_path / "own"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(written))
    maker = FileCacheManager("KEY")
    paths = {name: maker.put(b"bytes of " + name.encode(), name)
             for name in ("k.cubin", "k.json")}
    maker.put_group("k.json", paths)
    shutil.move(str(written), str(layer))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(own))
    monkeypatch.setenv(trusted_cache.LAYER_ENV, str(layer))
    monkeypatch.setattr(layered_cache, "READS", {"layer": 0, "own": 0, "missing": 0})
    return layer, own


def test_a_kernel_in_the_layer_is_read_from_there(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    layer, own = _layer(tmp_path, monkeypatch)
    cache = layered_cache.LayeredCache("KEY")
    group = cache.get_group("k.json")
    assert group == {"k.cubin": str(layer / "KEY" / "k.cubin"),
                     "k.json": str(layer / "KEY" / "k.json")}
    assert Path(group["k.cubin"]).read_bytes() == b"bytes of k.cubin"
    assert cache.get_file("k.cubin") == str(layer / "KEY" / "k.cubin")
    assert cache.get_group("other.json") is None
    assert layered_cache.READS == {"layer": 1, "own": 0, "missing": 1}
    # what the worker builds goes to its own folder; a key the layer holds is read from
    # the layer all the same (a candidate's own bytes under it are not served)
    built = cache.put(b"built in the jail", "k.cubin")
    assert built == str(own / "KEY" / "k.cubin")
    assert (layer / "KEY" / "k.cubin").read_bytes() == b"bytes of k.cubin"
    assert cache.get_file("k.cubin") == str(layer / "KEY" / "k.cubin")
    assert cache.get_file("own.so") is None
    assert cache.put(b"launcher", "own.so") == cache.get_file("own.so")


def test_a_group_with_a_file_missing_in_the_layer_is_compiled_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layer, _ = _layer(tmp_path, monkeypatch)
    (layer / "KEY" / "k.cubin").unlink()
    assert layered_cache.LayeredCache("KEY").get_group("k.json") is None
    (layer / "KEY" / "__grp__k.json").write_text("not json")
    assert layered_cache.LayeredCache("KEY").get_group("k.json") is None


def test_without_the_layer_it_is_tritons_file_cache(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _layer(tmp_path, monkeypatch)
    monkeypatch.delenv(trusted_cache.LAYER_ENV)
    assert layered_cache.LayeredCache("KEY").get_group("k.json") is None


def test_triton_loads_the_manager_by_the_name_the_worker_is_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.runtime.cache import get_cache_manager

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_CACHE_MANAGER", trusted_cache.MANAGER)
    assert isinstance(get_cache_manager("ab" * 32), layered_cache.LayeredCache)


KEYS = """
import json, sys
import triton
from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import get_task
source = get_task(sys.argv[1]).template
keys = {}
for name in ("candidate", "parent"):
    module = load_candidate(source, name)
    keys[name] = sorted(v.cache_key for v in vars(module).values()
                        if isinstance(v, triton.runtime.jit.JITFunction))
print(json.dumps(keys))
"""


@pytest.mark.parametrize("task", ["softmax", "matmul"])
def test_a_kernels_cache_key_is_the_same_under_any_module_name(task: str) -> None:
    """The fill loads code as ``candidate``, the worker loads the incumbent as ``parent``:
    the layer serves both only if the name is not part of the key."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", KEYS, task], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    keys = json.loads(done.stdout)
    assert keys["candidate"] and keys["candidate"] == keys["parent"]


def test_a_fill_runs_once_per_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The processes start, end and leave their marker; the same code again starts none.
    (On this CPU they compile nothing: the interpreter has no compiler.)"""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(trusted_cache, "MAX_PROCESSES", 2)
    template = get_task("softmax").template
    request = _request(template, shapes=[[1, 7]], conditions=False)
    first = trusted_cache.fill("softmax", request, [(1, 7)])
    assert first is not None and first["compiled"] and first["failed"] == 0
    assert first["processes"] == min(2, first["jobs"], (os.cpu_count() or 2) - 1) or \
        first["processes"] == 1
    assert len(list((trusted_cache.directory() / "done").iterdir())) == 1
    assert first["covered"] == [template]
    again = trusted_cache.fill("softmax", request, [(1, 7)])
    assert again == {"jobs": first["jobs"], "compiled": False, "seconds": 0.0,
                     "covered": [template]}
    edited = template + "\n# edited\n"
    assert trusted_cache.fill("softmax", _request(edited, shapes=[[1, 7]]), [(1, 7)]) is None
