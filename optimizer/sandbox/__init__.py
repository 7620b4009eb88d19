"""The sandboxed evaluator: one candidate per subprocess, layered feedback back.

Imports nothing but torch, triton, numpy and the tasks (kernelkb.kernels), so it
runs on a bare GPU host. See evaluator.evaluate for the entry point.
"""

from kernelkb.optimizer.sandbox.evaluator import (
    evaluate,
    measure_baseline,
    resolve_shapes,
    sweep_shape_set,
)
from kernelkb.optimizer.sandbox.hardware import detect_environment, measure_peaks
from kernelkb.optimizer.sandbox.result import ERROR_KINDS, Baseline, EvalResult

__all__ = [
    "ERROR_KINDS",
    "Baseline",
    "EvalResult",
    "detect_environment",
    "evaluate",
    "measure_baseline",
    "measure_peaks",
    "resolve_shapes",
    "sweep_shape_set",
]
