"""The allow-list of what a candidate's source may name (optimizer/sandbox/imports.py),
read from the source alone: every shipped kernel passes it, and the third held-out
round's routes (numpy's readers, getattr, an ATen pre-run hook, a constexpr-wrapped
Python helper) are refused before any of their code runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.optimizer.sandbox import imports

PLANTS = Path(__file__).resolve().parents[2] / "bad_kernels"
# held-out round 3: what each went through, and what the allow-list reads in it
REFUSED = {
    "redteam3_hook_aten_out": "add_pre_run_hook",
    "redteam3_hook_aten_mm": "add_pre_run_hook",
    "redteam3_interp_numpy_body": "imports numpy",
    "redteam3_numpy_clock_bomb": "imports numpy",
    "redteam3_numpy_reads_uid_map": "imports numpy",
    "redteam3_getattr_sys_modules": "imports sys",
    "redteam3_host_info_leak": "imports numpy",
}


@pytest.mark.parametrize("task", sorted(all_tasks()))
def test_every_point_of_every_shipped_space_passes(task: str) -> None:
    spec = get_task(task)
    for config in spec.space():
        assert imports.problems(spec.render(config)) == [], (task, config)


def test_the_good_plant_passes() -> None:
    assert imports.problems((PLANTS / "_good.py").read_text()) == []


@pytest.mark.parametrize(("plant", "why"), sorted(REFUSED.items()))
def test_round_three_routes_are_refused_from_the_source(plant: str, why: str) -> None:
    found = imports.problems((PLANTS / f"{plant}.py").read_text())
    assert any(why in line for line in found), found


@pytest.mark.parametrize(("source", "why"), [
    ("import torch\nx = torch.sys.modules\n", "reaches the module torch.sys"),
    ("import triton\nd = triton.runtime.driver\n", "reaches the module triton.runtime"),
    ("from torch.utils import _python_dispatch\n", "imports from torch.utils"),
    ("import torch\nf = torch.Tensor.__dict__\n", "attribute __dict__"),
    ("import triton\nc = triton.Config({}, pre_hook=print)\n", "pre_hook="),
    ("import triton.language as tl\ndef f(v):\n    return v\nF = tl.constexpr(f)\n",
     "constexpr"),
    ("g = getattr\n", "uses getattr"),
    ("from . import sibling\n", "imports from ."),
])
def test_each_way_past_the_source_is_named(source: str, why: str) -> None:
    found = imports.problems(source)
    assert any(why in line for line in found), found
    assert why.split()[0] in imports.message(found) or found


def test_what_a_wrapper_needs_is_allowed() -> None:
    source = ("from __future__ import annotations\nimport math, functools\n"
              "import torch\nimport torch.nn.functional as F\nimport triton\n"
              "import triton.language as tl\nfrom triton.language.extra import libdevice\n"
              "s = torch.cuda.current_stream()\nn = triton.cdiv(10, 3)\n"
              "y = F.softmax(torch.ones(2), -1)\nC = tl.constexpr(4)\n"
              "if __name__ == '__main__':\n    pass\n")
    assert imports.problems(source) == []


@pytest.mark.parametrize(("source", "why"), [
    # typing's forward references: text that typing compiles and may evaluate
    ("import typing\nH = typing.List['int']\n", "string subscript"),
    ("from typing import Dict\nH = Dict[str, 'x']\n", "string subscript"),
    ("import typing as t\nT = t.TypeVar('T', bound='int')\n", "string handed"),
    ("import typing\na = typing.get_args(typing.List[int])\n", "get_args"),
    # a library's internals, whatever the name
    ("import torch\nr = torch.nn.Module()._call_impl\n", "private attribute _call_impl"),
    ("def f(ref):\n    return ref._evaluate({}, {}, frozenset())\n", "_evaluate"),
    ("class A:\n    def f(self, o):\n        self = o\n        return self._x\n", "_x"),
    ("from typing import _eval_type\n", "private name _eval_type"),
    # the random generators' seeds and state
    ("import torch\ns = torch.initial_seed()\n", "initial_seed"),
    ("import torch\ns = torch.cuda.initial_seed()\n", "initial_seed"),
    ("import torch\ng = torch.default_generator\n", "default_generator"),
    ("from torch import initial_seed\n", "initial_seed"),
])
def test_strings_made_code_privates_and_seeds_are_refused(source: str, why: str) -> None:
    found = imports.problems(source)
    assert any(why in line for line in found), found


def test_a_class_reads_its_own_private_attributes() -> None:
    source = ("import torch\nclass Cache:\n    def __init__(self):\n        self._d = {}\n"
              "    def get(self, k):\n        return self._d.get(k)\n"
              "from typing import List, Optional\nX: Optional[List[int]] = None\n")
    assert imports.problems(source) == []


@pytest.mark.parametrize("source", [
    "import operator, torch\nm = torch.nn.Module()\nm.forward = operator.getitem\n",
    "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n"
    "        super_ = 0\n        self.forward = torch.sum\n",
    "import torch\nm = torch.nn.Module()\nm.forward = print\n",
])
def test_a_library_callable_stored_as_an_attribute_is_refused(source: str) -> None:
    assert any("another module's callable" in line for line in imports.problems(source))


@pytest.mark.parametrize("source", [
    "import torch\ntorch.seen = {}\n",
    "import triton.language as tl\ntl.seen = {}\n",
    "import torch\ntorch.Tensor.seen = 0\n",
    "import torch\nnn = torch.nn\nnn.seen = 1\n",
    "def run(x, w):\n    w.calls = 1\n    return x\n",
    "import triton\n\n\ndef k():\n    pass\n\n\nk = triton.jit(k)\nk.seen = 1\n",
    "import math\n\n\ndef run(x, math=math):\n    math.n = 1\n",
    "import torch\ndel torch.seen\n",
])
def test_attributes_set_on_what_the_candidate_did_not_make_are_refused(source: str) -> None:
    """State on a module, a library's class or a caller's tensor outlives every fresh import
    of the module the launch plans are recorded from."""
    assert any("sets the attribute" in p for p in imports.problems(source)), source


def test_its_own_kernels_classes_and_instances_take_attributes() -> None:
    source = ("import triton\n\n\n@triton.jit\ndef k(x):\n    pass\n\n\nk.seen = []\n\n\n"
              "class Plan:\n    def __init__(self):\n        self.n = 0\n\n\n"
              "PLAN = Plan()\nPLAN.n = 1\nPlan.limit = 4\n")
    assert imports.problems(source) == []


@pytest.mark.parametrize("read", ["k.device_caches", "k.cache", "k.configs_timings",
                                  "k.fn.device_caches"])
def test_tritons_caches_are_not_read(read: str) -> None:
    """Shared by every fresh import of the module: a count of the layouts met."""
    source = f"import triton\n\n\n@triton.jit\ndef k(x):\n    pass\n\n\nN = len({read})\n"
    assert any("Triton's caches" in p for p in imports.problems(source)), read


def test_functools_cache_stays_free() -> None:
    assert imports.problems("import functools\n\n\n@functools.cache\ndef f(n):\n"
                            "    return n\n") == []


@pytest.mark.parametrize("expr", ["x.data_ptr() % 64", "x.data_ptr() == y.data_ptr()",
                                  "(x.data_ptr() - y.data_ptr()) // 2", "id(x) % 2",
                                  "hash(x)", "x.untyped_storage().nbytes()",
                                  "x.storage().size()"])
def test_where_memory_sits_is_not_read_past_its_alignment(expr: str) -> None:
    """A launch plan is keyed on layout and 16-byte alignment: any other fact of an address
    would be frozen into the plan of a layout's first call."""
    assert imports.problems(f"def run(x, y):\n    return {expr}\n"), expr


def test_sixteen_byte_alignment_may_be_read() -> None:
    assert imports.problems("def run(x):\n    return x.data_ptr() % 16 == 0\n") == []
