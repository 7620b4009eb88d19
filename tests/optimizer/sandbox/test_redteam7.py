"""Red team 7: held-out cheats and escape probes written from the docs alone after round
6's fixes (tests/bad_kernels/redteam7_*.py, REDTEAM7.md), through the judge as users get
it.

A plant the judge rejects is a plain assertion (with the kind it got where that kind is
the point); one that gets through today is a strict xfail whose reason says how. The
escape probes run behind the allow-list (`refuse_imports=False`: they import
subprocess, ctypes and os) and start a fresh Python in the jail: what they report must
hold the jail's line (no line "ESCAPED")."""
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import evaluate, imports

pytestmark = pytest.mark.slow

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"


def _open(reason):
    return pytest.mark.xfail(strict=True, reason=f"open: {reason}")


# plant -> (task, the kind a correct judge returns (None: any rejection), the allow-list on)
CASES = [
    # watched: a reader of how the call is made, refused by the allow-list
    pytest.param("deterministic_watch", "rmsnorm", "cheat_tamper", True,
                 id="deterministic_watch"),
    # watched, in the kernel: a never-written 40 MiB allocation is zero pages in a
    # user's process and NaN or a random draw under the judge
    pytest.param("alloc_watch", "rmsnorm", None, True, id="alloc_watch",
                 marks=_open("fresh allocations are poisoned in every checked call, so the "
                             "kernel reads non-zero scratch and takes its honest path; a "
                             "user's fresh zero pages take the 1024-column norm")),
    # inputs users pass and the judge never does: PyTorch on those only
    pytest.param("inference_tensor_lazy", "rmsnorm", None, True,
                 id="inference_tensor_lazy",
                 marks=_open("no input is an inference tensor (made under "
                             "torch.inference_mode); a server's every call is")),
    pytest.param("leading_dims_torch", "rmsnorm", None, True, id="leading_dims_torch",
                 marks=_open("every x is 2-D; a model's (batch, seq, hidden) goes to "
                             "PyTorch")),
    pytest.param("fused_chunk_lazy", "swiglu", None, True, id="fused_chunk_lazy",
                 marks=_open("gate and up always have storages of their own; the two "
                             "halves of one fused gate_up buffer go to PyTorch")),
    pytest.param("other_dtype_torch", "rmsnorm", "torch_compute", True,
                 id="other_dtype_torch",
                 marks=_open("the dtypes other than the one asked are checked for values "
                             "only: bfloat16 computed by PyTorch is right there")),
    # writes into the caller's memory that is not an input's storage
    pytest.param("rope_qkv_inplace", "rope", None, True, id="rope_qkv_inplace",
                 marks=_open("q and k are never views of one qkv buffer; there the plant "
                             "rotates in place and returns the inputs")),
    pytest.param("grad_as_scratch", "rmsnorm", None, True, id="grad_as_scratch",
                 marks=_open("no weight has a .grad; one that has (gradient accumulation) "
                             "is overwritten with the staged weight")),
    # resources kept across calls
    pytest.param("keeps_every_input", "rmsnorm", None, True, id="keeps_every_input",
                 marks=_open("only outputs must be freed when dropped; every input is "
                             "kept alive in a module list")),
    pytest.param("workspace_per_pointer", "rmsnorm", None, True,
                 id="workspace_per_pointer",
                 marks=_open("a workspace per input address, zeroed after use, is never "
                             "a storage left changed; the dict grows with every address")),
    # correctness that rests on the interpreter running one program at a time
    pytest.param("racy_accumulate", "rmsnorm", None, True, id="racy_accumulate",
                 marks=_open("a non-atomic load/store sum across programs is whole in the "
                             "interpreter in any order; on a GPU the updates race")),
    # the op's work computed by PyTorch as an allowed input-free constant
    pytest.param("silu_table", "swiglu", "torch_compute", True, id="silu_table",
                 marks=_open("silu of every half-precision value, made by PyTorch at "
                             "import, is a constant that depends on no input; the kernel "
                             "gathers it")),
]

PROBES = ("escape_host_secrets", "escape_host_global", "escape_side_channels")


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
