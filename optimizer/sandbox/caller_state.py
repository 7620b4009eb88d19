"""What a call may not change for its caller beyond the outputs: PyTorch's global state,
and the input tensors' own metadata.

Why: an op is called inside a model. A wrapper that leaves autocast on, turns grad mode
off, switches TF32 matmuls on, or changes the default dtype changes every op the model
runs after it; one that sets ``requires_grad`` on a weight, rebinds its ``.data`` to
other storage or restrides it changes the caller's tensors without writing a byte of
them. The source rules name the setters they know (imports.py); this is the general
rule, read around every checked call: whatever the route, a difference is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _autocast(device: str) -> Callable[[], Any]:
    return lambda: (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))


def _cuda_device() -> int | None:
    return torch.cuda.current_device() if torch.cuda.is_available() \
        and torch.cuda.is_initialized() else None


# name -> a reader of one piece of global state a wrapper could change for its caller
READERS: dict[str, Callable[[], Any]] = {
    "grad mode": torch.is_grad_enabled,
    "inference mode": torch.is_inference_mode_enabled,
    "anomaly mode": torch.is_anomaly_enabled,
    "autocast (cuda)": _autocast("cuda"),
    "autocast (cpu)": _autocast("cpu"),
    "autocast cache": torch.is_autocast_cache_enabled,
    "deterministic algorithms": torch.are_deterministic_algorithms_enabled,
    "default dtype": torch.get_default_dtype,
    "default device": lambda: str(torch.get_default_device()),
    "float32 matmul precision": torch.get_float32_matmul_precision,
    "TF32 matmuls": lambda: torch.backends.cuda.matmul.allow_tf32,
    "reduced-precision fp16 reductions":
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    "reduced-precision bf16 reductions":
        lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    "cuDNN TF32": lambda: torch.backends.cudnn.allow_tf32,
    "cuDNN benchmark": lambda: torch.backends.cudnn.benchmark,
    "cuDNN deterministic": lambda: torch.backends.cudnn.deterministic,
    "threads": torch.get_num_threads,
    "current CUDA device": _cuda_device,
}


def snapshot() -> dict[str, Any]:
    """The global state now, by name (a reader this PyTorch lacks is left out)."""
    state = {}
    for name, read in READERS.items():
        try:
            state[name] = read()
        except (AttributeError, RuntimeError):
            continue
    return state


def changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """``name: was -> now`` for every piece of state that differs."""
    # a state first read as None (CUDA not yet initialised) may be made by the call
    return [f"{name}: {before[name]!r} -> {after.get(name)!r}" for name in before
            if before[name] is not None and after.get(name) != before[name]]


def tensor_metadata(values: list[Any]) -> list[tuple[Any, ...] | None]:
    """Per input, what its caller holds besides its bytes (None for a non-tensor)."""
    out: list[tuple[Any, ...] | None] = []
    for x in values:
        if not isinstance(x, torch.Tensor):
            out.append(None)
            continue
        out.append((x.requires_grad, x.is_leaf, x.grad_fn is None, x.dtype, tuple(x.shape),
                    x.stride(), x.storage_offset(), x.untyped_storage().data_ptr(),
                    x.device))
    return out


FIELDS = ("requires_grad", "is_leaf", "grad_fn", "dtype", "shape", "strides",
          "storage offset", "storage", "device")


def metadata_changed(before: list[tuple[Any, ...] | None],
                     after: list[tuple[Any, ...] | None]) -> list[str]:
    """``input i: field`` for each input whose metadata differs."""
    out = []
    for i, (was, now) in enumerate(zip(before, after, strict=True)):
        if was is not None and now is not None and was != now:
            out += [f"input {i}: {field}" for field, a, b in zip(FIELDS, was, now, strict=True)
                    if a != b]
    return out
