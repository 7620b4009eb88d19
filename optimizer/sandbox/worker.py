"""The child process: load one candidate, check it on every shape, time it on a GPU.

Before the candidate is imported the worker wraps Triton's launch path and snapshots
what the harness relies on (provenance.py, tamper.py); after the import and after every
call it checks the snapshot, and every checked call is recorded so that an output not
computed by the candidate's own Triton kernels is rejected (``torch_compute``).

Run as ``python -m optimizer.sandbox.worker REQUEST.json``. The request names the
result file; the worker writes its progress there (stage and shape) before each step,
so when it hangs or dies the parent still knows where, then the final result. stdout
and stderr are only logs, never parsed.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import math
import os
import secrets
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelkb.kernels import far_rows
from kernelkb.kernels.base import Task
from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.config import header_constants
from kernelkb.kernels.discovery import get_task, load_origin
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.plan_bind import PlanFresh
from kernelkb.kernels.scalar_args import call_with
from kernelkb.kernels.shared.atomic import replaced
from kernelkb.kernels.shared.comparison import may_improve
from kernelkb.optimizer.sandbox import (
    ahead,
    caller_state,
    checks,
    compare,
    declared,
    forbidden,
    guards,
    import_path,
    introspection,
    jit_globals,
    kernel_clock,
    launch_plan,
    limits,
    narrow_addresses,
    provenance,
    source_rules,
    strays,
    surroundings,
    tamper,
    timing,
    wide_offsets,
)
from kernelkb.optimizer.sandbox.errors import classify_exception, exception_message, trim
from kernelkb.optimizer.sandbox.gpu_turns import GpuTurns

log = logging.getLogger("kernelkb.optimizer.sandbox.worker")

CANDIDATE_FILE = "candidate.py"
# under the interpreter, the first shape checked replays every layout's plan where it
# moves up to this many bytes (Worker.replays_layouts): a CPU list's shape, a small edge
LAYOUT_REPLAY_BYTES = 1 << 20
TIMING_INPUT_SETS = 3
BATCH_GROWTH_CALLS = 3  # batches never seen, each of which may not leave memory alive
# the autograd states a user calls an op in, by the name the judge's "run" question gives:
# a candidate must be the same kernel in each (judge.GRAD_WORDS says which check runs in
# which)
GRAD_MODES = {"enabled": contextlib.nullcontext, "no_grad": torch.no_grad,
              "inference": torch.inference_mode}
_SEVERITY = ("torch_compute", "cheat_unsynchronised", "cheat_input_modified", "cheat_aliasing",
             "cheat_cached_output", "cheat_replay", "wrong_result", "bias")


class ShapeFailure(Exception):
    """A shape failed a check (not an exception of the candidate's own)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Tampered(Exception):
    """The candidate replaced something the harness relies on: stop at once."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Worker:
    def __init__(self, request: dict[str, Any]):
        self.request = request
        self.result_path: str | None = request.get("result_path")
        self.result_fd: int | None = request.get("result_fd")
        load_origin(request.get("task_origin"))  # a task from a user's folder or a package
        self.task: Task = get_task(request["task"])
        self.dtype = DTYPES[request["dtype"]]
        self.tol = self.task.tolerances[request["dtype"]]
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.shapes = [tuple(s) for s in request["shapes"]]
        self.seeds = max(1, int(request.get("seeds", 3)))
        # fresh seeds every evaluation (the runner draws them): answers memorised for
        # fixed seeds are wrong here; timed inputs come from the same draws as checked ones
        self.seed_base = int(request.get("seed_base", 0))
        self.mutated = tuple(getattr(self.task, "mutated_inputs", ()) or ())
        self.run_checked: Any = None  # the run() check_shape checks (wrong_by_itself)
        self.header = header_constants(request.get("source") or "")
        # the header not being what runs (declared.py): said only when nothing else
        # failed, the least specific finding, so a plant's own cheat is named first
        self.config_problems: list[str] = []
        # every address a call's tensor inputs started at: check_outputs_freed's inputs
        # must start elsewhere, or a workspace keyed by a data pointer is found warm
        self.input_pointers: set[int] = set()
        self.out: dict[str, Any] = {"final": False, "stage": "syntax", "shape": None,
                                    "per_shape": {}, "failing_shapes": [], "checked": [],
                                    "wall_s": {}}
        self._clock = time.perf_counter()
        self.tracker: provenance.Tracker | None = None
        self.snapshot: tamper.Snapshot | None = None
        self.forbidden: forbidden.Forbidden | None = None
        self.introspection: introspection.Introspection | None = None
        self.surroundings: surroundings.Surroundings | None = None
        self.ahead: ahead.Ahead | None = None  # the processes compiling its shapes ahead
        self.fresh: PlanFresh | None = None  # run() from the module as imported (fresh_run)
        self.expected_launches: dict[str, tuple[int, set[tuple[Any, ...]]]] = {}
        self.own_kernels: set[str] = set()  # the candidate's Triton kernels, by name, when checked
        self.unreliable: list[str] = []  # timing the GPU's own timestamps could not confirm
        # the incumbent, loaded once when first timed (the comparison, the judge's clock)
        self.parent_run = _ParentRunner(request.get("parent_source"))
        # checks share the GPU with other evaluations; timing has it alone (gpu_turns.py)
        self.turns = GpuTurns(request.get("gpu_gate_fd"), request.get("gpu_lock_fd"),
                              report=self._waited)

    def _waited(self, seconds: float) -> None:
        """Seconds spent waiting for the GPU so far: the runner adds them to the limit."""
        self.out["gpu_wait_s"] = round(seconds, 3)
        self.write()

    def lap(self, what: str) -> None:
        """Wall seconds per step (load, check and timing of each shape), for the log."""
        now = time.perf_counter()
        self.out["wall_s"][what] = round(now - self._clock, 3)
        self._clock = now

    # -- bookkeeping ------------------------------------------------------------------
    def progress(self, stage: str, shape: str | None = None) -> None:
        self.out.update(stage=stage, shape=shape)
        self.write()

    def write(self) -> None:
        judge = self.request.get("judge")
        if self.out.get("final") and judge:
            # no other process of the candidate's is left to write over the final report
            # (strays.py); the judge takes it only while none is alive
            strays.end(int(judge["pid"]))
        layered = sys.modules.get("kernelkb.optimizer.sandbox.layered_cache")
        if layered is not None:  # Triton loaded its cache manager: what the layer served
            self.out["trusted_layer_reads"] = dict(layered.READS)
        write_result(self.out, fd=self.result_fd, path=self.result_path)

    def fail(self, stage: str, kind: str, message: str, tb: str | None = None) -> None:
        self.stop_ahead()
        self.out.update(final=True, stage=stage, error_kind=kind, error_message=trim(message))
        if tb:
            self.out["traceback"] = tb[-4000:]
        self.write()

    # -- the layers -------------------------------------------------------------------
    def guard(self, when: str) -> None:
        """Raise Tampered if anything the harness relies on was replaced."""
        changes = self.snapshot.changes() if self.snapshot else []
        broken = self.tracker.tampered() if self.tracker else None
        if broken:
            changes.append(tamper.Change(broken, timing=False))
        reached = self.reached_in()
        if reached:
            raise Tampered("cheat_tamper", f"{reached} (seen {when})")
        narrow = self.forbidden.narrow_problem() if self.forbidden else None
        if narrow:  # refused at its launch, whatever the candidate did with the refusal
            raise narrow_addresses.NarrowAddress(narrow)
        refused = self.forbidden.problem() if self.forbidden else None
        if refused and not changes:
            raise Tampered("torch_compute", f"{refused} (seen {when})")
        if changes:
            kind, message = tamper.describe(changes)
            raise Tampered(kind, f"{message} (seen {when})")

    def stop_ahead(self, wait_s: float = 0.0) -> None:
        """End the compile-ahead processes: before any timed call and any final report."""
        if self.ahead is not None:
            self.out["compiled_ahead"] = self.ahead.stop(wait_s)
            self.ahead = None

    def reached_in(self) -> str | None:
        """What the candidate was refused when it reached into the harness, or None."""
        return (self.introspection.problem() if self.introspection else None) \
            or (self.forbidden.reached() if self.forbidden else None) \
            or (self.surroundings.problem() if self.surroundings else None)

    def evaluate(self) -> None:
        self.progress("syntax")
        if self.request.get("refuse_imports", True):
            broken = source_rules.refused(self.request["source"], self.task)
            if broken:
                self.fail("syntax", *broken)
                return
        if self.device == "cuda" and self.request.get("compile_ahead", True):
            # before the watchers and any candidate code: its processes are the harness's
            from kernelkb.optimizer.sandbox.judge import foreseen_shapes

            foreseen = foreseen_shapes(self.task, self.request) if self.request.get("judge") \
                else []
            self.ahead = ahead.Ahead(self.request, self.shapes, self.timed_shapes(), foreseen)
        unread = declared.unread_constants(self.request["source"],
                                           (p.name for p in self.task.params))
        if unread:
            self.config_problems.append(declared.unread_message(unread))
        self.tracker = provenance.install(candidate_file="", torch_constants=getattr(
            self.task, "torch_constants", False))
        self.tracker.warm_up()  # lazy imports that rebind torch attributes happen now
        self.forbidden = forbidden.watch(
            lambda path: os.path.basename(path) == CANDIDATE_FILE,
            narrow_interpreted=bool(self.request.get("narrow_addresses")))
        if self.request.get("refuse_introspection", True):
            self.introspection = introspection.watch(
                lambda path: os.path.basename(path) == CANDIDATE_FILE, module_name="candidate")
        else:
            introspection.stand_down()
        if self.request.get("refuse_surroundings", True):
            reads = surroundings.source_reads(self.request["source"])
            if reads:
                self.fail("syntax", "cheat_tamper", surroundings.message(reads))
                return
            self.surroundings = surroundings.watch(
                lambda path: os.path.basename(path) == CANDIDATE_FILE)
        else:
            surroundings.stand_down()
        main = sys.modules.get("__main__")
        self.snapshot = tamper.Snapshot(
            task_module=self.task.reference.__module__,
            extra=("__main__",) if getattr(main, "Worker", None) is Worker else ())
        try:
            with self.tracker.importing():
                module = load_candidate(self.request["source"], module_name="candidate")
        except BaseException as err:  # noqa: B036 - anything the candidate's import raises
            stage, kind = classify_exception(err, stage="syntax")
            if reached := self.reached_in():  # the error was the refusal: name it
                stage, kind, err = "syntax", "cheat_tamper", RuntimeError(reached)
            self.fail(stage, kind, exception_message(err, CANDIDATE_FILE), traceback.format_exc())
            return
        self.tracker.candidate_file = getattr(module, "__file__", "") or ""
        if os.environ.get("TRITON_INTERPRET") == "1":
            refused = jit_globals.non_constexpr_globals(module)
            if refused:
                self.fail("compile", "compile_error", jit_globals.message(refused))
                return
        mismatch = self.signature_problem(module.run)
        if mismatch:
            self.fail("syntax", "signature_mismatch", mismatch)
            return
        try:
            self.guard("after the import")
            self.check_all(module)
        except Tampered as err:
            self.fail("correctness", err.kind, str(err))

    def signature_problem(self, run: Any) -> str | None:
        """``declared.signature_problem`` for the task's scalar arguments, after as many
        tensor inputs as the task's smallest shape gives."""
        names = [a.name for a in getattr(self.task, "scalar_args", ()) or ()]
        if not names:
            return None
        shape = min(self.task.cpu_shapes or self.shapes, key=lambda s: math.prod(s))
        tensors = len(self.task.make_inputs(tuple(shape), self.dtype, 0, "cpu"))
        return declared.signature_problem(run, tensors, names, self.task.signature)

    def fresh_run(self, module: ModuleType) -> Any:
        """``run`` from the candidate's module as imported (plan_bind.PlanFresh), for one
        shape's checks or one judge question. Why: the exported op records each layout's
        plan that way, so state the module keeps across calls (a count of the shapes met,
        a flag set by a first call) is as absent from every check as from every plan."""
        if self.fresh is None:
            self.fresh = PlanFresh(module.run)
        assert self.tracker is not None  # installed before the candidate's import
        with self.tracker.importing():
            return self.fresh()

    def check_all(self, module: ModuleType) -> None:
        self.lap("load")
        for shape in self.shapes:
            label = self.task.shape_label(shape)
            self.progress("run", label)
            try:
                with self.turns.share():
                    self.check_shape(self.fresh_run(module), shape, label,
                                     imported=lambda: self.fresh_run(module))
            except Tampered:
                self.out["failing_shapes"].append(label)
                raise
            except ShapeFailure as failure:
                self.out["failing_shapes"].append(label)
                self.out.setdefault("failures", []).append([failure.kind, str(failure)])
            except Exception as err:
                stage, kind = classify_exception(err, stage="run")
                self.out["failing_shapes"].append(label)
                msg = f"on ({label}): {exception_message(err, CANDIDATE_FILE)}"
                if reached := self.reached_in():  # the error was the refusal: name it
                    stage, kind, msg = "correctness", "cheat_tamper", reached
                self.fail(stage, kind, msg, traceback.format_exc())
                return
            self.lap(f"check {label}")
            self.out["checked"].append(label)
        if not self.out.get("failures") and not self.config_problems:
            self.stop_ahead(wait_s=ahead.WAIT_S)  # the judge's questions come next
            self.lap("compile ahead")
            if (self.out.get("compiled_ahead") or {}).get("refused"):
                self.fail("correctness", "cheat_tamper", (
                    "in a process compiling its kernels ahead, the candidate reached past "
                    "the rules (frames, gc, code objects, ctypes, files, the process or the "
                    "environment), which the worker's own watchers refuse as well"))
                return
        failures = self.out.get("failures", [])
        if failures:
            kind = min((k for k, _ in failures), key=_SEVERITY.index)
            lines = [m for k, m in failures if k == kind][:4]
            lines += [m for k, m in failures if k != kind][: max(0, 5 - len(lines))]
            self.fail("correctness", kind, "\n".join(lines))
            return
        if self.config_problems:
            self.fail("correctness", "config_mismatch", "\n".join(self.config_problems))
            return
        self.out.update(stage="correctness", error_kind=None)
        if self.request.get("timing") and self.device == "cuda":
            if not self.time_all(module):
                return
        self.out["final"] = True
        self.write()
        if self.request.get("judge"):
            self.serve(module)

    def serve(self, module: ModuleType) -> None:
        """Answer the judge's questions (judge.py) until it says bye: run the kernel on
        inputs it names, or time calls back to back for its own clock."""
        fds = self.request["judge"]
        timed: dict[tuple[str, str, int], Any] = {}
        if self.device == "cuda":  # the checks' cached blocks: the judge needs the room now
            torch.cuda.empty_cache()
        with os.fdopen(fds["ask_fd"], "rb") as questions:
            for line in questions:
                try:
                    question = json.loads(line)
                    if question.get("op") == "bye":
                        break
                    answer = self.answer(module, question, fds["data_fd"], timed)
                except Exception as err:  # noqa: BLE001 - the judge decides what it means
                    answer = {"error": trim(f"{type(err).__name__}: {err}")}
                os.write(fds["answer_fd"], (json.dumps(answer) + "\n").encode())

    def answer(self, module: ModuleType, question: dict[str, Any], data_fd: int,
               timed: dict[tuple[str, str, int], Any]) -> dict[str, Any]:
        shape = tuple(int(d) for d in question["shape"])
        if question["op"] == "run":
            seed = int(question["seed"])
            inputs = self.make_inputs(shape, seed=seed, dtype=question.get("dtype"))
            if question.get("condition"):
                from kernelkb.kernels.draws import resolve  # a declared or a drawn one
                condition = resolve(self.task, question["condition"])
                inputs = list(condition.apply(tuple(inputs), seed))
            label = str(question.get("label") or self.task.shape_label(shape))
            try:  # recorded as the worker's own calls are: the judge's are not told apart
                with GRAD_MODES[question.get("grad") or "enabled"]():
                    out, broken = self.tracked_call(self.fresh_run(module), inputs, label,
                                                    record=False)
            except ShapeFailure as failure:
                return {"refused": [failure.kind, str(failure)]}
            if broken:
                return {"refused": ["torch_compute", f"({label}): {broken}"]}
            outs = checks.flatten_tensors(out) + [inputs[i] for i in self.mutated]
            if question.get("tail"):  # a wide shape: only the rows the judge compares
                outs = wide_offsets.last_rows(outs, shape[0], int(question["tail"]))
            answer = {"tensors": _write_tensors(outs, data_fd)}
            if question.get("tail") or str(question.get("condition")).startswith(far_rows.PREFIX):
                del inputs, out, outs  # GiBs of storage: back to the driver, not cached
                if self.device == "cuda":
                    torch.cuda.empty_cache()
            return answer
        if question["op"] == "time":
            # "fresh": K sets made from K seeds, each timed once, then dropped (the judge's
            # test for answers kept by input: judge.check_fresh_inputs); asked first with
            # no calls, so making them is not timed
            fresh = int(question.get("fresh") or 0)
            key = (str(question["who"]), self.task.shape_label(shape), fresh)
            if key not in timed:
                seed = int(question["seed"])
                sets = [self.make_inputs(shape, seed=seed + i) for i in range(max(1, fresh))]
                call = timing.rotating(module.run, sets) if key[0] == "candidate" \
                    else self.parent_run.call(sets)
                if call is None:
                    raise RuntimeError("the incumbent does not load")
                timed[key] = call
            check = bool(question.get("check"))
            calls = int(question["calls"])
            for _ in range(calls - check):
                timed[key]()
            if not check:
                torch.cuda.synchronize()
                if fresh and calls:
                    del timed[key]
                return {}
            # the last of the calls kept, then one more on the same inputs, its output
            # handed to the judge: a kernel that went lazy after its first calls on a
            # buffer is wrong there
            out = timed[key]()
            last = checks.flatten_tensors(out)
            outputs = [(tuple(t.shape), t.dtype, t.device) for t in last]
            guards.poison_in_place(last)  # the last answer, where the next output may land
            del out, last  # freed, so their blocks are among those poisoned next
            guards.poison_freed(outputs)
            outs = checks.flatten_tensors(timed[key]())
            torch.cuda.synchronize()
            return {"tensors": _write_tensors(outs, data_fd)}
        raise ValueError(f"unknown question {question['op']!r}")

    def make_inputs(self, shape: tuple[int, ...], seed: int, dtype: str | None = None
                    ) -> list[Any]:
        """The task's inputs (in ``dtype``, a name; None: the evaluation's); on a GPU each
        between poisoned guard regions (``guards``): a kernel that reads past an input's
        end gets NaN there, not a neighbour's data. The CPU interpreter checks every load
        against its tensor's storage and names the line, which a guard would hide."""
        inputs = list(self.task.make_inputs(shape, DTYPES[dtype] if dtype else self.dtype,
                                            seed, self.device))
        return [guards.guarded(x) for x in inputs] if self.device == "cuda" else inputs

    def check_shape(self, run: Any, shape: tuple[int, ...], label: str,
                    imported: Callable[[], Any] | None = None) -> None:
        """Every seed on the SAME input storage (fresh values copied in), so an output
        cached by input pointer comes back stale; earlier outputs stay alive so a reused
        output buffer is visible. The reference runs after the candidate, so no answer
        sits in memory for the candidate to find. ``imported``: run() from the module as
        imported, for each condition that lays its inputs out otherwise (the call the
        export records for that layout)."""
        self.run_checked = run
        inputs: list[Any] | None = None
        earlier_outs: list[torch.Tensor] = []
        earlier_saved: list[torch.Tensor] = []  # their values when returned
        last_plain: list[Any] | None = None  # the inputs of the latest call
        last_inputs: list[Any] = []
        previous: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None
        worst: dict[str, Any] | None = None
        shape_label = label
        plan = launch_plan.Plan() if self.replays(shape) else None
        # the last plain call's too: a buffer a first call makes and later calls keep
        # and change is kept state there (Plan.kept_and_changed), not on the first
        later = launch_plan.Plan() if plan is not None and self.seeds > 1 else None
        conditions = self.task.input_conditions if self.request.get("conditions", True) else ()
        draws = [*range(self.seeds), *conditions]
        # the conditions' seed: the evaluation's, one more per shape (a condition that
        # draws a form from it, such as the scalar arguments by position or by name,
        # meets every form over the shapes)
        condition_seed = self.seed_base + self.shapes.index(shape) \
            if shape in self.shapes else self.seed_base
        # calls on inputs laid out as the plain ones (other values, other flags): their
        # launch plans and inputs, for check_plans_agree
        alike: list[tuple[str, launch_plan.Plan | None, list[Any]]] = []
        plain_layout: list[Any] = []
        # calls on inputs laid out otherwise (strided rows, one fused buffer, ...): each
        # its layout's first call, its plan and condition, for check_layout_plans
        others: list[tuple[str, launch_plan.Plan, Any, list[Any]]] = []
        for s in draws:
            if isinstance(s, int):
                fresh = self.make_inputs(shape, seed=self.seed_base + s)
                if inputs is None:
                    inputs = [_own_copy(x) for x in fresh]
                else:  # through .data: the tensors' version counters stay as they were
                    with torch.no_grad():
                        for x, f in zip(inputs, fresh, strict=True):
                            if isinstance(x, torch.Tensor):
                                x.data.copy_(f)
            else:  # an input condition the task declares: fresh storage, its own label
                base = tuple(self.make_inputs(shape, seed=self.seed_base + 50 + draws.index(s)))
                applied = tuple(s.apply(base, condition_seed))
                if len(applied) == len(base) and all(
                        a is b for a, b in zip(applied, base, strict=True)):
                    continue  # nothing to ask here (float32 weights in a float32 call)
                label = f"{shape_label} [{s.name}]"
                inputs = list(applied)
                previous = None
            saved = checks.snapshot(inputs)
            around, held_grads = checks.surroundings(inputs), checks.grads(inputs)
            # the first call of the module as imported: the plan the exported op records
            # for this layout (plan_bind.PlanFresh), whatever values later calls bring
            this_plan = plan if s == 0 else later if s == self.seeds - 1 else None
            call = run
            if isinstance(s, int):
                plain_layout = _layout(inputs)
            elif plan is not None and _layout(inputs) == plain_layout:
                this_plan = launch_plan.Plan()
                alike.append((label, this_plan, saved))
            elif plan is not None and imported is not None and self.replays_layouts(shape):
                this_plan, call = launch_plan.Plan(), imported()
                others.append((label, this_plan, s, _layout(inputs)))
            assert self.tracker is not None
            # fresh allocations in turn: a random draw, zero pages (a user's large
            # torch.empty), the bytes of an earlier output (a caching allocator hands
            # back the block the last result freed)
            fill = draws.index(s) % 3
            self.tracker.zero_fresh = fill == 1
            self.tracker.stale_fresh = list(earlier_outs) if fill == 2 else []
            try:
                out, rule_broken = self.tracked_call(
                    call, inputs, label, record=s == 0, plan=this_plan)
            finally:
                self.tracker.zero_fresh, self.tracker.stale_fresh = False, []
            ref_inputs = checks.snapshot(saved)
            ref = call_with(self.task.reference, ref_inputs)
            outs = checks.flatten_tensors(out)
            expected = {i: ref_inputs[i] for i in self.mutated}
            changed = checks.modified_inputs(inputs, saved, expected)
            if changed:
                raise ShapeFailure("cheat_input_modified",
                                   f"({label}): the kernel wrote into input(s) {changed}")
            changed = checks.written_around(inputs, around, skip=self.mutated) + \
                checks.grads_written(inputs, held_grads)
            if changed:
                raise ShapeFailure("cheat_input_modified", (
                    f"({label}): the kernel wrote into the storage of input(s) {changed} "
                    "outside the view it was given (a strided row's padding, a slice's "
                    "neighbours) or into its .grad: the caller's memory, as the view is"))
            if previous is not None and _replayed(outs, ref, previous):
                raise ShapeFailure("cheat_cached_output", (
                    f"({label}): new input values in the same buffers gave the previous "
                    "call's output back: output cached by input pointer"))
            alias = checks.aliasing(outs, inputs, earlier_outs)
            if alias:
                raise ShapeFailure("cheat_aliasing", f"({label}): {alias}")
            if any(not checks.bitwise_equal(held, saved)
                   for held, saved in zip(earlier_outs, earlier_saved, strict=True)):
                raise ShapeFailure("cheat_aliasing", (
                    f"({label}): an output an earlier call returned changed during a later "
                    "call: the caller's result was overwritten (a kept output used as "
                    "workspace)"))
            kept = self.tracker.kept_outputs(outs) if self.tracker else []
            if kept:
                raise ShapeFailure("cheat_aliasing", (
                    f"({label}): output(s) {kept} were not allocated in this call (a buffer "
                    "kept from an earlier call or the import): the next call would overwrite "
                    "what the caller holds; allocate each output in run()"))
            if rule_broken:
                raise ShapeFailure("torch_compute", f"({label}): {rule_broken}")
            stats = checks.compare_outputs(out, ref, self.tol.atol, self.tol.rtol)
            if isinstance(stats, str):
                raise ShapeFailure("wrong_result", f"({label}): {stats}")
            layout = checks.layout_problem(outs, checks.flatten_tensors(ref), inputs)
            if layout:
                raise ShapeFailure("wrong_result", f"({label}): {layout}")
            verdict = checks.shape_verdict(stats, self.tol.max_bias)
            if worst is None or _worse(stats, worst):
                worst = stats.to_dict()
            self.out["per_shape"][shape_label] = worst
            if verdict:
                raise ShapeFailure(verdict, checks.describe_failure(
                    verdict, label, stats, self.tol.max_bias))
            if self.device == "cuda" and s == 0:
                self.check_stream_order(run, inputs, saved, ref, label)
                self.guard(f"after a call on ({label})")
            earlier_outs.extend(o.detach() for o in outs)
            earlier_saved.extend(o.detach().clone() for o in outs)
            last_plain = checks.snapshot(inputs)  # the latest call's, whatever its draw
            last_inputs = inputs  # the tensors themselves: the next values are written there
            previous = ([o.detach().clone() for o in outs],
                        [r.detach().clone() for r in checks.flatten_tensors(ref)])
        if last_plain is not None and not self.mutated:
            self.check_partly_repeated(run, shape, shape_label, last_plain, last_inputs)
        if not self.request.get("bounds_only"):  # the interpreter's pass reads bounds only
            self.check_counterfactual(run, shape, shape_label)
            if shape == self.shapes[0]:
                self.check_outputs_freed(run, shape, shape_label)
                if getattr(self.task, "empty_batch", True):
                    self.check_empty_batch(run, shape)
            if plan is not None and plan.steps:
                self.check_replay(plan, shape, shape_label)
                if later is not None and later.steps:
                    self.check_replay(later, shape, shape_label)
                self.check_plans_agree(plan, alike, shape, shape_label)
                self.check_layout_plans(others, shape, condition_seed)

    def check_layout_plans(self, others: list[tuple[str, launch_plan.Plan, Any, list[Any]]],
                           shape: tuple[int, ...], condition_seed: int) -> None:
        """Each other layout's plan (its first call from the module as imported: what the
        exported op records and runs for every call so laid out) replayed on fresh values
        under the same condition, so laid out again, and right there. A call that is
        honest when checked in a strided or fused layout and launches what only that
        call's values make right is wrong on the next call's; halves of one fused
        buffer are replayed as halves of one buffer again. The values hold every
        condition of the task's values at once (every_condition.mixed: large logits, a
        masked row, ...), laid out as the layout's own call was: a plan that a warm
        module would not have launched (no row max on a fresh import's first strided
        call) meets the values it is wrong on."""
        from kernelkb.kernels.every_condition import mixed

        stress = mixed(self.task)
        for i, (label, recorded, condition, layout) in enumerate(others):
            if not recorded.steps:
                continue
            base = tuple(self.make_inputs(shape, seed=self.seed_base + 92 + i))
            try:
                base = tuple(stress.apply(base, condition_seed))
            except Exception:  # noqa: BLE001 - values the layout's condition must take
                log.info("(%s) no mixed values for this layout", label)
            values = list(condition.apply(base, condition_seed))
            if _layout(values) != layout:
                continue  # this condition draws its layout anew: no second of it
            self._check_replay_on(recorded, values, f"{label} [fresh values]")

    def check_plans_agree(self, plain: launch_plan.Plan,
                          alike: list[tuple[str, launch_plan.Plan | None, list[Any]]],
                          shape: tuple[int, ...], label: str) -> None:
        """What a call launches may depend on its inputs' shapes and layout, never on
        their values or flags: a call on same-layout inputs (large values, a masked row,
        inputs in another autograd form) whose launches differ from the plain call's has them
        replayed on every other such input set and on fresh plain inputs, and must be
        right there. A kernel that takes a lazy path only where the checks would not
        show it (inputs that require grad, but no large logits) is wrong on another's.
        The plain call's own plan (the module's first call, what the export records) is
        replayed on every such set too: the export runs it whatever the values."""
        sets = [(where, values) for where, _, values in alike]
        sets.append((f"{label} [fresh]", self.make_inputs(shape, seed=self.seed_base + 91)))
        # the plain plan runs every call of this layout in the export: replayed on each set
        plans = [(label, plain), *((where, recorded) for where, recorded, _ in alike
                                   if recorded is not None and recorded.steps
                                   and recorded.signature != plain.signature)]
        for where, recorded in plans:
            for other, values in sets:
                fresh = [_own_copy(x) for x in values]
                ref = call_with(self.task.reference, checks.snapshot(fresh))
                try:
                    out = launch_plan.replay(recorded, fresh)
                except launch_plan.LayoutChanged:
                    continue
                finally:
                    self.guard(f"after a replay on ({other})")
                detail = self.wrong(out, ref, other)
                if detail:
                    self.wrong_by_itself(values, other)
                if detail and recorded is plain:
                    raise ShapeFailure("cheat_replay", (
                        f"({where}): the launches of the layout's first call, which the "
                        "exported op records and runs for every call of this layout, are "
                        f"wrong on ({other}). {detail}"))
                if detail:
                    raise ShapeFailure("cheat_replay", (
                        f"({where}): the call launched other kernels or arguments than on "
                        "plain inputs of the same layout, and those launches are wrong on "
                        f"({other}): what a kernel launches may depend on the inputs' "
                        f"shapes and layout, not on their values or flags. {detail}"))

    def check_outputs_freed(self, run: Any, shape: tuple[int, ...], label: str) -> None:
        """What a call leaves alive must not grow with the calls: an output or an input
        kept past the call (in a module-level list, a cache keyed by call), or a
        workspace made for each new input (a dict keyed by a data pointer), grows the
        process's memory with every call, which a serving loop runs out of, and nothing
        the values show. Asked after the shape's other calls, on inputs never seen: a
        table or workspace a first call builds and later calls reuse is warm by then
        and allowed; one more made for these inputs is not."""
        from torch.multiprocessing.reductions import StorageWeakRef

        assert self.tracker is not None
        inputs = self.inputs_at_new_addresses(shape)
        where = f"{label} [the call's tensors dropped]"
        self.tracker.allocated = []
        try:
            out, _ = self.tracked_call(run, inputs, where, record=False)
        finally:
            made, self.tracker.allocated = self.tracker.allocated, None
        held = {f"output {i}": StorageWeakRef(t.untyped_storage())
                for i, t in enumerate(checks.flatten_tensors(out))}
        held |= {f"input {i}": StorageWeakRef(x.untyped_storage())
                 for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)}
        del out, inputs
        gc.collect()
        kept = [name for name, ref in held.items() if not ref.expired()]
        if kept:
            raise ShapeFailure("cheat_aliasing", (
                f"({where}): {', '.join(kept)} stayed alive after the caller dropped them "
                "(a reference kept in the module or a cache): memory grows with every "
                "call. Keep no reference to what run() is given or returns (a cache "
                "keyed by a tensor holds a weak reference)"))
        alive = [size for ref, size in made if not ref.expired()]
        if alive:
            raise ShapeFailure("cheat_aliasing", (
                f"({where}): the call made {len(alive)} tensor(s) ({sum(alive)} bytes) "
                "that stayed alive after it returned, on inputs never seen before, with "
                "every earlier call's workspaces warm: state made per input (a workspace "
                "keyed by a data pointer) grows with every call. Key a kept workspace by "
                "what a model does not vary (its hidden size, the device), or allocate it "
                "in run()"))
        self.check_kept_per_batch(run, shape, label)

    def check_kept_per_batch(self, run: Any, shape: tuple[int, ...], label: str) -> None:
        """What a call leaves alive must not grow with the first dimension (the batch or
        token count a serving loop changes every step): ``BATCH_GROWTH_CALLS`` calls,
        each on a batch never seen (16 rows more each time on a GPU, one under the
        interpreter; the rest of the shape kept),
        may not each have a tensor of their own alive after the last. A table kept per
        hidden size or device is made once, and a workspace grown to the largest call
        replaces the last one: both pass; a workspace kept per token count (red team 10)
        grows by one buffer for every count a server meets, until it runs out of memory."""
        assert self.tracker is not None
        # on a GPU 16 rows at a time keep a row count's divisibility (no new compile); the
        # interpreter compiles nothing and runs a program at a time: a row at a time
        step = 16 if self.device == "cuda" else 1
        kept: list[list[tuple[Any, int]]] = []  # per call, what it allocated
        for k in range(1, BATCH_GROWTH_CALLS + 1):
            grown = (shape[0] + step * k, *shape[1:])
            where = f"{self.task.shape_label(grown)} [a batch never seen]"
            try:
                inputs = self.make_inputs(grown, seed=self.seed_base + 97 + k)
            except Exception:  # noqa: BLE001 - the task makes no such batch: not asked
                return
            self.tracker.allocated = []
            try:
                out, _ = self.tracked_call(run, inputs, where, record=False)
            finally:
                made, self.tracker.allocated = self.tracker.allocated, None
            kept.append(made)
            del out, inputs
        gc.collect()
        # after the last call: a buffer grown to the largest batch replaces the last one
        # (freed), a buffer per batch stays beside the others
        left = [sum(size for ref, size in made if not ref.expired()) for made in kept]
        if all(left):
            raise ShapeFailure("cheat_aliasing", (
                f"({label} and {BATCH_GROWTH_CALLS} more batches): each call on a batch "
                f"never seen left memory of its own alive ({', '.join(map(str, left))} "
                "bytes, after the last): state kept per batch or token count grows with "
                "every count a serving loop meets. Key a kept workspace by what a model "
                "does not vary (its hidden size, the device), grow one to the largest "
                "call, or allocate it in run()"))

    def inputs_at_new_addresses(self, shape: tuple[int, ...]) -> list[Any]:
        """Fresh inputs none of which starts where an earlier call's input did: the
        allocator hands a freed block out again (small CPU tensors almost always), and a
        workspace kept per data pointer would then be found warm. Draws that land on a
        seen address are held until the end, so the next draw lands elsewhere."""
        held = []
        for attempt in range(16):
            inputs = [_own_copy(x) for x in
                      self.make_inputs(shape, seed=self.seed_base + 93 + attempt)]
            if not any(isinstance(x, torch.Tensor) and x.numel()
                       and x.data_ptr() in self.input_pointers for x in inputs):
                break
            held.append(inputs)
        del held
        return inputs

    def check_empty_batch(self, run: Any, shape: tuple[int, ...]) -> None:
        """Zero rows, as a serving loop's empty step or a filtered batch passes them: the
        shape's first dimension 0. ``run()`` must return what the reference does (its
        outputs' shapes, dtypes and layouts), without an error. Not asked where the task
        cannot make such inputs or its reference refuses them (a dimension no op takes at
        0). Nothing is computed there, so the Triton-only rule is not asked either."""
        empty = (0, *shape[1:])
        where = f"{self.task.shape_label(empty)} [an empty batch]"
        try:
            inputs = self.make_inputs(empty, seed=self.seed_base + 94)
            ref = call_with(self.task.reference, checks.snapshot(inputs))
        except Exception:  # noqa: BLE001 - not a shape this op takes
            return
        try:
            out, _ = self.tracked_call(run, inputs, where, record=False)
        except ShapeFailure:
            raise
        except Exception as err:  # noqa: BLE001 - the candidate's error is the finding
            raise ShapeFailure("wrong_result", (
                f"({where}): run() raised {exception_message(err, CANDIDATE_FILE)}; the "
                "reference returns empty outputs here")) from None
        outs, refs = checks.flatten_tensors(out), checks.flatten_tensors(ref)
        stats = checks.compare_outputs(out, ref, self.tol.atol, self.tol.rtol)
        problem = stats if isinstance(stats, str) else \
            checks.layout_problem(outs, refs, inputs)
        if problem:
            raise ShapeFailure("wrong_result", f"({where}): {problem}")

    def check_partly_repeated(self, run: Any, shape: tuple[int, ...], label: str,
                              last: list[Any], tensors: list[Any]) -> None:
        """Inputs that repeat half of the latest call's (its first half with the rest
        new, then the other way round): a fresh draw never does, a user's batch often
        does (the same prompt prefix, the same first row). Once an evaluation, also a
        user's sequence on new tensors: two calls, then a few elements changed at places
        drawn here (a sparse update of a weight, ``w.data[5:9] += 1``, a fine-tuned
        adapter's rows). An answer cached and validated by a part of the input (its first
        row, a sample of its elements) is wrong here.

        The values are written into the latest call's own tensors (``tensors``), through
        ``.data``, which leaves a tensor's version counter as it was: how an optimizer
        step, an EMA update or a weight loader changes a weight. A cache keyed by the
        tensor, its ``_version`` and its data pointer (a weight prepared once and kept)
        is stale here."""
        # each call's inputs, made just before it (a write into the latest tensors)
        calls: list[tuple[str, Callable[[], list[Any]]]] = []
        for n, keep_first in enumerate((True, False)):
            calls.append((f"{label} [the {'first' if keep_first else 'last'} half of an "
                          "earlier input]", functools.partial(
                              _partly_repeated, tensors, last, keep_first,
                              self.make_inputs(shape, seed=self.seed_base + 71 + n))))
        first_calls: set[str] = set()  # wrong there: wrong on the form, not a cache
        if shape == self.shapes[0]:  # once an evaluation: a cache is no shape's
            # a user's sequence: new tensors, two calls on them, then a sparse update; as
            # plain tensors and as a frozen model passes them (its weights nn.Parameters
            # that require no grad: red team 22 kept a cast copy of exactly those)
            mutated = tuple(getattr(self.task, "mutated_inputs", ()) or ())
            for n, (form, dress) in enumerate((
                    ("new tensors", lambda xs: xs),
                    ("a frozen model's weights", lambda xs: _frozen_weights(xs, mutated)))):
                held = dress([_own_copy(x) for x in
                              self.make_inputs(shape, seed=self.seed_base + 73 + 2 * n)])
                update = self.make_inputs(shape, seed=self.seed_base + 74 + 2 * n)
                first_calls.add(f"{label} [{form}, a first call]")
                calls += [(f"{label} [{form}, a first call]", functools.partial(list, held)),
                          (f"{label} [{form}, the same tensors again]",
                           functools.partial(list, held)),
                          (f"{label} [{form}, the same tensors with a few elements changed]",
                           functools.partial(_sparsely_updated, held, update))]
        for where, make in calls:
            mixed = make()
            saved = checks.snapshot(mixed)
            out, _ = self.tracked_call(run, mixed, where, record=False)
            ref = call_with(self.task.reference, checks.snapshot(saved))
            detail = self.wrong(out, ref, where)
            if detail and where in first_calls:
                raise ShapeFailure("wrong_result", f"({where}): {detail}")
            if detail:
                raise ShapeFailure("cheat_cached_output", (
                    f"({where}): new values written into the latest call's own tensors "
                    "(through .data, their version counters unchanged), half of them "
                    "repeating that call's, gave a wrong answer: an answer or a prepared "
                    "input kept and validated by the tensor, its version or a part of its "
                    f"values. {detail}"))

    def wrong(self, out: Any, ref: Any, where: str) -> str | None:
        """What is wrong with ``out`` against the reference (None: right), as a failure's
        message says it."""
        found = self.verdict(out, ref, where)
        return found[1] if found else None

    def verdict(self, out: Any, ref: Any, where: str) -> tuple[str, str] | None:
        """(error kind, message) of ``out`` against the reference; None where right."""
        stats = checks.compare_outputs(out, ref, self.tol.atol, self.tol.rtol)
        if isinstance(stats, str):
            return "wrong_result", stats
        problem = checks.shape_verdict(stats, self.tol.max_bias)
        return (problem, checks.describe_failure(problem, where, stats, self.tol.max_bias)) \
            if problem else None

    def replays(self, shape: tuple[int, ...]) -> bool:
        """Whether a shape's launch plan is recorded and replayed: the plan keeps every
        storage of a call alive, so not past the inputs the judge re-checks itself."""
        try:
            size = self.task.bytes_moved(shape, self.dtype)
        except Exception:  # noqa: BLE001 - a user's task without a byte count: small enough
            size = 0
        return size <= limits.SPOT_MAX_BYTES // 4

    def replays_layouts(self, shape: tuple[int, ...]) -> bool:
        """Whether each other layout's plan is recorded and replayed on this shape
        (check_layout_plans): every shape on a GPU, where a replay costs milliseconds;
        under the interpreter, whose calls take seconds on a shape of many programs (the
        edge shape 1823x781: 8-16 s), the first shape checked where it moves up to
        ``LAYOUT_REPLAY_BYTES``: its replays stay a few small kernel calls."""
        if self.device == "cuda":
            return True
        if shape != self.shapes[0]:
            return False
        try:
            return self.task.bytes_moved(shape, self.dtype) <= LAYOUT_REPLAY_BYTES
        except Exception:  # noqa: BLE001 - a user's task without a byte count
            return False

    def check_replay(self, plan: launch_plan.Plan, shape: tuple[int, ...], label: str
                     ) -> None:
        """The recorded call's launches, allocations and copies, replayed on fresh inputs
        without run() (launch_plan.py): an answer that depended on anything else run()
        did is wrong there. Then once more on those inputs moved ``PHASE_BYTES`` along
        in memory: a plan is keyed on layout and 16-byte alignment alone, so a fact of
        an address past that (a row's phase in its cache line, where another input sat)
        that run() froze into it is wrong there."""
        fresh = [_own_copy(x) for x in self.make_inputs(shape, seed=self.seed_base + 90)]
        if self._check_replay_on(plan, fresh, label):
            self._check_replay_on(plan, [_at_another_phase(x) for x in fresh],
                                  f"{label} [{PHASE_BYTES} bytes along]", moved=True)

    def _check_replay_on(self, plan: launch_plan.Plan, fresh: list[Any], label: str,
                         moved: bool = False) -> bool:
        """Whether the plan replayed (right, or ShapeFailure). ``moved``: the plan already
        replayed on these values where they were, so failing to run now (a load out of
        its tensors) is the plan's, not the replay's."""
        ref = call_with(self.task.reference, checks.snapshot(fresh))
        try:
            out = launch_plan.replay(plan, fresh)
            if self.device == "cuda":
                torch.cuda.synchronize()
        except launch_plan.LayoutChanged as err:
            log.info("(%s) no replay: %s", label, err)
            return False
        except Exception as err:  # noqa: BLE001 - a plan this replay cannot run: no verdict
            if moved:
                raise ShapeFailure("cheat_replay", (
                    f"({label}): the call's launches, replayed on the same values laid out "
                    f"alike {PHASE_BYTES} bytes further along in memory (the same 16-byte "
                    "alignment, all a launch plan is keyed on), failed where they ran "
                    "before: they depend on where the inputs sat. "
                    f"{type(err).__name__}: {trim(str(err), 300)}")) from None
            log.warning("(%s) the launch plan did not replay (%s: %s)", label,
                        type(err).__name__, err)
            return False
        finally:
            self.guard(f"after the replay on ({label})")
        detail = self.wrong(out, ref, label)
        if detail:
            self.wrong_by_itself(fresh, label)
            raise ShapeFailure("cheat_replay", (
                f"({label}): the candidate's own launches, replayed on fresh inputs without "
                "run() (its kernels, grids and arguments in the order it launched them, with "
                "the allocations and copies between them), gave a wrong answer: the answer "
                "depended on other work run() did (PyTorch compute, a value read on the "
                "host, state kept from an earlier call, where its inputs sat in memory). "
                f"{detail}"))
        return True

    def wrong_by_itself(self, values: list[Any], label: str) -> None:
        """Where a replay was wrong, run() on the same values: a kernel wrong there by
        itself is ``wrong_result`` (a draw the earlier checks' values happened to pass:
        one element of an RMSNorm without its residual is right whatever the residual),
        not a replay that differs from the call. Only where the replay left the inputs
        as they were (no input the op writes)."""
        run = self.run_checked
        if run is None or self.mutated:
            return
        inputs = [_own_copy(x) for x in values]
        ref = call_with(self.task.reference, checks.snapshot(inputs))
        where = f"{label} [run() itself]"
        try:
            out, _ = self.tracked_call(run, inputs, where, record=False)
        except ShapeFailure:
            raise
        except Exception:  # noqa: BLE001 - run() failing here says nothing of the replay
            return
        found = self.verdict(out, ref, where)
        if found:
            raise ShapeFailure(*found)

    def tracked_call(self, run: Any, inputs: list[Any], label: str, record: bool,
                     plan: launch_plan.Plan | None = None) -> tuple[Any, str | None]:
        """One recorded call, the tamper check after it; (output, why the Triton-only
        rule was broken or None): the caller reports a replayed or aliased output first,
        being the more specific diagnosis. ``plan``: its launch plan is recorded there."""
        assert self.tracker is not None
        self.input_pointers.update(x.data_ptr() for x in inputs
                                   if isinstance(x, torch.Tensor) and x.numel())
        state, metadata = caller_state.snapshot(), caller_state.tensor_metadata(inputs)
        with self.tracker.call(inputs):
            if plan is not None:
                plan.inputs, self.tracker.plan = list(inputs), plan
            try:
                out = call_with(run, inputs)
            finally:
                self.tracker.plan = None
        if plan is not None:
            plan.finish(out)
        if self.device == "cuda":
            torch.cuda.synchronize()
        self.guard(f"after a call on ({label})")
        changed = caller_state.changed(state, caller_state.snapshot())
        if changed:
            raise Tampered("cheat_tamper", (
                f"({label}): the call changed PyTorch's global state for its caller "
                f"({'; '.join(changed[:4])}): every op a model runs after it would"))
        changed = caller_state.metadata_changed(metadata, caller_state.tensor_metadata(inputs))
        if changed:
            raise ShapeFailure("cheat_input_modified", (
                f"({label}): the call changed the caller's tensors beyond their bytes "
                f"({', '.join(changed[:6])}): a weight's autograd flags, storage or layout "
                "are its caller's"))
        kept = plan.kept_and_changed() if plan is not None else []
        if kept:
            raise ShapeFailure("cheat_aliasing", (
                f"({label}): the call wrote into {len(kept)} buffer(s) kept from before it "
                f"({', '.join(f'{n} bytes' for n in kept)}: neither an input nor allocated "
                "in the call, such as a module-level workspace) and left them changed: "
                "every call shares that state, so two calls in flight (two streams, two "
                "threads) read each other's. Allocate scratch in run()"))
        plain = checks.plain_tensor_problem(out)
        if plain:
            raise ShapeFailure("wrong_result", f"({label}): {plain}")
        written = [inputs[i] for i in self.mutated if isinstance(inputs[i], torch.Tensor)]
        problem = self.tracker.violation(checks.flatten_tensors(out), written)
        if record:
            sigs = self.tracker.signatures(own_only=True)
            self.expected_launches[label] = (len(sigs), set(sigs))
            mismatch = declared.launch_problem(self.header, (sig for _, sig in sigs))
            if mismatch and len(self.config_problems) < 2:
                self.config_problems.append(f"({label}): {mismatch}")
        self.own_kernels |= {launch.kernel for launch in self.tracker.launches
                             if launch.candidate}
        return out, problem

    def check_counterfactual(self, run: Any, shape: tuple[int, ...], label: str) -> None:
        """Once more with every Triton launch run on decoy copies of the data (a fresh
        random draw in every float tensor that holds data) and fresh allocations random
        (provenance._decoy; finite, so no NaN tells this call apart): an output still
        right then did not come from the kernels, whatever route it took. The launches
        still run, so a candidate cannot tell this call apart by a probe kernel's flag."""
        assert self.tracker is not None
        inputs = self.make_inputs(shape, seed=self.seed_base)
        ref = self.task.reference(*checks.snapshot(inputs))
        try:
            # decoy data can make the CPU interpreter's reductions warn: expected here
            with self.tracker.call(inputs, counterfactual=True), warnings.catch_warnings():
                decoys = self.tracker.decoys(inputs)
                warnings.simplefilter("ignore", RuntimeWarning)
                out = run(*inputs)
            if self.device == "cuda":
                torch.cuda.synchronize()
        except Exception as err:  # noqa: BLE001 - the candidate's, named in the failure
            # its kernels ran, on other data of the same kind: an honest run() does not
            # fail there, and one that fails only there has told this call apart
            raise ShapeFailure("torch_compute", (
                f"({label}): run() raised when its kernels were given other data of the "
                f"same kind ({type(err).__name__}: {str(err)[:200]}); it ran on the plain "
                "call, so it tells the counterfactual call apart")) from None
        finally:
            self.guard(f"after a call on ({label})")
        if checks.plain_tensor_problem(out):
            return
        outs = checks.flatten_tensors(out)
        if not outs or not sum(o.numel() for o in outs):
            return
        try:
            on_decoys = self.task.reference(*decoys)
        except Exception:  # noqa: BLE001 - no reference on decoys: the check stands alone
            on_decoys = None
        if on_decoys is not None and self._same_answer(on_decoys, ref):
            return  # the op's answer does not depend on the data here (softmax of one
            # column): a right output says nothing about where it came from
        if self._same_answer(out, ref):
            raise ShapeFailure("torch_compute", (
                f"({label}): the output was still correct with every Triton launch run on "
                f"decoy copies of the data, so it was not computed by the candidate's "
                f"kernels; {provenance.RULE}"))

    def _same_answer(self, one: Any, other: Any) -> bool:
        """Whether two answers agree within the task's tolerance."""
        stats = checks.compare_outputs(one, other, self.tol.atol, self.tol.rtol)
        return not isinstance(stats, str) and checks.shape_verdict(stats, self.tol.max_bias) is None

    def check_stream_order(self, run: Any, inputs: list[Any], saved: list[Any], ref: Any,
                           label: str) -> None:
        """After a first (compiling) call, so the launch is fast enough to beat the sleep."""
        from kernelkb.optimizer.sandbox.streams import run_behind_busy_stream

        out = run_behind_busy_stream(run, inputs, saved)
        stats = checks.compare_outputs(out, ref, self.tol.atol, self.tol.rtol)
        if isinstance(stats, str) or checks.shape_verdict(stats, self.tol.max_bias):
            raise ShapeFailure("cheat_unsynchronised", (
                f"({label}): output wrong when the inputs arrive in stream order behind "
                "other work: the kernel does not run on (or wait for) the current stream"))

    def timed_shapes(self) -> list[tuple[int, ...]]:
        """The shapes it times (the task's rule, ``Task.timed``)."""
        return self.task.timed(self.shapes)

    def time_all(self, module: ModuleType) -> bool:
        """``timed_shapes`` with the GPU to itself (gpu_turns.py)."""
        with self.turns.exclusive() as waited:
            self.out["gpu_lock_wait_s"] = waited
            return self._time_all(module)

    def _time_all(self, module: ModuleType) -> bool:
        """Time every sweep shape; False when the candidate was caught tampering or doing
        other work under the clock than when it was checked (the failure is written)."""
        from kernelkb.optimizer.sandbox.compiled_info import kernel_resources

        self.progress("performance")
        parent = self.request.get("parent_timings") or {}
        peaks = self.request.get("peaks") or {}
        timings, retimed, graphs = {}, {}, {}
        reasons: list[str] = []
        unsync: dict[str, str] = {}  # shape label -> its unsynchronised-work reading
        parent_run = self.parent_run
        self.out["settle"] = compare.settle(max_s=float(self.request.get("settle_s", 3.0))
                                            ).to_dict()
        all_sets: dict[str, list[list[Any]]] = {}
        floors: dict[str, float | None] = {}
        try:
            for shape in self.timed_shapes():
                label = self.task.shape_label(shape)
                self.progress("performance", label)
                sets = [self.make_inputs(shape, seed=self.seed_base + 100 + k)
                        for k in range(TIMING_INPUT_SETS)]
                all_sets[label] = sets
                floor = timing.floor_ms(self.task.bytes_moved(shape, self.dtype),
                                        self.task.flops(shape, self.dtype), peaks)
                floors[label] = floor
                call = _Counted(timing.rotating(module.run, sets))
                with self.counting_launches() as tracker:
                    result = timing.time_shape(
                        call, parent_ms=parent.get(label), floor_ms=floor,
                        parent_call=functools.partial(parent_run.call, sets))
                self.guard(f"after timing ({label})")
                self.check_timed_launches(label, call.calls, tracker)
                timings[label] = [result.median_ms, result.iqr_ms]
                graphs[label] = self.graph_time(module, sets, label, floor, reasons)
                if result.parent_retimed_ms is not None:
                    retimed[label] = result.parent_retimed_ms
                self.lap(f"time {label}")
                reasons += [f"({label}) {r}" for r in result.suspect_reasons]
                if result.unsync_reason:
                    unsync[label] = result.unsync_reason
            label = "GPU time"
            self.progress("performance", label)
            self.out["gpu"] = self.gpu_time(module, all_sets, parent_run, set(unsync))
            reasons += _unsync_kept(unsync, timings, self.out["gpu"]["busy_ms"])
            reasons += self.unreliable
            for k, (median, _, _) in self.out["gpu"]["alone"].items():
                if floors.get(k) is not None and median < floors[k]:
                    reasons.append(f"({k}) {median:.4f} ms of GPU time, under the "
                                   f"{floors[k]:.4f} ms the GPU's peak allows")
        except Tampered as err:
            self.out["failing_shapes"].append(label)
            self.fail("performance", err.kind, str(err))
            return False
        self.out.update(stage="performance", timings=timings, suspect_reasons=reasons,
                        parent_retimed=retimed, graph_timings=graphs,
                        resources=kernel_resources(module))
        return True

    def gpu_time(self, module: ModuleType, all_sets: dict[str, list[list[Any]]],
                 parent_run: _ParentRunner, unsync: set[str]) -> dict[str, Any]:
        """The figures verdicts use (compare.py): the candidate interleaved with the
        incumbent (the parent) when there is one that runs, else the candidate alone."""
        clock = compare.GpuClock()
        calls = {k: _Counted(timing.rotating(module.run, sets)) for k, sets in all_sets.items()}
        incumbent = {k: parent_run.call(sets) for k, sets in all_sets.items()}
        weights = {k: float(self.task.objective_weight(self.task.parse_shape(k)))
                   for k in all_sets}
        out: dict[str, Any] = {"weights": weights}
        with self.counting_launches() as tracker:
            if all(c is not None for c in incumbent.values()):
                try:
                    out["comparison"] = compare.compare(calls, incumbent, weights,
                                                        clock).to_dict()
                except Exception as err:  # noqa: BLE001 - the incumbent broke: time alone
                    log.warning("comparison with the incumbent failed: %r", err)
                    torch.cuda.synchronize()
            compared = (out.get("comparison") or {}).get("shapes")
            # the candidate's own figures: its side of the comparison, else timed alone
            out["alone"] = {k: [s["candidate_ms"], s["candidate_iqr_ms"], s["candidate_host_ms"]]
                            for k, s in compared.items()} if compared else \
                {k: list(compare.gpu_profile(call, clock)) for k, call in calls.items()}
            comparison = out.get("comparison") or {}
            read = {k: c for k, c in calls.items()
                    if _may_gain(k, comparison, unsync)}
            out["busy_ms"] = self.check_busy_time(read, out["alone"])
        self.guard("after GPU timing")
        self.check_launches_over(calls, tracker)
        return out

    def check_busy_time(self, calls: dict[str, _Counted], alone: dict[str, list[float]]
                        ) -> dict[str, float | None]:
        """The GPU's own timestamps of every kernel, every stream (kernel_clock.py): the
        GPU time reported must not be far under the time the GPU was busy per call.
        A process's first torch.profiler session costs seconds (5-6 s on an H200 host, a
        later one a millisecond), so only ``calls`` are read: see _may_gain."""
        self.lap("GPU time")  # the comparison; each shape's CUPTI pass is a lap of its own
        busy: dict[str, float | None] = {}
        for k, call in calls.items():
            reading = kernel_clock.read(call, reader=self.request.get("gpu_timestamps", "auto"))
            busy[k] = reading.busy_ms if reading else None
            self.lap(f"GPU timestamps ({reading.reader if reading else 'none'}) {k}")
            foreign = kernel_clock.foreign_kernels(reading.kernels, self.own_kernels) \
                if reading else []
            if foreign:
                shown = "; ".join(name[:120] for name in foreign[:3])
                raise Tampered("torch_compute", (
                    f"({k}): under the clock run() ran {len(foreign)} GPU kernel(s) that are "
                    f"neither its own Triton kernels ({', '.join(sorted(self.own_kernels))}) "
                    f"nor a copy or fill: {shown}. The checked calls launched the same "
                    f"Triton kernels, so the work was handed to a library only when timed; "
                    f"{provenance.RULE}"))
            if kernel_clock.hides_work(reading):
                assert reading is not None and reading.bracketed_ms is not None
                raise Tampered("cheat_timer", (
                    f"({k}): the events around the same calls saw {reading.bracketed_ms:.4f} "
                    f"ms per call, where the GPU's own timestamps saw it busy "
                    f"{reading.busy_ms:.4f} ms per call (all streams): work the events do "
                    "not bracket (a side stream never joined back?)"))
            if kernel_clock.under_busy_time(alone[k][0], busy[k]):
                # the same calls agree, the timed pass read far less: the GPU changed
                # between the passes (another process on it), or the candidate did
                self.unreliable.append(
                    f"({k}) timed at {alone[k][0]:.4f} ms of GPU time, but the GPU's own "
                    f"timestamps saw {busy[k]:.4f} ms busy per call in a later pass: timing "
                    "unreliable (another process on the GPU?)")
        return busy

    def check_launches_over(self, calls: dict[str, _Counted], tracker: provenance.Tracker
                            ) -> None:
        """check_timed_launches over several shapes timed together."""
        expected = {k: e for k in calls if (e := self.expected_launches.get(k)) is not None}
        if len(expected) < len(calls):  # a shape whose launches were not counted
            return
        want = sum(expected[k][0] * calls[k].calls for k in calls)
        known = set().union(*(e[1] for e in expected.values()))
        odd = [sig for sig in tracker.sampled if sig not in known]
        if tracker.counted != want or odd:
            detail = f"; e.g. {odd[0][0]} launched with other grid/arguments" if odd else ""
            raise Tampered("cheat_timer", (
                f"under the GPU clock run() launched {tracker.counted} of the candidate's "
                f"Triton kernels where the checked calls predict {want}{detail}: the timed "
                "work must be the checked work"))

    def graph_time(self, module: ModuleType, sets: list[list[Any]], label: str,
                   floor: float | None, reasons: list[str]) -> float | None:
        """GPU time alone (CUDA-graph replay) of the candidate's call on this shape: shown
        beside the eager figure, never used for the verdict. The capture runs run() on the
        host like any call, so the same launch check applies: a candidate that launches
        other work when it sees a capture is caught as a timer cheat."""
        call = _Counted(timing.rotating(module.run, sets))
        with self.counting_launches() as tracker:
            graph = timing.graph_ms(call, rep_ms=timing.CALL_REP_MS)
        self.guard(f"after graph timing ({label})")
        self.check_timed_launches(label, call.calls, tracker)
        if graph is not None and floor is not None and graph < floor:
            reasons.append(f"({label}) replayed from a CUDA graph in {graph:.4f} ms, under "
                           f"the {floor:.4f} ms the GPU's peak allows")
        return graph

    @contextmanager
    def counting_launches(self) -> Iterator[provenance.Tracker]:
        assert self.tracker is not None
        tracker = self.tracker
        tracker.counted, tracker.sampled, tracker.counting = 0, set(), True
        try:
            yield tracker
        finally:
            tracker.counting = False

    def check_timed_launches(self, label: str, calls: int, tracker: provenance.Tracker) -> None:
        """Under the clock, run() must launch what it launched when checked: the same
        number of the candidate's kernels per call, with the same grid and arguments."""
        expected = self.expected_launches.get(label)
        if expected is None or not calls:
            return
        per_call, signatures = expected
        odd = [sig for sig in tracker.sampled if sig not in signatures]
        if tracker.counted != per_call * calls or odd:
            seen = f"{tracker.counted / calls:.2f}"
            detail = f"; e.g. {odd[0][0]} launched with other grid/arguments" if odd else ""
            raise Tampered("cheat_timer", (
                f"({label}): under the clock run() launched {seen} of the candidate's Triton "
                f"kernels per call, {per_call} when checked{detail}: the timed work must be "
                "the checked work"))


def _may_gain(label: str, comparison: dict[str, Any], unsync: set[str]) -> bool:
    """Whether a shape's figure needs the GPU's own timestamps: it was timed alone, its
    interval does not rule out a gain over the incumbent beyond the noise floor, or an
    unsynchronised-work reading waits to be cleared. Work hidden from the events makes
    the candidate read faster than the incumbent it is interleaved with, so it lands
    here; a figure the interval holds within the floor of a slower-or-equal incumbent's
    can win nothing, and skipping it keeps an A/A or regressed evaluation seconds
    cheaper."""
    shape = (comparison.get("shapes") or {}).get(label)
    if shape is None or label in unsync:
        return True
    return may_improve(shape["high"], comparison["noise_floor"])


def _unsync_kept(unsync: dict[str, str], timings: dict[str, list[float]],
                 busy: dict[str, float | None]) -> list[str]:
    """The unsynchronised-work readings that stand as suspicions: those the GPU's own
    timestamps do not contradict (kernel_clock.clears_stream_clock). With evaluations
    beside each other, another process's kernels stretch an honest call's synchronised
    time; work of this process left on a side stream shows in the timestamps."""
    kept = []
    for label, reason in unsync.items():
        if kernel_clock.clears_stream_clock(timings[label][0], busy.get(label)):
            log.info("(%s) %s: cleared, the GPU's own timestamps saw %.4f ms busy per call",
                     label, reason, busy[label])
        else:
            kept.append(f"({label}) {reason}")
    return kept


class _Counted:
    """The timed call, counted (the launches per call are compared with the checks)."""

    def __init__(self, call: Any) -> None:
        self.call, self.calls = call, 0

    def __call__(self) -> Any:
        self.calls += 1
        return self.call()


class _ParentRunner:
    """The parent kernel, loaded only when a timing needs it re-measured beside the child
    (optimizer/sandbox/timing.py says why). It was correct when it was evaluated; if it
    no longer loads, the 10x rule keeps the earlier figure."""

    def __init__(self, source: str | None) -> None:
        self.source, self.module, self.failed = source, None, not source

    def call(self, sets: list[list[Any]]) -> Any:
        if self.module is None and not self.failed:
            assert self.source is not None  # failed from the start without a source
            try:
                self.module = load_candidate(self.source, module_name="parent")
            except Exception as err:  # noqa: BLE001 - any import failure: keep the old figure
                log.warning("parent kernel did not load for re-timing: %s", err)
                self.failed = True
        return None if self.module is None else timing.rotating(self.module.run, sets)


def _replayed(outs: list[torch.Tensor], ref: Any,
              previous: tuple[list[torch.Tensor], list[torch.Tensor]]) -> bool:
    """True when the output repeats the previous call's while the reference changed."""
    old_outs, old_refs = previous
    refs = checks.flatten_tensors(ref)
    same_out = len(outs) == len(old_outs) and all(
        checks.bitwise_equal(a, b) for a, b in zip(outs, old_outs, strict=True))
    ref_changed = not all(checks.bitwise_equal(a, b)
                          for a, b in zip(refs, old_refs, strict=True))
    return same_out and ref_changed


def _worse(stats: checks.ErrorStats, worst: dict[str, Any]) -> bool:
    key = (stats.mismatches + stats.nonfinite, abs(stats.bias), stats.max_abs_err)
    old = (worst["mismatches"] + worst["nonfinite"], abs(worst["bias"]), worst["max_abs_err"])
    return key > old


def measure_baseline(request: dict[str, Any]) -> dict[str, Any]:
    """Reference (PyTorch eager) median GPU time per shape, on the candidates' clock."""
    load_origin(request.get("task_origin"))
    task, dtype = get_task(request["task"]), DTYPES[request["dtype"]]
    settled = compare.settle(max_s=float(request.get("settle_s", 3.0)))
    clock = compare.GpuClock()
    out: dict[str, float] = {}
    for shape in (tuple(s) for s in request["shapes"]):
        sets = [list(task.make_inputs(shape, dtype, 100 + k, "cuda")) for k in range(3)]
        out[task.shape_label(shape)] = compare.gpu_profile(
            timing.rotating(task.reference, sets), clock)[0]
    return {"final": True, "timings": out, "settle": settled.to_dict()}


def _half_repeated(old: Any, new: Any, keep_first: bool) -> Any:
    """A float tensor input half old values (its first half in memory order, or its
    last) and half new ones; anything else (positions, scalars) new as drawn."""
    if not (isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor)
            and old.is_floating_point() and old.shape == new.shape and old.numel() > 1):
        return new
    mixed = _own_copy(new.contiguous())
    flat, before = mixed.view(-1), old.contiguous().view(-1)
    half = flat.numel() // 2
    if keep_first:
        flat[:half] = before[:half]
    else:
        flat[half:] = before[half:]
    return mixed


def _partly_repeated(tensors: list[Any], last: list[Any], keep_first: bool,
                     fresh: list[Any]) -> list[Any]:
    """Half of each of the latest call's inputs repeated, written into its tensors."""
    return [_written_into(target, _half_repeated(old, new, keep_first))
            for target, old, new in zip(tensors, last, fresh, strict=True)]


SPARSE_CHANGES = 4  # elements a sparse update changes in each float input


def _sparse_update(old: Any, new: Any) -> Any:
    """A float tensor input as ``old`` but for ``SPARSE_CHANGES`` elements, at places
    drawn here (no candidate can know them), that take ``new``'s values; anything else
    (positions, scalars) as ``old`` was."""
    if not (isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor)
            and old.is_floating_point() and old.shape == new.shape and old.numel() > 1):
        return old
    changed = _own_copy(old.contiguous())
    flat, values = changed.view(-1), new.contiguous().view(-1)
    for _ in range(SPARSE_CHANGES):
        place = secrets.randbelow(flat.numel())
        flat[place] = values[place] + (1 if bool(values[place] == flat[place]) else 0)
    return changed


def _sparsely_updated(held: list[Any], update: list[Any]) -> list[Any]:
    """``held`` with a few elements of each float tensor changed in place, through
    ``.data``."""
    return [_written_into(t, _sparse_update(t, new)) for t, new in zip(held, update,
                                                                        strict=True)]


def _frozen_weights(inputs: list[Any], mutated: tuple[int, ...]) -> list[Any]:
    """The inputs as a frozen model passes them: the first float tensor an activation,
    every other one it does not write an ``nn.Parameter`` that requires no grad."""
    floats = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)
              and x.is_floating_point() and i not in mutated]
    return [torch.nn.Parameter(x, requires_grad=False) if i in floats[1:] else x
            for i, x in enumerate(inputs)]


def _written_into(target: Any, values: Any) -> Any:
    """``values`` written into ``target`` through ``.data`` (its version counter stays as
    it was) where ``target`` is a tensor that can hold them, returning ``target``; else
    ``values`` as they are."""
    if not (isinstance(target, torch.Tensor) and isinstance(values, torch.Tensor)) \
            or (target.shape, target.dtype, target.device) != \
            (values.shape, values.dtype, values.device) \
            or any(st == 0 and n > 1 for st, n in zip(target.stride(), target.shape,
                                                      strict=True)):
        return values
    with torch.inference_mode() if target.is_inference() else torch.no_grad():
        target.data.copy_(values)  # an inference tensor is written inside the mode only
    return target


PHASE_BYTES = 48  # 16-byte aligned, and off every 32- to 512-byte boundary an allocator keeps


def _at_another_phase(value: Any) -> Any:
    """``value``'s layout and values on storage that begins ``PHASE_BYTES`` past an
    allocation's start (a view of a larger one), so its address keeps its 16-byte
    alignment (a plan's key) and nothing else of the recorded call's."""
    if not isinstance(value, torch.Tensor):
        return value
    nbytes = value.untyped_storage().nbytes()
    room = torch.UntypedStorage(nbytes + PHASE_BYTES, device=value.device)
    moved = torch.empty(0, dtype=value.dtype, device=value.device).set_(
        room[PHASE_BYTES:PHASE_BYTES + nbytes], value.storage_offset(), value.size(),
        value.stride())
    with torch.no_grad():
        moved.copy_(value)
    return moved.requires_grad_(value.requires_grad)  # a leaf, as every drawn input is


def _own_copy(value: Any) -> Any:
    """A tensor on storage of its own, guarded on a GPU where it can be (``guarded``
    copies)."""
    if not isinstance(value, torch.Tensor):
        return value
    copy = guards.guarded(value) if value.is_cuda else value
    return copy if copy is not value else value.clone()


def _write_tensors(tensors: list[torch.Tensor], fd: int) -> list[dict[str, Any]]:
    """The tensors' bytes one after another in the judge's memfd, and where each lies."""
    os.ftruncate(fd, 0)
    described, offset = [], 0
    for t in tensors:
        # a fresh dense copy: .contiguous() keeps a size-1 view's stride of 2, which a
        # byte view refuses
        flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t.detach().reshape(-1).cpu())
        raw = flat.view(torch.uint8).numpy() if flat.numel() else b""
        os.pwrite(fd, raw, offset)  # type: ignore[arg-type]  # numpy: __buffer__ on 3.12+ only
        nbytes = flat.numel() * flat.element_size()
        described.append({"dtype": str(t.dtype), "shape": list(t.shape), "offset": offset,
                          "nbytes": nbytes})
        offset += nbytes
    return described


def write_result(data: dict[str, Any], *, fd: int | None, path: str | None) -> None:
    """The result (or progress) to the runner's descriptor, or to a file (in-process
    tests): the runner reads only the descriptor it opened (runner.read_result)."""
    text = json.dumps(data).encode()
    if fd is not None:
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
        return
    assert path is not None
    with replaced(Path(path)) as tmp:  # a reader sees the last whole result, never half
        tmp.write_bytes(text)


def _layout(inputs: list[Any]) -> list[Any]:
    """Each input's shape, strides, offset and dtype (non-tensors by type)."""
    return [(tuple(x.shape), tuple(x.stride()), x.storage_offset(), x.dtype)
            if isinstance(x, torch.Tensor) else type(x).__name__ for x in inputs]


def read_request(arg: str) -> dict[str, Any]:
    """``fd:N`` (the runner's descriptor) or a path."""
    if arg.startswith("fd:"):
        fd = int(arg[3:])
        with os.fdopen(fd, "rb") as handle:
            return json.loads(handle.read())
    with open(arg) as handle:
        return json.load(handle)


def main(argv: list[str]) -> int:
    import_path.drop_start_folder()  # the judge forked from here imports after the worker
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    request = read_request(argv[0])
    if request.get("mode") != "baseline" and request.get("result_fd") is not None:
        from kernelkb.optimizer.sandbox import judge

        return judge.run(request, _serve_worker)  # the worker in a child the judge follows
    _serve_worker(request)
    return 0


def _serve_worker(request: dict[str, Any]) -> None:
    if os.environ.get("TRITON_INTERPRET") == "1":
        from kernelkb.optimizer.sandbox import bounds, program_order, races

        bounds.install()
        program_order.install()
        races.install()
    limit = request.get("gpu_mem_limit_mb")
    if limit and torch.cuda.is_available():
        total = torch.cuda.get_device_properties(0).total_memory / 2**20
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total))
    if request.get("mode") == "baseline":
        write_result(measure_baseline(request), fd=request.get("result_fd"),
                     path=request.get("result_path"))
        return
    Worker(request).evaluate()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
