"""Dispatch tables: selection by regime and GPU, fallbacks with their reasons, merging with
the stated rules, the CLI, and the exported op choosing per-shape configurations in the
Triton interpreter while matching the reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelkb.cli.main import main as cli_main
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.dispatch_runtime import (
    Dispatcher,
    dispatch_check,
    dispatch_gpu_order,
    dispatch_regime,
    dispatch_render,
    dispatch_select,
)
from kernelkb.optimizer.dispatch import (
    add_gpu,
    entry,
    merge_tables,
    new_table,
    read_table,
    write_table,
)
from kernelkb.optimizer.export import export_module

H200 = SimpleNamespace(gpu_name="NVIDIA H200", arch="sm_90", sm_count=132, vendor="nvidia",
                       mem_bandwidth_gbps=4000.0, smem_per_sm_kib=228, peak_tflops=900.0,
                       triton_version="3.6.0", torch_version="2.11")
H100 = SimpleNamespace(**{**vars(H200), "gpu_name": "NVIDIA H100 80GB HBM3", "sm_count": 132})
A100 = SimpleNamespace(**{**vars(H200), "gpu_name": "NVIDIA A100-SXM4-80GB", "arch": "sm_80",
                          "sm_count": 108})
CPU = SimpleNamespace(**{**vars(H200), "gpu_name": "cpu-interpreter", "arch": "cpu",
                         "sm_count": None})


def _entry(config: dict, env=H200, time_ms: float | None = 0.1, shapes=("rows=1,cols=64",),
           when: str | None = None, run: str = "run-1") -> dict:
    item = entry(config, shapes=list(shapes), timed=time_ms is not None, time_ms=time_ms,
                 start_ms=0.2 if time_ms else None, run_id=run, env=env)
    if when:
        item["measured_at"] = when
    return item


def _table(env=H200, **regimes: dict) -> dict:
    table = new_table(get_task("softmax"), "float16")
    add_gpu(table, env, regimes)
    return table


def test_the_rule_in_the_table_classifies_as_the_task_does() -> None:
    task = get_task("softmax")
    rule = task.regimes.rule()
    for shape in (*task.sweep_shapes, *task.edge_shapes):
        assert dispatch_regime(rule, (shape[1],)) == task.regime(shape)
    assert json.loads(json.dumps(rule)) == rule  # the JSON form round-trips


def test_selection_exact_then_same_architecture_then_nearest_regime() -> None:
    table = _table(short_rows=_entry({"NUM_WARPS": 2}), long_rows=_entry({"NUM_WARPS": 8}))
    here = {"gpu_name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132}
    gpu, regime, item, why = dispatch_select(table, here, "long_rows")
    assert (gpu, regime, item["config"], why) == ("NVIDIA H200", "long_rows", {"NUM_WARPS": 8},
                                                  None)
    # a regime nobody measured: the nearest in the task's order; a tie goes to the smaller
    _, regime, item, why = dispatch_select(table, here, "medium_rows")
    assert regime == "short_rows" and "medium_rows not measured" in why
    # another GPU of the same architecture: the same regime's entry, said so
    h100 = {"gpu_name": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "sm_count": 132}
    gpu, regime, _, why = dispatch_select(table, h100, "long_rows")
    assert (gpu, regime) == ("NVIDIA H200", "long_rows") and "same architecture" in why


def test_the_most_similar_gpu_is_chosen_by_facts_not_names() -> None:
    table = _table(A100, short_rows=_entry({"NUM_WARPS": 1}, env=A100))
    add_gpu(table, H200, {"short_rows": _entry({"NUM_WARPS": 2})})
    add_gpu(table, CPU, {"short_rows": _entry({"NUM_WARPS": 4}, env=CPU, time_ms=None)})
    gh200 = {"gpu_name": "NVIDIA GH200 480GB", "arch": "sm_90", "sm_count": 132}
    assert dispatch_gpu_order(table, gh200)[0] == "NVIDIA H200"
    a10 = {"gpu_name": "NVIDIA A10", "arch": "sm_86", "sm_count": 72}
    assert dispatch_gpu_order(table, a10)[0] == "NVIDIA A100-SXM4-80GB"  # sm_8x family
    gpu, _, item, why = dispatch_select(table, a10, "long_rows")
    assert gpu == "NVIDIA A100-SXM4-80GB" and item["config"] == {"NUM_WARPS": 1}
    assert "nearest GPU" in why and "nearest regime short_rows" in why


def test_the_dispatcher_resolves_once_per_shape_and_warns_once() -> None:
    loaded: list[dict] = []

    def load(item: dict):
        loaded.append(item["config"])
        return lambda x: (item["config"]["NUM_WARPS"], x.shape)

    table = _table(short_rows=_entry({"NUM_WARPS": 2}), long_rows=_entry({"NUM_WARPS": 8}))
    run = Dispatcher(table, load, here={"gpu_name": "NVIDIA H200", "arch": "sm_90",
                                        "sm_count": 132})
    x = SimpleNamespace(shape=(4, 128))
    with pytest.warns(UserWarning, match="medium_rows not measured") as caught:
        assert run(x)[0] == 2 and run(x)[0] == 2
        assert run(SimpleNamespace(shape=(2, 40000)))[0] == 8
        run(SimpleNamespace(shape=(2, 5000)))
        run(SimpleNamespace(shape=(3, 6000)))  # the same fallback: no second warning
    assert len([w for w in caught if "medium_rows" in str(w.message)]) == 1
    assert loaded == [{"NUM_WARPS": 2}, {"NUM_WARPS": 8}]  # each configuration loaded once
    assert run.choices[5000][1] == "short_rows"  # one dim: the key is the int


def test_merge_rules(tmp_path: Path) -> None:
    old = "2026-01-01T00:00:00+00:00"
    new = "2026-06-01T00:00:00+00:00"
    a = _table(short_rows=_entry({"NUM_WARPS": 2}, time_ms=0.10, when=old, run="a"),
               long_rows=_entry({"NUM_WARPS": 8}, time_ms=None, when=new, run="a"))
    b = _table(short_rows=_entry({"NUM_WARPS": 4}, time_ms=0.08, when=old, run="b"),
               long_rows=_entry({"NUM_WARPS": 16}, time_ms=0.5, when=old, run="b"))
    add_gpu(b, A100, {"short_rows": _entry({"NUM_WARPS": 1}, env=A100)})
    merged = merge_tables([a, b])
    h200 = merged["gpus"]["NVIDIA H200"]["regimes"]
    assert h200["short_rows"]["config"] == {"NUM_WARPS": 4}  # same shapes: the faster
    assert h200["long_rows"]["config"] == {"NUM_WARPS": 16}  # timed beats untimed
    assert "NVIDIA A100-SXM4-80GB" in merged["gpus"]  # only one table has it: kept
    assert {c["dropped_run"] for c in merged["conflicts"]} == {"a"}
    # other shapes: the later measurement wins, whatever its figure
    c = _table(short_rows=_entry({"NUM_WARPS": 1}, time_ms=0.3, shapes=("rows=9,cols=99",),
                                 when=new, run="c"))
    assert merge_tables([b, c])["gpus"]["NVIDIA H200"]["regimes"]["short_rows"]["run_id"] == "c"
    assert merge_tables([c, b])["gpus"]["NVIDIA H200"]["regimes"]["short_rows"]["run_id"] == "c"
    dispatch_check(merged)


def test_tables_that_cannot_merge_are_refused(tmp_path: Path) -> None:
    a = _table(short_rows=_entry({"NUM_WARPS": 2}))
    other = new_table(get_task("rmsnorm"), "float16")
    with pytest.raises(ValueError, match="different tasks"):
        merge_tables([a, other])
    redrawn = json.loads(json.dumps(a))
    redrawn["rule"]["classes"][0][1] = 4096
    with pytest.raises(ValueError, match="regimes differ"):
        merge_tables([a, redrawn])


def test_cli_merge_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_table(_table(short_rows=_entry({"NUM_WARPS": 2})), tmp_path / "h200.json")
    b = write_table(_table(A100, long_rows=_entry({"NUM_WARPS": 8}, env=A100)),
                    tmp_path / "a100.json")
    out = tmp_path / "merged.json"
    assert cli_main(["dispatch", "merge", str(a), str(b), "-o", str(out)]) == 0
    merged = read_table(out)
    assert set(merged["gpus"]) == {"NVIDIA H200", "NVIDIA A100-SXM4-80GB"}
    assert cli_main(["dispatch", "show", str(out), "--gpu", "NVIDIA H100 80GB HBM3",
                     "--arch", "sm_90", "--sms", "132"]) == 0
    shown = capsys.readouterr().out
    assert "nearest GPU NVIDIA H200" in shown and "NVIDIA H100" in shown
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    assert cli_main(["dispatch", "merge", str(a), str(bad), "-o", str(tmp_path / "x.json")]) == 2
    assert "not a dispatch table" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()  # nothing written
    assert cli_main(["dispatch", "regimes", "matmul"]) == 0
    listed = capsys.readouterr().out
    assert "skinny" in listed and "M=16,N=4096,K=4096" in listed and "split-K" in listed


def test_render_refuses_a_config_the_kernel_does_not_have() -> None:
    body = get_task("softmax").template
    assert "NUM_WARPS = 8\n" in dispatch_render(body, {"NUM_WARPS": 8})
    with pytest.raises(KeyError, match="BLOCK_M"):
        dispatch_render(body, {"BLOCK_M": 64})


PROBE = """
import os, warnings, torch
warnings.simplefilter("always")
import best_softmax as m
shapes = [(5, 300), (3, 1500), (1, 16500), (2, 5000)]
def check(run):
    for shape in shapes:
        x = torch.randn(*shape)
        for y in run(x):
            err = (y - torch.softmax(x, -1)).abs().max().item()
            assert err < 1e-6, (shape, err)
def report(name, dispatcher, caught):
    print(name, "choices", sorted((k, v[1]) for k, v in dispatcher.choices.items()))
    print(name, "loaded", sorted((mod.BLOCK_SIZE, mod.ONLINE, mod.NUM_WARPS)
                                 for mod in m._KKB_LOADED))
    print(name, "warnings", [str(w.message) for w in caught if "kernelkb" in str(w.message)])
with warnings.catch_warnings(record=True) as caught:
    check(lambda x: (torch.ops.kernelkb.softmax(x), m.dispatch_run(x)))
report("run", m.dispatcher, caught)
os.environ["KERNELKB_DISPATCH_TABLE"] = "merged.json"  # a table from elsewhere
merged = m.Dispatcher(m._kkb_table(), m._kkb_load)
with warnings.catch_warnings(record=True) as caught:
    check(lambda x: (merged(x),))
report("merged", merged, caught)
"""


def _lines(stdout: str) -> dict[str, str]:
    return {" ".join(line.split(" ", 2)[:2]): line.split(" ", 2)[2]
            for line in stdout.splitlines() if line.count(" ") >= 2}


def test_the_exported_op_picks_each_shapes_configuration(tmp_path: Path) -> None:
    """softmax with two entries (one carried as its own source) and a missing regime, run
    in the interpreter in a fresh process and checked against torch.softmax; then a merged
    table that adds the missing regime."""
    task = get_task("softmax")
    body = task.render({"NUM_WARPS": 2, "ROWS_PER_PROGRAM": 2})
    other = task.render({"BLOCK_SIZE": 1024, "ONLINE": True}).replace(
        "    out = torch.empty_like(x)", "    out = torch.empty_like(x)  # its own code")
    table = _table(CPU,
                   short_rows=_entry({"NUM_WARPS": 2, "ROWS_PER_PROGRAM": 2}, env=CPU),
                   long_rows={**_entry({"BLOCK_SIZE": 1024, "ONLINE": True}, env=CPU),
                              "source": "own"})
    path = export_module(task, body, tmp_path / "best_softmax.py", dtype="float32",
                         table=table, sources={"own": other})
    assert path.with_name("best_softmax.dispatch.json").exists()
    write_table(merge_tables([table, _table(CPU, medium_rows=_entry(
        {"BLOCK_SIZE": 4096, "ONLINE": True, "NUM_WARPS": 8}, env=CPU, time_ms=None))]),
        tmp_path / "merged.json")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    env.pop("KERNELKB_DISPATCH_TABLE", None)
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = _lines(done.stdout)
    assert lines["run choices"] == str([(300, "short_rows"), (1500, "short_rows"),
                                        (5000, "short_rows"), (16500, "long_rows")])
    assert lines["run loaded"] == str([(1024, True, 4)])  # the carried source, loaded once
    assert "medium_rows not measured: nearest regime short_rows" in lines["run warnings"]
    assert "(5000, 'medium_rows')" in lines["merged choices"]
    assert "(4096, True, 8)" in lines["merged loaded"] and lines["merged warnings"] == "[]"
