"""Inputs placed between poisoned guard regions.

On a GPU a load past the end of a tensor is silent: it reads whatever the allocator put
next to it, often another input of the same shape, and an unmasked tail can still come
out right. Each checked input is therefore copied into the middle of a larger buffer whose
two ends hold NaN (floating types) or the type's largest value (integers), so a read past
either end changes the answer and the shape fails its check. Alignment is kept: the guard
is a whole number of 64 KiB, more than any vector or TMA alignment asks. The worker
guards GPU inputs only: the CPU interpreter checks every load against its tensor's
storage and names the line, which a guard inside that storage would hide.
"""

from __future__ import annotations

from typing import Any

import torch

GUARD_BYTES = 64 * 1024


def poison_value(dtype: torch.dtype) -> float | int | None:
    """What the guard holds for ``dtype``; None where no value would show (bool, complex)."""
    if dtype.is_floating_point:
        return float("nan")
    if dtype.is_complex or dtype == torch.bool:
        return None
    return torch.iinfo(dtype).max


def guarded(value: Any) -> Any:
    """A contiguous tensor as a view into the middle of a poisoned buffer (a copy: the
    caller's tensor is untouched); anything else as it is."""
    if not isinstance(value, torch.Tensor) or value.numel() == 0 \
            or not value.is_contiguous():
        return value
    poison = poison_value(value.dtype)
    if poison is None:
        return value
    guard = GUARD_BYTES // value.element_size()
    buffer = torch.empty(value.numel() + 2 * guard, dtype=value.dtype, device=value.device)
    buffer[:guard].fill_(poison)
    buffer[-guard:].fill_(poison)
    inner = buffer[guard:guard + value.numel()]
    inner.copy_(value.reshape(-1))
    return inner.view(value.shape)


POISONED_BLOCKS = 8  # more than the output sets any timing loop rotates through


def poison_in_place(tensors: list[torch.Tensor]) -> None:
    """Overwrite each tensor with the poison (a call's output the caller is done with)."""
    for t in tensors:
        poison = poison_value(t.dtype)
        if poison is not None and t.numel():
            t.fill_(poison)


def poison_freed(outputs: list[tuple[tuple[int, ...], torch.dtype, torch.device]]) -> None:
    """Fill the allocator's freed blocks of each output's (shape, dtype, device) with the
    poison.

    A kernel that stops writing its output (lazy after some calls) can still return the
    right answer: ``torch.empty_like`` hands back the block the last call's output was
    freed from, and the answer is still in it. Taking ``POISONED_BLOCKS`` blocks of the
    same size (best fit gives back exactly those freed ones first), poisoning them and
    freeing them again, makes the next output start as poison, so a call that writes
    nothing fails its check. The caller must hold no output of its own any more: a block
    still held is not free, and would come back unpoisoned once let go."""
    for shape, dtype, device in outputs:
        poison_in_place([torch.empty(shape, dtype=dtype, device=device)
                         for _ in range(POISONED_BLOCKS)])  # all taken, then all freed
