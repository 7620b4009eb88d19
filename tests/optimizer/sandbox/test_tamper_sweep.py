"""The tamper check compares the held functions' insides in one sweep (tamper._Functions:
``gc.get_referents`` over all of them, no audited ``__code__`` read each). The sweep only
ever decides that nothing changed: every in-place change it must see is still named, on
every check while it lasts, and a field made on first use (a function's ``__dict__``)
is no change, after which the sweep is used again."""

from __future__ import annotations

import ctypes
import sys
import types

import pytest

from kernelkb.optimizer.sandbox import tamper

SOURCE = '''
def plain(a, b=1, *, c=2):
    return a + b + c

def _outer():
    limit = 0.5
    def closed(x):
        return x < limit
    return closed

closed = _outer()

def other(a, b=3, *, c=4):
    return a - b - c

class Holder:
    @staticmethod
    def still(x):
        return x

    @classmethod
    def built(cls, x):
        return x

    @property
    def read(self):
        return 1
'''
NAME = "tamper_sweep_target"


@pytest.fixture
def target():
    module = types.ModuleType(NAME)
    exec(compile(SOURCE, f"<{NAME}>", "exec"), vars(module))  # noqa: S102 - the test's own source
    sys.modules[NAME] = module
    yield module
    del sys.modules[NAME]


@pytest.fixture
def snapshot(target):
    taken = tamper.Snapshot(extra=(NAME,))
    assert taken.changes() == []
    return taken


def _named(snapshot) -> set[str]:
    return {c.where for c in snapshot.changes()}


def test_the_sweep_covers_the_harness_functions(snapshot, target):
    """On the interpreters it knows, every held function is swept (none left to be read
    one by one), the test module's included, and a check with no change uses it alone."""
    if not tamper._TRAVERSAL_KNOWN:
        pytest.skip("gc.get_referents lists a function's fields in another order here")
    functions = snapshot._functions
    assert functions.others == []
    assert functions._referents is not None
    assert functions.unchanged()


def _swap_code(m):
    m.plain.__code__ = m.other.__code__


def _swap_defaults(m):
    m.plain.__defaults__ = (5,)


def _drop_defaults(m):
    m.plain.__defaults__ = None


def _swap_kwdefaults(m):
    m.plain.__kwdefaults__ = {"c": 7}


def _rebind_cell(m):
    m.closed.__closure__[0].cell_contents = 10.0


def _empty_cell(m):
    del m.closed.__closure__[0].cell_contents


def _rewrap_staticmethod(m):
    vars(m.Holder)["still"].__init__(lambda x: -x)


def _swap_classmethod_code(m):
    vars(m.Holder)["built"].__func__.__code__ = (lambda cls, x: -x).__code__


def _rewrap_property(m):
    vars(m.Holder)["read"].__init__(lambda self: 2)


def _defaults_through_the_module_field(m):
    """The defaults moved to the module's place in the field list (the module dropped):
    the sweep's list is then shorter, never the same."""
    defaults = m.plain.__defaults__
    del m.plain.__module__
    m.plain.__module__ = defaults
    m.plain.__defaults__ = None


CHANGES = [
    (_swap_code, f"{NAME}.plain"), (_swap_defaults, f"{NAME}.plain"),
    (_drop_defaults, f"{NAME}.plain"), (_swap_kwdefaults, f"{NAME}.plain"),
    (_rebind_cell, f"{NAME}.closed"), (_empty_cell, f"{NAME}.closed"),
    (_rewrap_staticmethod, f"{NAME}.Holder.still"),
    (_swap_classmethod_code, f"{NAME}.Holder.built"),
    (_rewrap_property, f"{NAME}.Holder.read"),
    (_defaults_through_the_module_field, f"{NAME}.plain"),
]


@pytest.mark.parametrize(("change", "named"), CHANGES, ids=[c[0].__name__ for c in CHANGES])
def test_an_in_place_change_is_named_on_every_check(snapshot, target, change, named):
    change(target)
    assert named in _named(snapshot)
    assert named in _named(snapshot)  # still there: the sweep took nothing in


def test_a_field_made_on_first_use_is_no_change(snapshot, target):
    """Reading a function's ``__dict__`` or ``__annotations__`` makes it: the sweep's list
    differs, the one-by-one comparison finds nothing, and the sweep starts again from
    there; a change made after it is still seen."""
    functions = snapshot._functions
    target.plain.__dict__["seen"] = True
    _ = target.other.__annotations__
    assert not functions.unchanged() or not tamper._TRAVERSAL_KNOWN
    assert snapshot.changes() == []
    assert functions.unchanged() or not tamper._TRAVERSAL_KNOWN
    _swap_defaults(target)
    assert f"{NAME}.plain" in _named(snapshot)


def test_a_code_swapped_through_a_raw_pointer_is_named(snapshot, target):
    """No audited event at all: the function's code pointer written with ctypes (the
    field's place checked first; skipped where it lies elsewhere)."""
    plain, new = target.plain, target.other.__code__
    field = ctypes.c_void_p.from_address(id(plain) + 6 * ctypes.sizeof(ctypes.c_void_p))
    if sys.version_info[:2] != (3, 11) or field.value != id(plain.__code__):
        pytest.skip("the function's code pointer is not where this test writes")
    was = field.value
    field.value = id(new)  # borrowed: `new` stays alive through target.other
    try:
        assert plain.__code__ is new
        assert f"{NAME}.plain" in _named(snapshot)
    finally:
        field.value = was
    assert snapshot.changes() == []


def test_the_sweep_reads_with_its_own_reader(snapshot, target, monkeypatch):
    """``gc`` is not a watched module: a replaced ``gc.get_referents`` that answers the
    old list does not hide a swap."""
    stale = {}

    def old_answer(*objects):
        return stale.setdefault("list", tamper._REFERENTS(*objects))

    monkeypatch.setattr("gc.get_referents", old_answer)
    old_answer(*snapshot._functions._args)
    _swap_code(target)
    assert f"{NAME}.plain" in _named(snapshot)
