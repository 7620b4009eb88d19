"""Triton GEMM configurations of other tools as points of the project's ``matmul`` task, so
that they feed that task's bootstrap and ranker instead of standing apart under a name of
their own.

kb/ may not import kernels/ (torch), so the task's knob names are written out here, as in
kernels/matmul.py; tests/kb/test_import_tuner_files.py checks that every configuration
mapped here is a whole point of that task (``Task.complete``), so the two cannot drift.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MATMUL = "matmul"
# the tile knobs a GEMM config must have to be read as one (named as Triton users do)
TILE = ("BLOCK_M", "BLOCK_N", "BLOCK_K")
# what the task's kernel does where another tool's config is silent: no grouped program
# order, the masked K loop, no split-K (its reduction the task's default), the tiled (not
# persistent TMA) kernel
DEFAULTS: dict[str, Any] = {"GROUP_M": 1, "EVEN_K": False, "SPLIT_K": 1,
                            "SPLIT_REDUCE": "kernel", "PERSISTENT_TMA": False, "FLATTEN": False}
KNOBS = (*TILE, "GROUP_M", "NUM_WARPS", "NUM_STAGES", "EVEN_K", "SPLIT_K", "SPLIT_REDUCE",
         "PERSISTENT_TMA", "FLATTEN")
_MATMUL_NAME = re.compile(r"matmul|gemm|(?:^|_)mm(?:_|$)", re.I)
_DTYPE = re.compile(r"^torch\.(\w+)$")


def is_matmul_name(kernel_name: str) -> bool:
    """matmul_kernel, _gemm_fwd, triton_mm, bmm_... (a name that says GEMM)."""
    return bool(_MATMUL_NAME.search(kernel_name))


def matmul_config(params: Mapping[str, Any], num_warps: Any, num_stages: Any,
                  fixed: Mapping[str, Any] | None = None
                  ) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(the task's config, the other tool's params the task has no knob for, the knobs
    filled in with ``DEFAULTS``). ``fixed`` states knobs the tool's kernel implies (an
    Inductor template never splits K). Raises ValueError when a tile or launch value is
    not an integer (no GEMM config then)."""
    config: dict[str, Any] = {}
    for name, value in (*((k, params.get(k)) for k in TILE), ("NUM_WARPS", num_warps),
                        ("NUM_STAGES", num_stages)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} is {value!r}, not a positive integer")
        config[name] = value
    filled = []
    for name, default in DEFAULTS.items():
        if fixed and name in fixed:
            config[name] = fixed[name]
        elif name in params:
            config[name] = params[name]
        else:
            config[name] = default
            filled.append(f"{name}={default}")
    left_out = {k: v for k, v in params.items() if k not in KNOBS}
    return {k: config[k] for k in KNOBS}, left_out, filled


def shape_label(m: int, n: int, k: int) -> str:
    """The matmul task's shape label (Task.shape_label): "M=16,N=4096,K=4096"."""
    return f"M={m},N={n},K={k}"


def dtype_name(text: str) -> str | None:
    """"torch.float16" -> "float16"; None for anything else."""
    found = _DTYPE.match(text.strip())
    return found.group(1) if found else None


def gflops(m: int, n: int, k: int, time_ms: float) -> float | None:
    """The GEMM's rate at ``time_ms`` (2MNK operations), for the record's TFLOP/s."""
    return 2 * m * n * k / (time_ms * 1e6) if time_ms > 0 else None


def describe(params: Mapping[str, Any]) -> str:
    """Parameters as one line, for feedback text: "ACC_TYPE='tl.float32', ALLOW_TF32=False"."""
    return ", ".join(f"{k}={v!r}" for k, v in params.items())
