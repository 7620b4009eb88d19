"""Red team 7: held-out cheats and escape probes written from the docs alone after round
6's fixes (tests/bad_kernels/redteam7_*.py, REDTEAM7.md), through the judge as users get
it.

Every plant the judge rejects is a plain assertion (with the kind it got where that kind
is the point); the first run let 11 of 12 through (REDTEAM7.md). The
escape probes run behind the allow-list (`refuse_imports=False`: they import
subprocess, ctypes and os) and start a fresh Python in the jail: what they report must
hold the jail's line (no line "ESCAPED")."""
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import evaluate, imports

pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"


# plant -> (task, the kind a correct judge returns (None: any rejection), the allow-list on)
CASES = [
    # watched: a reader of how the call is made, refused by the allow-list
    pytest.param("deterministic_watch", "rmsnorm", "cheat_tamper", True,
                 id="deterministic_watch"),
    # watched, in the kernel: a never-written 40 MiB allocation is zero pages in a
    # user's process and NaN or a random draw under the judge
    # closed: every other checked call's fresh allocations are zeroed, as a user's pages
    pytest.param("alloc_watch", "rmsnorm", "wrong_result", True, id="alloc_watch"),
    # inputs users pass and the judge never does: PyTorch on those only
    # closed: inference tensors are one of the autograd forms
    pytest.param("inference_tensor_lazy", "rmsnorm", "torch_compute", True,
                 id="inference_tensor_lazy"),
    # closed: x with leading dimensions, as a model passes it (Task.leading_dims)
    pytest.param("leading_dims_torch", "rmsnorm", "torch_compute", True,
                 id="leading_dims_torch"),
    # closed: inputs of one shape as blocks of one fused buffer
    pytest.param("fused_chunk_lazy", "swiglu", "torch_compute", False,
                 id="fused_chunk_lazy"),
    # closed: the judge's calls are recorded as the worker's own are
    pytest.param("other_dtype_torch", "rmsnorm", "torch_compute", True,
                 id="other_dtype_torch"),
    # writes into the caller's memory that is not an input's storage
    # closed: q and k as heads of one fused buffer
    pytest.param("rope_qkv_inplace", "rope", "cheat_input_modified", False,
                 id="rope_qkv_inplace"),
    # closed: a Parameter's .grad is the caller's (a kept buffer left changed)
    pytest.param("grad_as_scratch", "rmsnorm", "cheat_aliasing", True,
                 id="grad_as_scratch"),
    # resources kept across calls
    # closed: the call's inputs, dropped, must be freed too
    pytest.param("keeps_every_input", "rmsnorm", "cheat_aliasing", True,
                 id="keeps_every_input"),
    # closed: what a call on new inputs leaves alive, with earlier workspaces warm
    pytest.param("workspace_per_pointer", "rmsnorm", "cheat_aliasing", False,
                 id="workspace_per_pointer"),
    # correctness that rests on the interpreter running one program at a time
    # closed: plain stores of two programs to one address are a data race (races.py)
    pytest.param("racy_accumulate", "rmsnorm", "wrong_result", True, id="racy_accumulate"),
    # the op's work computed by PyTorch as an input-free constant
    # closed: a constant PyTorch computed reaches no output, where the op takes no
    # precomputed factors (Task.torch_constants)
    pytest.param("silu_table", "swiglu", "torch_compute", True, id="silu_table"),
]

PROBES = ("escape_host_secrets", "escape_host_global", "escape_side_channels")


# behind the allow-list (it refuses each first now: data_ptr() past the 16-byte alignment
# a launch plan is keyed on), where the layers that caught them still do
READ_ADDRESSES = ("fused_chunk_lazy", "rope_qkv_inplace", "workspace_per_pointer")


def test_the_allow_list_refuses_the_plants_that_read_addresses() -> None:
    for plant in READ_ADDRESSES:
        found = imports.problems((BAD / f"redteam7_{plant}.py").read_text())
        assert any("16-byte alignment" in f for f in found), (plant, found)


def test_the_allow_list_refuses_the_probes() -> None:
    for plant in PROBES:
        found = imports.problems((BAD / f"redteam7_{plant}.py").read_text())
        assert found, plant


@pytest.mark.parametrize(("plant", "task", "kind", "allow_list"), CASES)
def test_redteam7_plant_is_rejected(plant, task, kind, allow_list):
    source = (BAD / f"redteam7_{plant}.py").read_text()
    result = evaluate(task, source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=allow_list)
    assert result.error_kind != "timeout", result.error_message
    assert not result.ok, f"{plant} passed the judge"
    if kind is not None:
        assert result.error_kind == kind, (result.error_kind, result.error_message)


@pytest.mark.parametrize("plant", PROBES)
def test_redteam7_escape_probe_stays_in_the_jail(plant):
    """A fresh Python in the jail: host secrets (kernel log, perf, firmware, kallsyms),
    host-global writes (clock, scheduling, usermode helpers, mount API, device nodes),
    channels that are not files (abstract sockets, inotify on bound paths, IPC)."""
    source = (BAD / f"redteam7_{plant}.py").read_text()
    result = evaluate("rmsnorm", source, shapes="auto", seeds=1, timeout_s=900,
                      refuse_imports=False)
    artifacts = result.artifacts or {}
    # the message is trimmed; the probe also prints its report (ESCAPED lines last) and
    # the worker's output keeps its tail
    report = "\n".join([result.error_message or "", str(artifacts.get("stdout_tail", "")),
                        str(artifacts.get("stderr_tail", ""))])
    assert not result.ok, "a probe raises its report: it is never ok"
    assert "launcher refused" not in report, report  # the fresh Python must have run
    assert "\nESCAPED" not in report and not report.startswith("ESCAPED"), report
