"""The exported best kernel works from PyTorch as torch.ops.kernelkb.<task>."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.export import export_module, op_signature

PROBE = """
import torch, best_softmax
x = torch.randn(5, 300)
y = torch.ops.kernelkb.softmax(x)
assert torch.allclose(y, torch.softmax(x, -1), atol=1e-5), (y - torch.softmax(x, -1)).abs().max()
z = torch.compile(best_softmax.softmax_op, backend="eager")(x)
assert z.shape == x.shape
print("ok")
"""


def test_softmax_exports_as_a_custom_op(tmp_path: Path) -> None:
    task = get_task("softmax")
    path = export_module(task, task.render({"NUM_WARPS": 2}), tmp_path / "best_softmax.py",
                         dtype="float32")
    text = path.read_text()
    assert "_kkb_lib.define('softmax(Tensor x) -> Tensor')" in text
    assert "register_fake" in text and "NUM_WARPS = 2" in text
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_signature_is_read_from_the_task() -> None:
    task = get_task("softmax")
    params, returns, fake_from = op_signature(task, task.template, "float16")
    assert params == [("x", "torch.Tensor")] and returns == "torch.Tensor" and fake_from == 0


def _probe(path: Path, check: str) -> subprocess.CompletedProcess[str]:
    """Run ``check`` in a fresh interpreter (the op registry is per process) beside the
    exported module, in the Triton interpreter; it must exit 0."""
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(path.parent), str(Path(__file__).parents[2])])}
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_an_op_that_writes_its_inputs_declares_them_mutated(tmp_path: Path) -> None:
    """Attention writes the KV cache: the custom op says so in its schema (else
    torch.compile may reorder or drop the writes), and the written cache is right."""
    task = get_task("attention")
    path = export_module(task, task.template, tmp_path / "best_attention.py",
                         dtype="float32", note="test")
    check = (
        "import torch, best_attention\n"
        "from kernelkb.kernels.discovery import get_task\n"
        "t = get_task('attention')\n"
        "print(torch.ops.kernelkb.attention.default._schema)\n"
        "inputs = t.make_inputs(t.cpu_shapes[0], torch.float32, 0, 'cpu')\n"
        "ref_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]\n"
        "out, ref = torch.ops.kernelkb.attention(*inputs), t.reference(*ref_inputs)\n"
        "assert torch.allclose(out, ref, atol=1e-4), (out - ref).abs().max()\n"
        "assert all(torch.allclose(inputs[i], ref_inputs[i], atol=1e-4, equal_nan=True)\n"
        "           for i in (3, 4))  # the caches' unwritten slots hold NaN\n"
    )
    done = _probe(path, check)
    assert "Tensor(a3!) k_cache, Tensor(a4!) v_cache" in done.stdout


def test_a_parameter_with_a_default_is_kept_in_the_schema(tmp_path: Path) -> None:
    """rmsnorm's run(x, weight, eps=1e-6): the op exists, eps defaults, and a given eps is
    passed through (a wrong eps would change the output)."""
    task = get_task("rmsnorm")
    path = export_module(task, task.template, tmp_path / "best_rmsnorm.py", dtype="float32")
    check = (
        "import torch, best_rmsnorm\n"
        "from kernelkb.kernels.discovery import get_task\n"
        "t = get_task('rmsnorm')\n"
        "print(torch.ops.kernelkb.rmsnorm.default._schema)\n"
        "x, w = t.make_inputs(t.cpu_shapes[0], torch.float32, 0, 'cpu')\n"
        "assert torch.allclose(torch.ops.kernelkb.rmsnorm(x, w), t.reference(x, w), atol=1e-4)\n"
        "big = torch.ops.kernelkb.rmsnorm(x, w, 10.0)\n"
        "assert torch.allclose(big, best_rmsnorm.run(x, w, 10.0), atol=1e-5)\n"
        "assert not torch.allclose(big, t.reference(x, w), atol=1e-2)\n"
    )
    done = _probe(path, check)
    assert "float eps=9.99999" in done.stdout  # 1e-6 as the schema prints a double


def test_export_never_runs_the_candidates_module_code(tmp_path: Path) -> None:
    """A forged 'new best' whose module code writes a file: exporting it reads run()'s
    signature from the syntax tree, so the code never runs next to the host's secrets."""
    task = get_task("softmax")
    marker = tmp_path / "ran_on_the_host"
    source = task.template + f"\nopen({str(marker)!r}, 'w').write('pwned')\n"
    path = export_module(task, source, tmp_path / "best_softmax.py", dtype="float32")
    assert not marker.exists()
    assert "_kkb_lib.define('softmax(Tensor x) -> Tensor')" in path.read_text()


def test_a_run_without_a_plain_signature_gets_no_op_wrapper() -> None:
    task = get_task("softmax")
    assert op_signature(task, task.template + "\ndef run(*args):\n    pass\n", "float16") is None
    assert op_signature(task, "run = lambda x: x\n", "float16") is None
