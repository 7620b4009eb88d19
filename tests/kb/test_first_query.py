"""The first query of a fresh process reads only what it needs (issue 29: a 100k store's
first `kernelkb query` took 10-25 s), with the same answers as a full load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from kernelkb.kb.vector_index import VectorIndex
from kernelkb.kernels.base import all_tasks, related_ops_of


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_first_top_reads_only_the_candidates_and_ranks_as_a_full_load(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    ids = [f"e{i:03d}" for i in range(120)]
    writer = VectorIndex(path=tmp_path / "chroma")
    with writer.writing():
        writer.upsert(ids, _unit(rng, len(ids)))
    writer.close()
    query = _unit(rng, 1)[0]
    candidates = ids[10:70] + ["not-stored"]

    fresh = VectorIndex(path=tmp_path / "chroma")
    pos, sim = fresh.top(query, candidates, 25)
    assert not fresh._loaded and len(fresh._ids) == 60  # the candidates' vectors only
    again = fresh.top(query, candidates, 25)  # from the part read, the same
    full = VectorIndex(path=tmp_path / "chroma")
    full.ensure_loaded()
    want = full.top(query, candidates, 25)
    for got in ((pos, sim), again):
        assert got[0].tolist() == want[0].tolist()
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    assert "not-stored" not in [candidates[p] for p in pos]
    fresh.ensure_loaded()  # a later full load replaces the part
    assert fresh._loaded and len(fresh._ids) == len(ids)
    fresh.close()
    full.close()


def test_registry_summary_is_the_registry_and_later_needs_no_torch(tmp_path: Path) -> None:
    tasks = all_tasks()
    ops = sorted({t.op_type for t in tasks.values()})
    live = {"ops": ops, "tasks": sorted(tasks),
            "related": {op: list(related_ops_of(op)) for op in ops}}
    code = ("import json, sys; from kernels.discovery import registry_summary; "
            "print(json.dumps([registry_summary(), 'torch' in sys.modules]))")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("KERNELKB_NO_TASK_CACHE", None)
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                      capture_output=True, text=True).stdout.splitlines()[-1])
            for _ in range(2)]
    assert runs[0] == [live, True]  # built from the tasks (torch), written to disk
    assert runs[1] == [live, False]  # read back: no task module imported
    assert (tmp_path / "kernelkb" / "task_registry.json").is_file()
