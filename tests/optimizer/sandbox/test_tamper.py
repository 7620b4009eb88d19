"""A candidate that replaces what the harness relies on (its clock, its comparison, the
ops the checks run) is rejected: ``cheat_timer`` for the timing path, ``cheat_tamper``
for the rest. On the CPU the timing is labelled unavailable, but the check still runs
after the import and after every call (the GPU side is in test_gpu.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from in_process_worker import leave_out_runner_threads

from kernelkb.optimizer.sandbox import evaluate, tamper

BAD = Path(__file__).parents[2] / "bad_kernels"

CASES = [
    ("patch_do_bench", "cheat_timer", ("triton.testing.do_bench", "after the import")),
    ("patch_clock_in_run", "cheat_timer", ("time.perf_counter", "torch.cuda.synchronize",
                                           "after a call on (rows=1,cols=7)")),
    ("patch_checks", "cheat_tamper", ("kernelkb.optimizer.sandbox.checks.compare_outputs",)),
    ("open_mode", "cheat_tamper", ("mode stack",)),
    ("tracker_off", "cheat_tamper", ("the provenance tracker's state was changed",)),
    # the same objects with new insides: bytecode swapped, constants rebound
    ("swaps_check_code", "cheat_tamper", ("kernelkb.optimizer.sandbox.checks.shape_verdict",)),
    ("swaps_event_timer", "cheat_timer", ("torch.cuda.Event.elapsed_time",)),
    ("rebinds_constants", "cheat_timer", ("kernelkb.optimizer.sandbox.compare.NOISE_FLOOR",
                                          "kernelkb.optimizer.sandbox.timing.SUSPECT_SPEEDUP",
                                          "provenance.ALLOCATION_OPS")),
]


@pytest.mark.parametrize(("name", "kind", "named"), CASES, ids=[c[0] for c in CASES])
def test_replacing_what_the_harness_uses_is_caught(name, kind, named):
    """The snapshot alone: the rule that refuses a code swap at the source is off here
    (test_introspection.py has it), so each layer is seen to hold by itself."""
    result = evaluate("softmax", (BAD / f"{name}.py").read_text(), shapes=[(1, 7)], seeds=1,
                      refuse_introspection=False, refuse_surroundings=False)
    assert not result.ok and result.error_kind == kind, result.text
    for text in named:
        assert text in result.error_message, result.error_message


def test_snapshot_sees_a_replaced_function_and_a_replaced_method():
    import time

    import torch

    snapshot = tamper.Snapshot()
    assert snapshot.changes() == []
    real_clock, real_abs = time.perf_counter, torch.Tensor.abs
    try:
        time.perf_counter = lambda: 0.0
        torch.Tensor.abs = lambda self: self
        where = {c.where for c in snapshot.changes()}
    finally:
        time.perf_counter, torch.Tensor.abs = real_clock, real_abs
    assert where == {"time.perf_counter", "torch.Tensor.abs"}
    assert tamper.describe([tamper.Change("time.perf_counter", True)])[0] == "cheat_timer"
    assert snapshot.changes() == []


def test_snapshot_sees_new_bytecode_defaults_and_constants_on_the_same_objects():
    from kernelkb.optimizer.sandbox import checks, compare, timing

    snapshot = tamper.Snapshot()
    code, defaults = checks.shape_verdict.__code__, timing.measure.__defaults__
    floor = compare.NOISE_FLOOR
    try:
        checks.shape_verdict.__code__ = (lambda stats, max_bias: None).__code__
        timing.measure.__defaults__ = (1,) + tuple(defaults)[1:]  # rep_ms: 1 ms
        compare.NOISE_FLOOR = 0.5
        where = {c.where for c in snapshot.changes()}
    finally:
        checks.shape_verdict.__code__ = code
        timing.measure.__defaults__ = defaults
        compare.NOISE_FLOOR = floor
    assert where == {"kernelkb.optimizer.sandbox.checks.shape_verdict",
                     "kernelkb.optimizer.sandbox.timing.measure",
                     "kernelkb.optimizer.sandbox.compare.NOISE_FLOOR"}, where
    assert snapshot.changes() == []
    assert tamper.describe([tamper.Change("time.perf_counter", True)])[0] == "cheat_timer"
    assert snapshot.changes() == []


@pytest.fixture(autouse=True)
def _in_process_worker(monkeypatch):
    leave_out_runner_threads(monkeypatch)


def _checked_worker(tmp_path, name: str):
    from kernelkb.kernels.candidate_loading import load_candidate
    from kernelkb.optimizer.sandbox.worker import Worker

    request = {"task": "softmax", "dtype": "float16", "shapes": [[4, 128]], "seeds": 1,
               "source": (BAD / f"{name}.py").read_text(),
               "result_path": str(tmp_path / "result.json"),
               "refuse_introspection": False, "refuse_surroundings": False,
               "refuse_imports": False}
    worker = Worker(request)
    worker.evaluate()  # checks only on the CPU: records what each checked call launched
    assert worker.expected_launches["rows=4,cols=128"][0] == 1
    module = load_candidate(request["source"], module_name="again")
    worker.tracker.candidate_file = module.__file__
    return worker, module


@pytest.mark.parametrize(("name", "caught"), [("_good", False), ("timed_differently", True)])
def test_timed_calls_must_launch_what_the_checked_calls_launched(tmp_path, name, caught):
    """The mechanism behind the GPU test: under the clock, the launches per call (and a
    sample of their grids and arguments) are compared with the checked calls'."""
    from kernelkb.optimizer.sandbox import timing
    from kernelkb.optimizer.sandbox.worker import Tampered, _Counted

    worker, module = _checked_worker(tmp_path, name)
    sets = [worker.make_inputs((4, 128), seed=100 + k) for k in range(2)]
    call = _Counted(timing.rotating(module.run, sets))

    def fake_do_bench() -> None:  # named like the harness's timing loop
        for _ in range(16):
            call()

    with worker.counting_launches() as tracker:
        fake_do_bench()
    if caught:
        with pytest.raises(Tampered, match="launched .* per call"):
            worker.check_timed_launches("rows=4,cols=128", call.calls, tracker)
    else:
        worker.check_timed_launches("rows=4,cols=128", call.calls, tracker)
        assert tracker.counted == 16


class FixedClock:
    """compare.GpuClock's interface on the CPU: every call runs and reads 0.25 ms."""

    def host_ms(self, call, calls=8):
        for _ in range(calls):
            call()
        return 0.01

    def queue_round(self, calls):
        for call, _ in calls:
            call()
        return [None] * len(calls)

    def read(self, handles):
        return [0.25 for _ in handles]

    def samples(self, call, calls, host_ms):
        return self.read(self.queue_round([(call, host_ms)] * calls))


SOFTMAX_IN_ATEN = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::Half, "
                   "float, c10::Half, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>")
COPY_IN_ATEN = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast"
                "<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>>")


@pytest.mark.parametrize(("name", "kernels", "kind", "named"), [
    ("_good", {"softmax_kernel", COPY_IN_ATEN}, None, None),
    ("timed_differently", {"softmax_kernel"}, "cheat_timer", "under the clock run() launched"),
    # the same launches as when checked, and ATen's softmax beside them: torch when timed
    ("_good", {"softmax_kernel", SOFTMAX_IN_ATEN}, "torch_compute",
     "neither its own Triton kernels (softmax_kernel) nor a copy or fill"),
], ids=["honest", "timed_differently", "library_kernel_when_timed"])
def test_time_all_plumbing_on_the_cpu(tmp_path, monkeypatch, name, kernels, kind, named):
    """worker.time_all end to end with do_bench, the device synchronise and the GPU's
    timestamps stood in for (the figures are the GPU's business: test_gpu.py): the launch
    check, the kernel names and the tamper check run under the clock, and a timed result
    is written."""
    import json

    from kernelkb.optimizer.sandbox import compare, kernel_clock, timing
    from kernelkb.optimizer.sandbox import tamper as tamper_mod

    worker, module = _checked_worker(tmp_path, name)

    def fake_do_bench(fn, warmup=25, rep=100, quantiles=None, return_mode="mean"):
        for _ in range(8):
            fn()
        return [0.9, 1.0, 1.1] if quantiles else 1.0

    def fake_do_bench_cudagraph(fn, rep=100, return_mode="mean"):
        for _ in range(4):  # a capture runs run() on the host like any call
            fn()
        return 0.5

    monkeypatch.setattr(timing, "_do_bench", fake_do_bench)
    monkeypatch.setattr(timing, "_do_bench_cudagraph", fake_do_bench_cudagraph)
    monkeypatch.setattr(timing, "_SYNCHRONIZE", lambda: None)
    monkeypatch.setattr(compare, "settle", lambda max_s: compare.Settled(True, 0.0, 1.0, 1.0))
    monkeypatch.setattr(compare, "GpuClock", FixedClock)

    def fake_read(call, calls=kernel_clock.PROFILED_CALLS, reader="auto"):
        for _ in range(calls):
            call()
        return kernel_clock.Reading(busy_ms=0.2, kernels=frozenset(kernels))

    monkeypatch.setattr(kernel_clock, "read", fake_read)
    # after the stand-ins
    worker.snapshot = tamper_mod.Snapshot(task_module="kernelkb.kernels.softmax")
    assert worker.time_all(module) is (kind is None)
    written = json.loads((tmp_path / "result.json").read_text())
    if kind is None:
        assert worker.out["timings"]["rows=4,cols=128"] == pytest.approx([1.0, 0.2])
        assert worker.out["graph_timings"]["rows=4,cols=128"] == pytest.approx(0.5)
        assert worker.out["gpu"]["alone"]["rows=4,cols=128"][0] == pytest.approx(0.25)
        assert worker.out["gpu"]["busy_ms"]["rows=4,cols=128"] == pytest.approx(0.2)
        assert worker.out["stage"] == "performance"
    else:
        assert written["error_kind"] == kind and written["stage"] == "performance"
        assert named in written["error_message"], written["error_message"]
