"""The exported op runs its launch plan (kernels/plan_record.py, plan_bind.py): run() once
per input layout, then the bound launches; right on every shape; taken whole by
torch.compile through its fake. In the Triton interpreter, each probe in a fresh process
(the op registry is per process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.export import export_module
from kernelkb.optimizer.op_fake import fake_rule, fake_source

ROOT = Path(__file__).parents[2]


def _probe(folder: Path, check: str, timeout: int = 300) -> str:
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}
    env.pop("KERNELKB_LAUNCH_PLAN", None)
    done = subprocess.run([sys.executable, "-c", check], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


COUNTED = """
import warnings, torch, best_matmul as m
from kernelkb.kernels.discovery import get_task
t = get_task("matmul")
calls = []
made = m.PlanFresh.__call__
def counted(self):
    calls.append(1)
    return made(self)
m.PlanFresh.__call__ = counted  # each recording: run() from its module as imported
shapes = [*t.cpu_shapes, (7, 33, 65), (100, 3, 1000), (1, 1, 1), (3, 17, 5)]
for shape in shapes:
    for seed in (0, 1, 2):
        a, b = t.make_inputs(shape, torch.float32, seed, "cpu")
        for y in (torch.ops.kernelkb.matmul(a, b), m.launch(a, b)):
            assert y.shape == (a.shape[0], b.shape[1]), (shape, y.shape)
            err = (y - a @ b).abs().max().item()
            assert err < 1e-3 * max(1.0, a.shape[1] ** 0.5), (shape, seed, err)
# a transposed B (a caller's x @ W.t()): another layout, its own plan, still right
a, b = t.make_inputs((9, 40, 24), torch.float32, 3, "cpu")
wt = b.t().contiguous().t()
assert (torch.ops.kernelkb.matmul(a, wt) - a @ b).abs().max() < 1e-3
print("calls", len(calls), "layouts", len(shapes) + 1, "bound", len(m.launcher.sources),
      "refused", len(m.launcher.refused))
print("source", "run(" in next(iter(m.launcher.sources.values())))
"""


def test_the_op_calls_run_once_per_layout_and_is_right_on_every_shape(tmp_path: Path) -> None:
    """Shapes the task lists and shapes nobody listed (M=1, odd sizes, a transposed B):
    right against a @ b on three draws each; run() ran once per layout (from its module
    imported afresh), the bound plan on every other call, and the plan's text never calls
    run()."""
    task = get_task("matmul")
    export_module(task, task.template, tmp_path / "best_matmul.py", dtype="float32")
    out = _probe(tmp_path, COUNTED)
    calls = dict(line.split(" ", 1) for line in out.splitlines())
    assert calls["calls"].split() == ["8", "layouts", "8", "bound", "8", "refused", "0"]
    assert calls["source"] == "False"


HOST_READ = '''
def run(x):
    if x.abs().max().item() > 1e30:  # a value read on the host: no plan can hold it
        return x
    return _kkb_softmax_run(x)
'''


def test_a_call_that_reads_a_value_on_the_host_keeps_calling_run(tmp_path: Path) -> None:
    task = get_task("softmax")
    source = task.template.replace("def run(", "def _kkb_softmax_run(") + HOST_READ
    export_module(task, source, tmp_path / "best_softmax.py", dtype="float32")
    out = _probe(tmp_path, (
        "import warnings, torch, best_softmax as m\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    for _ in range(3):\n"
        "        x = torch.randn(4, 300)\n"
        "        assert torch.allclose(m.launch(x), torch.softmax(x, -1), atol=1e-5)\n"
        "print(list(m.launcher.refused.values()))\n"
        "print(sum('calls run()' in str(w.message) for w in caught))\n"))
    refused, warned = out.splitlines()
    assert "_local_scalar_dense read a value on the host" in refused and warned == "1"


def test_the_fake_reads_each_output_size_from_the_inputs() -> None:
    """matmul's [M, N] from A [M, K] and B [K, N]; rope's two outputs shaped as q and k."""
    rule = fake_rule(get_task("matmul"))
    assert fake_source(rule, ["a", "b"]) == (
        "torch.empty((a.shape[0], b.shape[1], ), dtype=a.dtype, device=a.device)")
    rope = fake_rule(get_task("rope"))
    assert rope is not None and len(rope) == 2


COMPILED = """
import torch, best_matmul, best_rope
from kernelkb.kernels.discovery import get_task
a, b = torch.randn(33, 70), torch.randn(70, 100)
f = torch.compile(lambda a, b: torch.ops.kernelkb.matmul(a, b).relu() * 2,
                  backend="{backend}", fullgraph=True)
assert torch.allclose(f(a, b), (a @ b).relu() * 2, atol=1e-4)
t = get_task("rope")
inputs = t.make_inputs(t.cpu_shapes[0], torch.float32, 0, "cpu")
g = torch.compile(lambda *xs: [o + 0 for o in torch.ops.kernelkb.rope(*xs)],
                  backend="{backend}", fullgraph=True)
for y, r in zip(g(*inputs), t.reference(*inputs)):
    assert torch.allclose(y, r, atol=1e-4), (y - r).abs().max()
print("ok")
"""


def _export_two(tmp_path: Path) -> None:
    for name in ("matmul", "rope"):
        task = get_task(name)
        export_module(task, task.template, tmp_path / f"best_{name}.py", dtype="float32")


def test_torch_compile_takes_the_op_whole_through_its_fake(tmp_path: Path) -> None:
    """fullgraph=True: a graph break (no fake, a schema torch cannot trace) fails it.
    aot_eager traces with fake tensors as inductor does, without compiling C++."""
    _export_two(tmp_path)
    assert _probe(tmp_path, COMPILED.format(backend="aot_eager")).strip() == "ok"


@pytest.mark.slow
def test_inductor_compiles_around_the_op(tmp_path: Path) -> None:
    """The default backend on the CPU (a minute of C++ compiles on two cores)."""
    _export_two(tmp_path)
    assert _probe(tmp_path, COMPILED.format(backend="inductor"), 900).strip() == "ok"


GRAPHED = """
import torch, best_matmul as m
a = torch.randn(16, 4096, device="cuda", dtype=torch.float16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
ref = a @ b
y = torch.ops.kernelkb.matmul(a, b)  # records and binds outside the capture
torch.cuda.synchronize()
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    out = torch.ops.kernelkb.matmul(a, b)
a.copy_(torch.randn_like(a))
graph.replay()
torch.cuda.synchronize()
assert (out - a @ b).abs().max().item() < 0.5, (out - a @ b).abs().max()
assert "run(" not in next(iter(m.launcher.sources.values()))
f = torch.compile(lambda a, b: torch.ops.kernelkb.matmul(a, b) + 1, fullgraph=True,
                  mode="reduce-overhead")
for _ in range(3):
    z = f(a, b)
assert (z - (a @ b + 1)).abs().max().item() < 0.5
print("ok")
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graphs_take_the_bound_plan(tmp_path: Path) -> None:
    task = get_task("matmul")
    export_module(task, task.template, tmp_path / "best_matmul.py", dtype="float16")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", GRAPHED], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-3000:]


def test_a_dtype_the_judge_never_checked_is_refused_on_its_first_call(tmp_path: Path) -> None:
    """Red team 3's dtype_only_checked: right in the dtype it was checked in, wrong in
    another. The exported op serves the checked dtype and names the others it refuses."""
    task = get_task("softmax")
    export_module(task, task.template, tmp_path / "best_softmax.py", dtype="float32")
    out = _probe(tmp_path, (
        "import torch, best_softmax as m\n"
        "x = torch.randn(4, 300)\n"
        "assert torch.allclose(m.launch(x), torch.softmax(x, -1), atol=1e-5)\n"
        "try:\n"
        "    m.launch(x.double())\n"
        "except TypeError as err:\n"
        "    print(err)\n"))
    assert "checked in float32 only, not float64" in out, out


LAZY = """
import os, torch, best_softmax as m
rows = [(r, c) for r in (1, 2, 3) for c in range(3, 103)]  # 300 distinct layouts
bad = []
for r, c in rows:
    x = torch.full((r, c), 100.0) + torch.randn(r, c)  # exp(100) overflows float32
    y = m.launch(x)
    if not torch.allclose(y, torch.softmax(x, -1), atol=1e-5):
        bad.append(f"{r}x{c}")
print("wrong", len(bad), bad[:3], "fresh", int(os.environ.get("KERNELKB_LAUNCH_PLAN") != "0"))
"""


@pytest.mark.slow
def test_state_kept_across_layouts_never_reaches_a_plan(tmp_path: Path) -> None:
    """Red team 11's lazy softmax counts the (rows, cols) it met in a module dict and drops
    the row max past 256: no judge meets that many, a server does within minutes. Each
    plan is recorded from the module as imported (plan_bind.PlanFresh), so all 300 layouts
    are right; run() per call (KERNELKB_LAUNCH_PLAN=0, which keeps the module's state)
    goes wrong on the last 44: the plant's count is real."""
    source = (ROOT / "tests/bad_kernels/redteam11_softmax_lazy_after_many_shapes.py").read_text()
    export_module(get_task("softmax"), source, tmp_path / "best_softmax.py", dtype="float32")
    assert _probe(tmp_path, LAZY, timeout=600).split()[:2] == ["wrong", "0"]
    os.environ["KERNELKB_LAUNCH_PLAN"] = "0"
    try:
        env = {**os.environ, "TRITON_INTERPRET": "1",
               "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
        done = subprocess.run([sys.executable, "-c", LAZY], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
    finally:
        del os.environ["KERNELKB_LAUNCH_PLAN"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[:2] == ["wrong", "44"], done.stdout


FUSED = """
import warnings, torch, best_swiglu as m
warnings.simplefilter("error")  # a layout that is refused a plan warns
silu = torch.nn.functional.silu
def check(gate, up):
    assert torch.allclose(m.launch(gate, up), silu(gate) * up, atol=1e-5)
for seed in range(3):
    fused = torch.randn(6, 256)
    gate, up = fused.chunk(2, -1)  # gate_up = x @ W_gate_up: one storage
    check(gate, up)
    check(up, gate)  # the other order: up lies first
    wide, other = torch.randn(6, 256), torch.randn(6, 256)
    check(wide[:, :128], other[:, 128:])  # laid out alike, two storages
    check(torch.randn(6, 128), torch.randn(6, 128))
print("refused", len(m.launcher.refused), "bound", len(m.launcher.sources))
"""


def test_a_fused_gate_up_is_a_plan_that_holds_wherever_the_halves_lie(tmp_path: Path) -> None:
    """Halves of one gate_up buffer (the layout a fused projection hands over) are a plan,
    not run() per call: each half is read from its own input, so the same plan is right
    when the halves swap places or come from two buffers laid out alike."""
    task = get_task("swiglu")
    export_module(task, task.template, tmp_path / "best_swiglu.py", dtype="float32")
    out = _probe(tmp_path, FUSED)
    assert out.split() == ["refused", "0", "bound", "2"], out


ACROSS = '''
def run(gate, up):
    half = gate.shape[1]
    if gate.untyped_storage().data_ptr() == up.untyped_storage().data_ptr() \\
            and up.data_ptr() - gate.data_ptr() == half * gate.element_size():
        # one view over both halves: rows past the first read up through gate's place
        both = gate.as_strided((gate.shape[0], 2 * half), (gate.stride(0), 1))
        rest = _kkb_swiglu_run(both[1:, :half], both[1:, half:])
        return torch.cat([_kkb_swiglu_run(gate[:1], up[:1]), rest])
    return _kkb_swiglu_run(gate, up)
'''

ACROSS_CALLS = """
import warnings, torch, best_swiglu as m
silu = torch.nn.functional.silu
fused = torch.randn(6, 256)
gate, up = fused.chunk(2, -1)
assert torch.allclose(m.launch(gate, up), silu(gate) * up, atol=1e-5)
wide, other = torch.randn(6, 256), torch.randn(6, 256)
g2, u2 = wide[:, :128], other[:, 128:]  # the same layouts, up elsewhere
assert torch.allclose(m.launch(g2, u2), silu(g2) * u2, atol=1e-5)
guarded = sum("_slow(" in text for text in m.launcher.sources.values())
print("plans", len(m.launcher.sources), "guarded", guarded)
"""


def test_a_plan_that_reads_one_input_through_another_holds_only_where_they_lie(
        tmp_path: Path) -> None:
    """A run() that reaches up through a view of gate's storage: its plan checks on each
    call that up still lies where it did, and calls run() where it does not."""
    task = get_task("swiglu")
    source = task.template.replace("\ndef run(", "\ndef _kkb_swiglu_run(") + ACROSS
    export_module(task, source, tmp_path / "best_swiglu.py", dtype="float32")
    out = _probe(tmp_path, ACROSS_CALLS)
    assert out.split() == ["plans", "1", "guarded", "1"], out
