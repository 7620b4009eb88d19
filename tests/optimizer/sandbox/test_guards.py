"""Guard regions around checked inputs: a read past either end sees poison, not data."""

from __future__ import annotations

import math

import torch

from kernelkb.optimizer.sandbox.guards import GUARD_BYTES, guarded


def test_an_input_sits_between_poisoned_guards_with_its_values_and_alignment() -> None:
    x = torch.randn(3, 5, dtype=torch.float16)
    g = guarded(x)
    assert torch.equal(g, x) and g.data_ptr() != x.data_ptr() and g.is_contiguous()
    storage = torch.empty(0, dtype=g.dtype).set_(g.untyped_storage())
    pad = GUARD_BYTES // g.element_size()
    assert g.storage_offset() == pad and (g.data_ptr() - storage.data_ptr()) % 1024 == 0
    assert storage[:pad].isnan().all() and storage[pad + x.numel():].isnan().all()


def test_integers_get_their_largest_value_and_the_rest_is_left_alone() -> None:
    pos = torch.arange(7, dtype=torch.int64)
    g = guarded(pos)
    storage = torch.empty(0, dtype=torch.int64).set_(g.untyped_storage())
    assert torch.equal(g, pos) and int(storage[-1]) == torch.iinfo(torch.int64).max
    mask = torch.ones(4, dtype=torch.bool)
    strided = torch.randn(4, 4).t()  # not contiguous: a layout a condition chose
    assert guarded(mask) is mask and guarded(strided) is strided and guarded(3.0) == 3.0
    assert math.isnan(float(torch.empty(0).set_(guarded(torch.ones(2)).untyped_storage())[0]))


def test_an_output_is_poisoned_in_place():
    """The judge's check after its timed calls (lazy_after_n.py): the last answer is
    overwritten where it lies (the freed blocks of its size are poisoned too, which only
    the GPU's caching allocator makes meaningful: test_gpu.py)."""
    import torch

    from kernelkb.optimizer.sandbox import guards

    out = [torch.ones(4, 8, dtype=torch.float16), torch.ones(3, dtype=torch.int32),
           torch.ones(2, dtype=torch.bool)]
    guards.poison_in_place(out)
    assert torch.isnan(out[0]).all()
    assert (out[1] == torch.iinfo(torch.int32).max).all()
    assert out[2].all()  # no poison shows in a bool: left as it is
