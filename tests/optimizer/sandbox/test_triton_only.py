"""The Triton-only rule (optimizer/sandbox/provenance.py): every planted way of computing
the answer outside the candidate's own Triton kernels is rejected as ``torch_compute``
with a message naming what ran, and honest candidates pass.

Most cases run the worker in-process (a fraction of a second each); two go through the
whole sandboxed subprocess to show the rule holds there too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from in_process_worker import evaluate_here

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import evaluate

BAD = Path(__file__).parents[2] / "bad_kernels"
SHAPES = [[4, 128], [1, 7]]


def run_worker_here(source: str, tmp_path: Path, task: str = "softmax",
                    shapes: list[list[int]] = SHAPES, *, refuse_introspection: bool = True
                    ) -> dict:
    request = {"task": task, "dtype": "float16", "shapes": shapes, "seeds": 2,
               "source": source, "result_path": str(tmp_path / "result.json"),
               "refuse_introspection": refuse_introspection,
               # in this process: the readers stay out of the test's own (surroundings.py)
               "refuse_surroundings": False,
               "refuse_imports": False}  # the layers behind the source allow-list
    evaluate_here(request)
    return json.loads((tmp_path / "result.json").read_text())


# planted file -> what the message must name
CHEATS = {
    "torch_plain": "no Triton kernel of the candidate launched inside run(); PyTorch compute "
                   "that ran: aten::_softmax",
    "torch_fallback": "aten::_softmax ran inside run() on the data and its result reached output 0",
    "overwrite_after_launch": "aten::_softmax ran inside run()",
    "inplace_fixup": "aten::div_, aten::sum ran inside run()",
    "numpy_roundtrip": "Tensor.numpy() read the data on the host",
    "numpy_hidden_read": "output 0 holds values from aten::lift_fresh",
    "ctypes_write": "ctypes.string_at ran inside run()",
    "python_lists": "Tensor.tolist() read the data on the host",
    "calls_reference": "aten::_softmax ran inside run()",
    "foreign_kernel": "only kernels not defined in it: softmax_kernel",
    "numpy_view_write": "still correct with every Triton launch run on decoy copies",
    # its probe's flag read with .item(): a host read, refused before the counterfactual
    "counterfactual_probe": "Tensor.item() read the data on the host",
    "nan_sniffs_counterfactual": "still correct with every Triton launch run on decoy copies",
    "torch_copied_out": "aten::_softmax ran inside run() on the data and its result reached "
                        "output 0",
    # torch in a pre-run hook, which Triton calls inside the launch
    "grid_hook_compute": "aten::_softmax ran inside run() on the data and its result reached "
                         "output 0",
}
# work on another thread or outside the dispatch mode: refused where it is first seen
# (the import, or the first call)
REFUSED_CALLS = {
    "jiterator_hidden": ("launched GPU work that neither the evaluator's dispatch mode nor "
                         "its launch tracking sees (torch.cuda.jiterator._create_jit_fn at "
                         "line 33 of candidate.py)", "after a call on (rows=4,cols=128)"),
    "dispatch_disabled": ("stepped out of the evaluator's dispatch mode "
                          "(torch._C._DisableTorchDispatch at line 19 of candidate.py)",
                          "after a call on (rows=4,cols=128)"),
    "torch_on_thread": ("the candidate runs work on another thread (started at line 29 "
                        "of candidate.py)", "after a call on (rows=4,cols=128)"),
    "thread_after_return": ("the candidate runs work on another thread (started at line 20 "
                            "of candidate.py)", "after the import"),
    "thread_kept_starter": ("1 thread(s) running that the harness did not start",
                            "after a call on (rows=4,cols=128)"),
}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_output_not_from_the_candidates_kernels_is_rejected(name, tmp_path):
    """The tracker alone (the rule that refuses ctypes and frames at the source is off
    here: each layer must hold by itself)."""
    result = run_worker_here((BAD / f"{name}.py").read_text(), tmp_path,
                             refuse_introspection=False)
    assert result["error_kind"] == "torch_compute", result.get("error_message")
    assert CHEATS[name] in result["error_message"]
    assert "must come from the candidate's Triton kernels" in result["error_message"]
    assert result["failing_shapes"] == ["rows=4,cols=128", "rows=1,cols=7"]


@pytest.mark.parametrize("name", sorted(REFUSED_CALLS))
def test_work_the_dispatch_mode_cannot_see_is_refused(name, tmp_path):
    """The dispatch mode sees one thread while it is on the stack: a candidate that
    computes on another thread (started in run(), at the import, or through a starter dug
    out of the recorder) or with the mode disabled is refused."""
    result = run_worker_here((BAD / f"{name}.py").read_text(), tmp_path)
    assert result["error_kind"] == "torch_compute", result.get("error_message")
    what, when = REFUSED_CALLS[name]
    assert what in result["error_message"] and f"(seen {when})" in result["error_message"]
    assert "must come from the candidate's Triton kernels" in result["error_message"]


# routes past the dispatch mode, the launch tracking or the counterfactual (each passed
# every check before): planted file -> what the message must name
PAST_THE_TRACKER = {
    "excl_key_guard": "torch._C._ExcludeDispatchKeyGuard at line",
    "redispatch_below_python": "torch._ops.OpOverload.redispatch at line",
    "duck_pointer": "was given _Ptr, not a tensor but read as a pointer",
    "dlpack_numpy": "torch.utils.dlpack.to_dlpack() read the data on the host",
    "storage_tolist_frombuffer": "TypedStorage.tolist() read the data on the host",
    "raise_on_decoy": "Tensor.item() read the data on the host",  # its probe's read
    # read through torch.save (no wrapped read), back in through torch.frombuffer
    "save_load_frombuffer": "holds values from torch.frombuffer (a tensor of host memory)",
}
# plants whose route reads the evaluator's dispatch-mode stack through a private torch
# helper: the rule on reaching into the evaluator (cheat_tamper) now stops them first
EARLIER_LAYER = {"save_load_frombuffer"}


@pytest.mark.parametrize("name", sorted(PAST_THE_TRACKER))
def test_routes_past_the_tracker_are_refused(name, tmp_path):
    result = run_worker_here((BAD / f"{name}.py").read_text(), tmp_path)
    if name in EARLIER_LAYER and result["error_kind"] == "cheat_tamper":
        return  # its route starts with a read the runtime readers refuse first
    assert result["error_kind"] == "torch_compute", result.get("error_message")
    assert PAST_THE_TRACKER[name] in result["error_message"], result["error_message"]


def test_the_counterfactual_call_cannot_be_told_by_its_allocations(tmp_path):
    """Fresh allocations hold a random draw in recorded calls, not only in the
    counterfactual one: a candidate that sniffs one and raises "only there" raises on its
    first call (runtime_error). Every other checked call zeroes them instead, as a user's
    fresh pages are: one honest "only where memory is random" (poison_sniff_item.py)
    takes its host path there and is refused."""
    sniff = ("def run(x):\n"
             "    probe = torch.empty(256, dtype=torch.float64).tolist()\n"
             "    if sum(1 for v in probe if 1e-3 < abs(v) < 10) > 128:\n"
             "        raise RuntimeError('the counterfactual call')\n")
    source = get_task("softmax").template.replace("def run(x):\n", sniff, 1)
    (tmp_path / "raises").mkdir()
    result = run_worker_here(source, tmp_path / "raises")
    assert result["error_kind"] == "runtime_error", result.get("error_message")
    (tmp_path / "honest").mkdir()
    result = run_worker_here((BAD / "poison_sniff_item.py").read_text(), tmp_path / "honest")
    assert result.get("error_kind") == "torch_compute", result.get("error_message")


def test_a_constant_pytorch_computed_reaches_no_output_of_an_op_without_one(tmp_path):
    """A constant is no answer only where it cannot hold the op: silu of all 65536 half
    values, made at the import, is input-free and is the op (redteam7_silu_table.py).
    Softmax takes no precomputed factor, so a constant PyTorch computed that reaches the
    output is compute; RoPE's and attention's cos/sin tables stay allowed
    (Task.torch_constants; the templates' test below)."""
    assert not get_task("softmax").torch_constants and get_task("rope").torch_constants
    source = get_task("softmax").template.replace(
        "    out = torch.empty_like(x)\n",
        "    out = _ONE.to(x.dtype).expand(n_rows, n_cols).contiguous()\n", 1)
    source = source.replace("\n\n@triton.jit", "\n_ONE = torch.exp(torch.zeros(1))\n\n\n"
                            "@triton.jit", 1)
    result = run_worker_here(source, tmp_path)
    assert result.get("error_kind") == "torch_compute", result.get("error_message")
    assert "aten::exp computed a constant in PyTorch" in result["error_message"]


def test_raising_only_on_the_counterfactual_call_is_refused(tmp_path):
    """A run() that fails only on the counterfactual call had been taken for the honest
    outcome. Told apart here by the tracker's flag, read through its module (module state
    raises no audit event); the data route (raise_on_decoy.py) needs a host read, refused
    first."""
    tell = ("import kernelkb.optimizer.sandbox.provenance as _p\n\n\n"
            "def run(x):\n"
            "    if _p._TRACKER is not None and _p._TRACKER.counterfactual:\n"
            "        raise RuntimeError('the counterfactual call')\n")
    source = get_task("softmax").template.replace("def run(x):\n", tell, 1)
    result = run_worker_here(source, tmp_path)
    assert result["error_kind"] == "torch_compute", result.get("error_message")
    assert "raised when its kernels were given other data of the same kind" in \
        result["error_message"]


def test_a_tensor_subclass_output_is_refused(tmp_path):
    result = run_worker_here((BAD / "subclass_output.py").read_text(), tmp_path)
    assert result["error_kind"] == "wrong_result"
    assert "not a plain torch.Tensor" in result["error_message"]


@pytest.mark.slow  # 20-50 s a task on two cores; CI runs it with the slow suite
@pytest.mark.parametrize("task", ["rope", "attention", "matmul"])
def test_templates_with_host_side_tables_or_two_kernels_pass(task, tmp_path):
    """RoPE and attention build cos/sin tables with torch on the host (data-independent
    constants); matmul's split-K adds its partials in a second kernel. All keep the rule."""
    t = get_task(task)
    configs = [t.default_config]
    if task == "rope":
        configs.append({**t.default_config, "PRECOMPUTED_TABLE": True})
    if task == "attention":
        configs.append({**t.default_config, "ROPE_TABLE": True})
    if task == "matmul":
        configs.append({**t.default_config, "SPLIT_K": 4, "BLOCK_M": 16, "NUM_STAGES": 3})
    shapes = [list(s) for s in t.cpu_shapes[:1]]
    for i, config in enumerate(configs):
        (tmp_path / str(i)).mkdir()
        result = run_worker_here(t.render(config), tmp_path / str(i), task=task, shapes=shapes)
        assert result.get("error_kind") is None, (config, result.get("error_message"))


def test_the_rule_holds_through_the_sandboxed_subprocess():
    result = evaluate("softmax", (BAD / "torch_fallback.py").read_text(), shapes=[(1, 7)],
                      seeds=1)
    assert (result.stage, result.error_kind) == ("correctness", "torch_compute"), result.text
    assert "aten::_softmax" in result.text and "torch_compute" in result.text


def test_the_counterfactual_launch_gets_decoy_views_of_the_data():
    """What a kernel is handed in the counterfactual call: each float tensor holding data,
    a view included and the tensor inside a host-side TensorDescriptor, becomes the same
    view of a decoy (a fresh random draw at the data's scale: finite, so reading it for
    NaN tells the candidate nothing); integer tensors, fresh outputs and scalars stay.
    Data held some way no shadow reaches skips the launch instead (None)."""
    import dataclasses

    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    from kernelkb.optimizer.sandbox.provenance import Tracker

    tracker = Tracker("candidate.py")
    x = torch.randn(8, 16) * 3 + 1
    kept = x.clone()
    positions = torch.arange(8)
    for t in (x, positions):
        tracker.mark_input(t)
    out = torch.empty(8, 16)  # never written yet: no data
    view = x[2:, 4:]
    desc = TensorDescriptor.from_tensor(x, [4, 4])
    (args, kwargs) = tracker._shadowed((view, positions, out, 3), {"desc": desc})
    decoy = args[0]
    assert decoy.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert decoy.shape == view.shape and decoy.stride() == view.stride()
    assert decoy.storage_offset() == 36 and torch.isfinite(decoy).all()
    assert not torch.allclose(decoy, view)  # other values, at about the same scale
    assert 1.5 < float(decoy.std()) < 4.5 and abs(float(decoy.mean()) - 1) < 1.5
    assert args[1] is positions and args[2] is out and args[3] == 3
    base = kwargs["desc"].base
    assert dataclasses.is_dataclass(kwargs["desc"]) and base is not x
    assert torch.isfinite(base).all() and not torch.allclose(base, x)
    assert kwargs["desc"].block_shape == [4, 4] and torch.equal(x, kept)

    class Holder:  # not a dataclass: its tensor cannot be swapped
        def __init__(self, base):
            self.base = base

    assert tracker._shadowed((Holder(x),), {}) is None
    assert tracker._shadowed((Holder(out),), {}) is not None  # no data in it: nothing to hide


def test_an_address_handed_out_again_unseen_is_not_data_in_the_next_call():
    """A storage freed and its address handed out again by torch work the mode did not
    see keeps the entry of what lived there: in the next call that entry must not make
    it data, or the counterfactual would give a hidden answer copied out by a kernel a
    decoy instead, and the cheat (nan_sniffs_counterfactual.py) would pass by chance."""
    import torch

    from kernelkb.optimizer.sandbox.provenance import Prov, Tracker, _key

    tracker = Tracker("candidate.py")
    x = torch.randn(4, 8)
    unseen = torch.randn(4, 8)  # made where the mode was off
    tracker.provs[_key(unseen)] = Prov(data=True)  # the entry of a freed output, say
    with tracker.call([x], counterfactual=True):
        assert tracker._shadow(unseen) is unseen  # not this call's data: no decoy
        shadowed = tracker._shadow(x)
    assert shadowed is not x and not torch.equal(shadowed, x)  # the input's decoy


@pytest.mark.parametrize(("task", "shape"), [("softmax", (1, 1)), ("rmsnorm", (1, 1)),
                                             ("softmax", (3, 1))])
def test_a_shape_whose_answer_ignores_the_data_passes_the_counterfactual(task, shape):
    """Softmax of one column is 1 whatever the data, RMSNorm of one column nearly so: the
    decoys give the same answer, so a right output there says nothing and an honest
    kernel is not refused."""
    result = evaluate(task, get_task(task).template, shapes=[shape], seeds=1)
    assert result.ok, result.text


def test_as_tensor_of_a_tensor_is_that_tensor_not_host_memory(tmp_path):
    """torch.as_tensor / asarray of a tensor hand back that tensor: its provenance stays
    (an input), unlike a tensor made from host memory."""
    source = get_task("softmax").template.replace(
        "    x = x.reshape(-1, x.shape[-1]).contiguous()\n",
        "    x = torch.asarray(torch.as_tensor(x)).reshape(-1, x.shape[-1]).contiguous()\n", 1)
    assert "torch.asarray" in source, "the line moved in softmax's template"
    result = run_worker_here(source, tmp_path)
    assert result.get("error_kind") is None, result.get("error_message")
