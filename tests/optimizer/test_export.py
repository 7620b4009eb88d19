"""The exported best kernel works from PyTorch as torch.ops.kernelkb.<task>."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kernels.base import get_task
from optimizer.export import export_module, op_signature

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
    assert '@torch.library.custom_op("kernelkb::softmax"' in text
    assert "register_fake" in text and "NUM_WARPS = 2" in text
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_signature_is_read_from_the_task() -> None:
    task = get_task("softmax")
    params, returns, fake_from = op_signature(task, task.template, "float16")
    assert params == [("x", "torch.Tensor")] and returns == "torch.Tensor" and fake_from == 0
