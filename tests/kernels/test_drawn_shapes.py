"""The judge's drawn shape: within the lists' bounds, on no list, under the byte cap, and
running the kernels the checks compiled (same power-of-two bucket and alignment)."""

from __future__ import annotations

import math
import random

from kernelkb.kernels.drawn_shapes import draw_shape


def _bytes(shape):
    return 2 * math.prod(shape)


def _under(cap):
    return lambda shape: _bytes(shape) <= cap


def test_a_drawn_shape_keeps_each_dimensions_kind_and_is_on_no_list():
    # (rows, heads, head_dim, causal): rows free, heads fixed, head_dim powers of two, a flag
    among = [(1, 8, 64, 0), (4096, 8, 128, 1), (37, 8, 64, 1)]
    declared = [*among, (2, 8, 64, 0)]
    rng = random.Random(0)
    drawn = [draw_shape(among, declared, _under(1 << 30), rng) for _ in range(200)]
    assert all(d is not None for d in drawn)
    assert not set(drawn) & set(declared)
    rows, heads, dims, flags = zip(*drawn, strict=True)
    assert min(rows) >= 1 and max(rows) <= 4096 and len(set(rows)) > 30
    assert set(heads) == {8}
    assert set(dims) <= {64, 128} and len(set(dims)) == 2
    assert set(flags) == {0, 1}


def test_a_drawn_shape_is_cut_to_the_cap():
    among = [(1, 7), (4096, 32000)]
    rng = random.Random(1)
    for _ in range(50):
        shape = draw_shape(among, among, _under(1 << 16), rng)
        assert shape is not None and _bytes(shape) <= 1 << 16


def test_no_shape_is_drawn_where_the_lists_leave_none():
    assert draw_shape([(4, 128)], [(4, 128)], _under(1 << 30), random.Random(2)) is None
    assert draw_shape([(1, 7), (4, 128)], [], _under(1), random.Random(3)) is None
    assert draw_shape([], [], _under(1 << 30), random.Random(4)) is None


def test_a_drawn_dimension_keeps_what_triton_specialises_on():
    """Each free dimension stays in the power-of-two bucket of the shape it was drawn
    from, no larger, and divisible by 16 exactly when that shape's is: a block size from
    next_power_of_2 and the arguments' alignment are those of a checked shape."""
    among = [(1, 32000), (32768, 1024), (4096, 32768), (7, 100)]
    rng = random.Random(5)
    for _ in range(300):
        shape = draw_shape(among, among, _under(1 << 31), rng)
        assert shape is not None
        assert any(all(_bucket(d) == _bucket(a) and d <= a and (d % 16 == 0) == (a % 16 == 0)
                       for d, a in zip(shape, anchor, strict=True)) for anchor in among), shape


def test_the_anchor_is_a_shape_asked_the_bounds_take_in_the_rest():
    """The judge anchors on the shapes the evaluation asked (the worker compiled those);
    an edge shape only widens the bounds: no draw lands in a bucket only it reaches."""
    asked = [(1, 32000), (4096, 32768)]
    among = [*asked, (2, 70000), (1823, 781)]
    rng = random.Random(6)
    for _ in range(300):
        shape = draw_shape(among, among, _under(1 << 31), rng, anchors=asked)
        assert shape is not None
        assert any(all(_bucket(d) == _bucket(a) and d <= a
                       for d, a in zip(shape, anchor, strict=True)) for anchor in asked), shape


def _bucket(n):
    return (n - 1).bit_length()
