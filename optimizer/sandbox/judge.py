"""The judge: the one process of an evaluation that the candidate cannot reach.

Every check the worker makes lives in the candidate's own process, where ``gc``, ctypes
and ``__code__`` reach everything, including the descriptor the result goes out on; a
candidate could write "ok, 100x" there itself. So the evaluation's entry process forks
before any candidate code exists:

- the **child** closes the runner's descriptors and becomes the worker: it loads the
  candidate, checks and times it (worker.py), and writes its report into a descriptor of
  the judge's (a memfd), then waits for the judge's questions;
- the **parent**, the judge, never imports candidate code. It is not dumpable (so the
  same-user child cannot open its memory or descriptors under /proc, and the jail's
  seccomp filter refuses ptrace and process_vm_*), relays the worker's progress to the
  runner, and decides the result itself:
  * a spot-check on inputs it draws now, from a seed the worker has not seen, on shapes
    it picks at random: the worker runs the live kernel on them, the judge computes the
    reference itself and compares with the task's tolerance; a candidate that is wrong
    where the worker said "pass" is ``wrong_result``, a report that does not parse or a
    kernel that does not answer is a failure;
  * on a GPU, its own clock: back-to-back calls of the candidate and of the incumbent,
    timed by the judge around the worker's answer; where the calls are bound by GPU work
    (``GPU_BOUND_MS``), a reported GPU time far under the judge's figure, or a claimed
    gain the judge's ratio does not show, is ``cheat_timer``.
  * one more shape, drawn within the bounds of the shapes asked and named by no list of
    the task's, under every input condition: a kernel safe only on the shapes it could
    read from the lists is ``wrong_result``. The worker checks with autograd on; the
    judge's runs are under ``torch.inference_mode()`` and, on the drawn shape,
    ``torch.no_grad()``: a kernel safe only in the state the checks run in is caught too;
  * every other dtype the task declares, on its smallest CPU shape, plain and under the
    task's own conditions: a kernel right only in the dtype it was asked in (a cast to
    float16 and back for float32 inputs) is ``wrong_result``;
  * one shape past the largest asked (1.5-2x its bytes on the CPU, 2-4x on a GPU),
    within the task's bounds: a kernel
    that takes another path only on inputs larger than anything checked is caught where
    that path is wrong;
  * after its timed calls, one more call on the same inputs, checked: a kernel that goes
    lazy after its first calls on a buffer (same launches, a device-side count) is
    ``wrong_result``;
  * the same number of calls on inputs the kernel has seen and on inputs it has not: a
    kernel whose answers come from a cache keyed by its inputs (a device-side
    fingerprint, right on every new input) is fast only on inputs that repeat, as timed
    calls do, and is ``cheat_cached_output``.
  Only the judge writes the runner's result.

What stays in the worker: provenance (a torch result copied out by a kernel) and the
tamper checks, which need the candidate's process; they are the first line, and the
judge's checks do not depend on them.
"""

from __future__ import annotations

import ctypes
import json
import logging
import math
import os
import random
import re
import secrets
import select
import signal
import sys
import threading
import time
import traceback
from typing import Any

import torch

from kernelkb.optimizer.sandbox import jail, strays
from kernelkb.optimizer.sandbox.gpu_turns import GpuTurns
from kernelkb.optimizer.sandbox.limits import SPOT_MAX_BYTES

log = logging.getLogger("kernelkb.optimizer.sandbox.judge")

# shapes the judge re-checks, drawn at random; one under the CPU interpreter, where a
# shape's run costs seconds (the worker checked every shape; the judge is there for a
# worker the candidate rewrote, which is wrong everywhere it is wrong)
SPOT_SHAPES = 1 if os.environ.get("TRITON_INTERPRET") == "1" else 2
ANSWER_TIMEOUT_S = 60.0  # for one answer of the worker to one question
NEW_SHAPE_TIMEOUT_S = 180.0  # the first answer on the drawn shape: compiles, may autotune
GPU_BOUND_MS = 0.5  # per call back to back: above this the GPU sets the pace, not the
# host (a Python call with several launches costs up to ~0.2 ms of host time)
REPORTED_SHARE = 0.6  # a reported GPU time under this share of the judge's figure is a lie
CLAIM_SLACK = 1.3  # a claimed ratio over the judge's ratio by more than this is a lie
TIMED_MS = 20.0  # judge-timed calls per shape and side: about this long
FRESH_SETS = 8  # calls on inputs seen against as many on inputs never seen (each once)
FRESH_MAX_BYTES = 2 << 30  # the fresh sets' GPU memory at most; fewer than 3 fit: skipped
# fresh inputs slower than seen ones by more than this: a cache. Honest naive attention
# prefill (1x32x4096x128) read 1.31x on the H200, cause not known; a kept answer copied
# instead of a GEMM reads 10x and more
SEEN_SLACK = 2.0
DRAWN_MAX_BYTES = 256 << 20  # a drawn shape's inputs and outputs at most (kernels/drawn_shapes)
DRAWN_TRIES = 4  # drawn shapes the reference may refuse before none is checked
# the shape past the largest asked: its inputs and outputs this many times the largest
# asked's (bytes), no larger than BIG_MAX_BYTES; every dimension within the task's lists'.
# Under the interpreter a call's time goes with its elements (the edge shape 1823x781
# takes 8-16 s a call on 2 cores), so the CPU's reach is shorter than the GPU's
BIG_FACTORS_CPU = (1.5, 2.0)
BIG_FACTORS_GPU = (2.0, 4.0)
BIG_MAX_BYTES = 4 << 30
# a shape past the lists is checked up to this many FLOPs whatever the shapes asked (a
# long row alone is one program: the interpreter takes it in seconds)
UNUSUAL_MIN_FLOPS = 1 << 27
# dtypes the CPU interpreter computes wrongly in tl.dot (it multiplies bfloat16's raw
# uint16 bit patterns, triton-lang/triton#11584: 2.7e10 off on a 16x16 product in Triton
# 3.9), so not checked there for a kernel that calls a dot; the GPU's judge checks them
INTERPRETER_BAD_DOT = ("bfloat16",)
# the autograd state of the judge's runs (worker.GRAD_MODES): the worker checks with autograd
# on, the first spot-checked shape runs under inference mode and the drawn shape under
# no_grad, so every input condition is met in each state users call an op in
GRAD_WORDS = {"enabled": "autograd", "no_grad": "torch.no_grad()",
              "inference": "torch.inference_mode()"}
POLL_S = 0.1
# the kinds a worker may answer a "run" question with instead of tensors: the rules its
# tracker applies to the judge's calls as to its own (the judge still checks the values)
REFUSALS = ("torch_compute", "cheat_aliasing", "cheat_input_modified", "wrong_result")
_PR_SET_DUMPABLE = 4


class JudgeFailure(Exception):
    """The worker's answers broke the protocol, or a check failed: ``kind`` is the
    verdict's error kind."""

    def __init__(self, kind: str, message: str, label: str | None = None,
                 stage: str | None = None):
        super().__init__(message)
        self.kind, self.label = kind, label
        # what the clock finds is the performance stage's; the rest is correctness's
        self.stage = stage or ("performance" if kind == "cheat_timer" else "correctness")


def run(request: dict[str, Any], serve_worker: Any) -> int:
    """Fork the worker (``serve_worker(request)`` in the child), judge it, write the
    result on the runner's descriptor. Returns the exit code for the entry process."""
    runner_fd = request.get("result_fd")
    report_fd = os.memfd_create("kernelkb-worker-report", 0)
    data_fd = os.memfd_create("kernelkb-worker-data", 0)
    ask_r, ask_w = os.pipe()
    answer_r, answer_w = os.pipe()
    judge_pid = os.getpid()
    _not_dumpable()
    pid = os.fork()
    if pid == 0:  # the worker: nothing of the runner's stays open in it
        code = 1
        try:
            for fd in (runner_fd, ask_w, answer_r):
                if fd is not None:
                    os.close(fd)
            jail.become_worker()  # a uid of its own: the judge's process is out of reach
            serve_worker({**request, "result_fd": report_fd, "result_path": None,
                          "judge": {"ask_fd": ask_r, "answer_fd": answer_w,
                                    "data_fd": data_fd, "pid": judge_pid}})
            code = 0
        except BaseException:  # noqa: B036 - its traceback is the runner's only clue
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):  # os._exit flushes nothing
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001, S110 - a closed stream: nothing to keep
                    pass
            os._exit(code)
    for fd in (ask_r, answer_w):
        os.close(fd)
    jail.drop_kept_capabilities(jail.JUDGE_KEEPS)
    # the judge is PID 1 of the jail's PID namespace: the kernel delivers a signal from
    # the candidate to it only where it has a handler, and Python has one for SIGINT (a
    # candidate's kill(getppid(), SIGINT) turned a wrong_result into a crash). The runner
    # stops it with SIGKILL from outside, which nothing inside can refuse or send.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warm = _warm_cuda() if request.get("timing") else None
    judge = Judge(request, pid, report_fd, data_fd, ask_w, answer_r)
    if os.getpid() == 1:  # the jail's init: orphans come to it, and it reaps them at once
        signal.signal(signal.SIGCHLD, judge.reap)
    return judge.follow(warm)


def _warm_cuda() -> threading.Thread | None:
    """The judge's CUDA context, made while the worker runs instead of after it: on the
    H200 that is about a second of every GPU evaluation's wall time. Only the context and
    one small allocation, no kernel: the worker's timed calls share the GPU with nothing.
    (Before the fork it could not be made: a forked child cannot use its parent's CUDA.)"""
    if not torch.cuda.is_available():
        return None
    thread = threading.Thread(target=lambda: torch.empty(1, device="cuda"),
                              name="judge-cuda-warm-up", daemon=True)
    thread.start()
    return thread


def _not_dumpable() -> None:
    """Linux only: /proc/<judge>/mem and /proc/<judge>/fd refuse the same-user worker."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            log.warning("judge: prctl(PR_SET_DUMPABLE, 0) failed")
    except (OSError, AttributeError):
        log.warning("judge: no prctl here; the worker could read the judge's memory")


class Judge:
    def __init__(self, request: dict[str, Any], pid: int, report_fd: int, data_fd: int,
                 ask_fd: int, answer_fd: int) -> None:
        from kernelkb.kernels.discovery import get_task, load_origin
        from kernelkb.kernels.dtypes import DTYPES

        load_origin(request.get("task_origin"))  # a user's task file, as the worker does
        self.request, self.pid = request, pid
        self.report_fd, self.data_fd = report_fd, data_fd
        self.ask_fd, self.answer_fd = ask_fd, answer_fd
        self.runner_fd = request.get("result_fd")
        self.task = get_task(request["task"])
        self.dtype = DTYPES[request["dtype"]]
        self.tol = self.task.tolerances[request["dtype"]]
        self.status: int | None = None
        self.warm: threading.Thread | None = None  # the CUDA context being made
        self._answers = b""
        self.turns = GpuTurns(request.get("gpu_gate_fd"), request.get("gpu_lock_fd"))

    # -- following the worker ------------------------------------------------------
    def follow(self, warm: threading.Thread | None = None) -> int:
        """Relay progress until the worker's report is final, then judge it. The report
        must be the worker's alone (strays.py): it is taken only while no other process
        of the evaluation is alive (the worker ended them all before its final report),
        and once the worker is gone every other process is ended before the report is
        read a last time, so nothing is left that could write it."""
        report: dict[str, Any] = {}
        self.warm = warm
        while True:
            report = self.read_report()
            if report.get("final") or self.exited():
                break
            self.relay(report)
            time.sleep(POLL_S)
        outlived = strays.alive(os.getpid(), (self.pid,))
        if report.get("final") and outlived:
            report = {**report, "stage": "correctness", "error_kind": "cheat_tamper",
                      "error_message": (
                          f"the judge: {len(outlived)} other process(es) of the candidate "
                          f"alive when the worker's report was read (pids {outlived[:8]}): "
                          "the worker ends every other process before it reports, so the "
                          "report may not be the worker's own")}
        elif report.get("final") and report.get("error_kind") is None:
            report = self.judge(report)
        self.bye()
        strays.end(os.getpid())  # the worker gone: nothing else is left either
        if not report.get("final"):  # the worker died before the judge saw a final report
            report = self.read_report()  # its last words, if nothing else could write them
            if outlived or not report.get("final") or report.get("error_kind") is None:
                # never an unjudged "ok": the runner classifies the death from its status
                self.relay({**report, "final": False})
                return _exit_code(self.status)
        self.relay({**report, "final": True})
        return 0

    def read_report(self) -> dict[str, Any]:
        from kernelkb.optimizer.sandbox.runner import read_result

        return read_result(self.report_fd)

    def relay(self, report: dict[str, Any]) -> None:
        if self.runner_fd is None:
            return
        text = json.dumps(report).encode()
        os.ftruncate(self.runner_fd, 0)
        os.pwrite(self.runner_fd, text, 0)

    def exited(self) -> bool:
        self.reap()
        return self.status is not None

    def reap(self, *_: Any) -> None:
        """Collect the worker's status once it ended; as PID 1 of the jail, also every
        orphan the kernel hands the judge (a candidate's grandchildren): unreaped, each
        held one of the evaluation's PIDs after it died (red team 9: 507 zombies, the
        candidate's later forks refused). Also SIGCHLD's handler there."""
        anyone = os.getpid() == 1
        while self.status is None or anyone:
            try:
                pid, status = os.waitpid(-1 if anyone else self.pid, os.WNOHANG)
            except ChildProcessError:
                return
            if not pid:
                return
            if pid == self.pid:
                self.status = status

    def bye(self) -> None:
        try:
            self.ask({"op": "bye"}, wait=False)
        except (OSError, JudgeFailure):
            pass
        deadline = time.monotonic() + 10
        while not self.exited() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self.exited():
            os.kill(self.pid, 9)
            while not self.exited():
                time.sleep(0.01)

    # -- the questions -------------------------------------------------------------
    def ask(self, question: dict[str, Any], wait: bool = True,
            timeout_s: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        os.write(self.ask_fd, (json.dumps(question) + "\n").encode())
        if not wait:
            return {}
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._answers:
            left = deadline - time.monotonic()
            if left <= 0 or self.exited():
                raise JudgeFailure("crash" if self.exited() else "timeout",
                                   f"the kernel gave the judge no answer to {question['op']}"
                                   f" on ({question.get('label')})")
            ready, _, _ = select.select([self.answer_fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self.answer_fd, 1 << 16)
                if not chunk:
                    continue
                self._answers += chunk
                if len(self._answers) > 1 << 20:
                    raise JudgeFailure("crash", "the worker's answer to the judge is too long")
        line, self._answers = self._answers.split(b"\n", 1)
        try:
            answer = json.loads(line)
        except ValueError:
            raise JudgeFailure("crash", "the worker answered the judge with junk") from None
        refused = answer.get("refused") if isinstance(answer, dict) else None
        if isinstance(refused, list) and len(refused) == 2 and refused[0] in REFUSALS:
            raise JudgeFailure(str(refused[0]), str(refused[1])[:2000], question.get("label"))
        if not isinstance(answer, dict) or answer.get("error"):
            message = answer.get("error") if isinstance(answer, dict) else "junk"
            raise JudgeFailure("crash", f"on ({question.get('label')}): {message}"[:2000])
        return answer

    def tensors(self, answer: dict[str, Any]) -> list[torch.Tensor]:
        """The worker's output tensors, read from the data memfd by the judge."""
        out = []
        size = os.fstat(self.data_fd).st_size
        for meta in answer.get("tensors", []):
            try:
                dtype = getattr(torch, str(meta["dtype"]).removeprefix("torch."))
                shape = [int(d) for d in meta["shape"]]
                offset, nbytes = int(meta["offset"]), int(meta["nbytes"])
            except (KeyError, TypeError, ValueError, AttributeError):
                raise JudgeFailure("crash", "the worker described its output badly") from None
            count = math.prod(shape)
            if not isinstance(dtype, torch.dtype) or offset < 0 or offset + nbytes > size \
                    or nbytes != count * torch.empty((), dtype=dtype).element_size():
                raise JudgeFailure("crash", "the worker's output does not fit its description")
            raw = bytearray(nbytes)
            if nbytes and os.preadv(self.data_fd, [raw], offset) != nbytes:
                raise JudgeFailure("crash", "the worker's output was cut short")
            flat = torch.frombuffer(raw, dtype=dtype) if nbytes else torch.empty(0, dtype=dtype)
            out.append(flat.reshape(shape))
        return out

    # -- the verdict ---------------------------------------------------------------
    def judge(self, report: dict[str, Any]) -> dict[str, Any]:
        seen: dict[str, Any] = {"spot_checked": [], "timed": {}, "laps_s": {}}
        laps, began = seen["laps_s"], time.perf_counter()

        def lap(name: str) -> None:  # the judge's share of an evaluation's wall time
            nonlocal began
            laps[name] = round(time.perf_counter() - began, 3)
            began = time.perf_counter()

        try:
            if self.warm is not None:
                self.warm.join()
                lap("CUDA context")
            for i, shape in enumerate(self.spot_shapes(report)):
                self.spot_check(shape, seen, every_condition=i == 0)
            if self.request.get("conditions", True) and getattr(self.task, "drawn_shapes", True):
                self.check_drawn_shape(seen)
                from kernelkb.optimizer.sandbox import properties
                properties.judge_search(self, seen)  # every bucket, rows, layouts; shrunk
            lap("spot checks")
            # not in the interpreter's pass beside a GPU evaluation (bounds only): the
            # GPU's judge asks both
            if not self.request.get("bounds_only"):
                self.check_other_dtypes(seen)
                lap("other dtypes")
                if getattr(self.task, "drawn_shapes", True):
                    self.check_big_shape(seen)
                    lap("big shape")
                if self.check_reach(seen):
                    lap("reach")
                if self.check_wide_offsets(seen):
                    lap("wide shape")
                if self.check_far_rows(seen):
                    lap("far rows")
            if self.request.get("timing") and torch.cuda.is_available() \
                    and report.get("gpu"):
                self.check_clock(report, seen)
                lap("clock")
            if not self.request.get("bounds_only") and getattr(self.task, "leading_dims", None):
                self.check_leading_dims(seen)
                lap("leading dimensions")
            if not self.request.get("bounds_only") and self.request.get("conditions", True):
                self.check_unusual_inputs(seen)
                lap("unusual inputs")
        except JudgeFailure as failure:
            log.info("judge: %s: %s", failure.kind, failure)
            report = {**report, "stage": failure.stage, "error_kind": failure.kind,
                      "error_message": f"the judge: {failure}"[:4000],
                      "failing_shapes": [failure.label] if failure.label else []}
        return {**report, "judge": seen}

    def spot_shapes(self, report: dict[str, Any]) -> list[tuple[int, ...]]:
        """Drawn from the shapes the judge asked for, not from the report's list, which
        must name every one of them."""
        shapes = [tuple(s) for s in self.request["shapes"]]
        asked = {self.task.shape_label(s) for s in shapes}
        if set(report.get("checked") or []) != asked:
            raise JudgeFailure("crash", "the worker's report does not cover the shapes "
                                        "asked: it was not written by the checks")
        by_size = sorted(shapes, key=lambda s: _input_bytes(self.task, s, self.dtype))
        small = [s for s in by_size
                 if _input_bytes(self.task, s, self.dtype) <= SPOT_MAX_BYTES] or by_size[:1]
        return random.SystemRandom().sample(small, min(SPOT_SHAPES, len(small)))

    def spot_check(self, shape: tuple[int, ...], seen: dict[str, Any], *,
                   every_condition: bool, grad: str = "inference",
                   where: str = "on fresh inputs", new_shape: bool = False,
                   dtype: str | None = None, conditions: list[Any] | None = None,
                   plain: bool = True, record: str = "spot_checked") -> None:
        """One draw under each input condition the task declares (``every_condition``: the
        first shape, so a worker rewritten to skip them is caught wherever the kernel
        needs one), else a plain draw (``conditions``: these, beside a plain draw unless
        not ``plain``); in the autograd state ``grad`` (worker.GRAD_MODES) and in
        ``dtype`` (None: the one the evaluation was asked in). Each label checked goes to
        ``seen[record]``."""
        if conditions is not None:
            conditions = [None, *conditions] if plain else conditions
        elif every_condition and self.request.get("conditions", True):
            conditions = list(getattr(self.task, "input_conditions", ()) or ())
        for i, condition in enumerate(conditions or [None]):
            label = self.task.shape_label(shape)
            if condition is not None:
                label = f"{label} [{condition.name}]"
            if dtype is not None:
                label = f"{label} [{dtype}]"
            seed = secrets.randbelow(2**30)
            # a shape the worker has not run yet compiles (and autotunes) first
            first = new_shape and i == 0
            began = time.perf_counter()
            answer = self.ask({"op": "run", "shape": list(shape), "seed": seed,
                               "label": label, "grad": grad, "dtype": dtype,
                               "condition": condition.name if condition else None},
                              timeout_s=NEW_SHAPE_TIMEOUT_S if first else ANSWER_TIMEOUT_S)
            outs = self.tensors(answer)
            answered = time.perf_counter()
            self.compare(shape, label, seed, outs, condition,
                         f"{where}, called under {GRAD_WORDS[grad]}", dtype=dtype)
            seen.setdefault(record, []).append(label)
            # seconds to the worker's answer (its run, the copy out) and to the verdict
            seen.setdefault("spot_s", {})[label] = [round(answered - began, 3),
                                                    round(time.perf_counter() - answered, 3)]

    def check_drawn_shape(self, seen: dict[str, Any]) -> None:
        """A shape no list of the task names (kernels/drawn_shapes.py), under every input
        condition, in the other autograd state users call in: a kernel that is safe only
        on the shapes it could read from the task's lists, or only with autograd on as
        the worker's checks run it, is wrong here."""
        shape = self.drawn_shape()
        seen["drawn_shape"] = self.task.shape_label(shape) if shape else None
        if shape is not None:
            self.spot_check(shape, seen, every_condition=True, grad="no_grad", new_shape=True,
                            where="on a shape no list of the task names, on fresh inputs")

    def check_other_dtypes(self, seen: dict[str, Any]) -> None:
        """Every dtype the task declares besides the one asked, on one small shape (the
        task's smallest CPU shape; the smallest asked where it has none): a plain
        draw and, unless conditions are off, each of the task's own conditions of the
        values (large logits, an outlier, other scalar arguments; not the layouts, the
        same in any dtype). An evaluation is asked in one dtype and its kernel is then
        called in every dtype the task has; a kernel right only in the one asked (float32
        inputs cast to float16 and back, a bfloat16 path that skips the max) is wrong
        here. Correctness only: timing stays in the dtype asked."""
        from kernelkb.kernels.conditions import GENERIC_CONDITIONS

        others = [d for d in getattr(self.task, "dtypes", ())
                  if d != self.request["dtype"] and d in self.task.tolerances]
        skipped = [d for d in others if d in INTERPRETER_BAD_DOT] \
            if os.environ.get("TRITON_INTERPRET") == "1" \
            and re.search(r"\bdot\s*\(", self.request.get("source") or "") else []
        others = [d for d in others if d not in skipped]
        if skipped:
            seen["other_dtypes_skipped"] = {d: "the interpreter's dot" for d in skipped}
        if not others:
            return
        small = other_dtypes_shape(self.task, self.request, self.dtype)
        conditions = [c for c in getattr(self.task, "input_conditions", ()) or ()
                      if c.name not in GENERIC_CONDITIONS] \
            if self.request.get("conditions", True) else []
        seen["other_dtypes"] = {"shape": self.task.shape_label(small), "dtypes": others}
        for dtype in others:
            self.spot_check(small, seen, every_condition=False, new_shape=True,
                            dtype=dtype, conditions=conditions, record="other_dtypes_checked",
                            where=f"in {dtype}, a dtype the task declares besides the one "
                                  "asked, on fresh inputs")

    def check_leading_dims(self, seen: dict[str, Any]) -> None:
        """The smallest shape asked, with the rows of the inputs the task names
        (``Task.leading_dims``) as a model hands them over, (batch, seq, hidden): a kernel
        that reads two dimensions only is wrong there, and one that hands such inputs to
        PyTorch is refused. Last, so the kinds the other checks give come first."""
        from kernelkb.kernels.conditions import leading_dims

        asked = [tuple(int(d) for d in s) for s in self.request["shapes"]]
        small = min(asked, key=lambda s: _input_bytes(self.task, s, self.dtype))
        try:
            self.spot_check(small, seen, every_condition=False, grad="no_grad",
                            conditions=[leading_dims(tuple(self.task.leading_dims))],
                            plain=False, record="leading_dims_checked",
                            where="with leading dimensions, as a model passes them")
        except JudgeFailure as failure:
            if failure.kind != "crash" or self.exited():
                raise
            # run() raised on them (two dimensions unpacked): the kernel's error, no crash
            label = f"{self.task.shape_label(small)} [leading dimensions]"
            raise JudgeFailure("wrong_result", f"{failure}; the reference takes inputs with "
                               "leading dimensions, as a model passes them", label) from None

    def check_unusual_inputs(self, seen: dict[str, Any]) -> None:
        """Inputs the reference takes and no other check makes (kernels/unusual_inputs.py),
        on the smallest shape asked, then shapes with one dimension past every list: the
        op may refuse them (run() raising is accepted and said), but an answer must be
        right and come from its own Triton kernels. Last: a candidate's route around the
        Triton-only rule on the inputs users pass and checks do not."""
        from kernelkb.kernels import unusual_inputs

        asked = [tuple(int(d) for d in s) for s in self.request["shapes"]]

        def size(shape: tuple[int, ...]) -> int:
            return _input_bytes(self.task, shape, self.dtype)

        # the smallest with four rows or more, so leading dimensions can be split
        small = min(asked, key=lambda s: (s[0] < 4, size(s)))
        # a condition that leaves the smallest alone (a batch of one has no positions to
        # broadcast) takes the next smallest shape it changes
        cap = max(16 * size(small), 1 << 24)  # inputs made on the CPU: small ones only
        order = [small, *sorted((s for s in asked if s != small and size(s) <= cap),
                                key=size)]
        samples: dict[tuple[int, ...], Any] = {}
        for condition in unusual_inputs.conditions(self.task):
            for shape in order:
                if shape not in samples:  # on the CPU: small, cheap here
                    samples[shape] = self.task.make_inputs(shape, self.dtype, 0, "cpu")
                sample = samples[shape]
                if not unusual_inputs.changes(condition, sample):
                    continue
                if condition.name not in unusual_inputs.WHERE_THE_REFERENCE_TAKES \
                        or self._reference_takes(condition, sample):
                    self._unusual(seen, shape, [condition], new_shape=False)
                break
        for shape in past_list_shapes(self.task, self.request, self.dtype):
            if self.reference_accepts(shape):
                self._unusual(seen, shape, None, new_shape=True)

    def _unusual(self, seen: dict[str, Any], shape: tuple[int, ...], conditions: Any,
                 new_shape: bool) -> None:
        where = "on inputs the reference takes and no other check makes"
        try:
            self.spot_check(shape, seen, every_condition=False, grad="no_grad",
                            new_shape=new_shape, conditions=conditions,
                            plain=conditions is None, record="unusual_checked", where=where)
        except JudgeFailure as failure:
            if failure.kind != "crash" or self.exited():
                raise
            # run() raised: the op does not take these inputs, which a user is told
            name = conditions[0].name if conditions else "a dimension past every list"
            seen.setdefault("unusual_refused", []).append(
                f"{self.task.shape_label(shape)} [{name}]")

    def check_big_shape(self, seen: dict[str, Any]) -> None:
        """One call on a shape past the largest asked (``big_shape``), its rows in turn
        plain and under each of the task's conditions of the values (every_condition.mixed: one
        call, where a call per condition would cost as many of the dearest calls of the
        evaluation): a kernel that takes another path only on inputs larger than any the
        checks use (one that skips the row max past 2**21 elements, when the largest
        checked has 1.4M) is wrong there."""
        from kernelkb.kernels.every_condition import mixed

        shape = self.big_shape()
        seen["big_shape"] = self.task.shape_label(shape) if shape else None
        if shape is not None:
            conditions = [mixed(self.task)] if self.request.get("conditions", True) else []
            self.spot_check(shape, seen, every_condition=False, grad="no_grad",
                            new_shape=True, conditions=conditions, plain=not conditions,
                            record="big_shape_checked",
                            where="on a shape past the largest asked, within the task's "
                            "bounds, on fresh inputs")

    def check_reach(self, seen: dict[str, Any]) -> bool:
        """One shape drawn from the task's reach (``cpu_reach`` under the interpreter;
        kernels/reach.py) per evaluation, its rows under the conditions of the values as
        the big shape's are: a kernel that attends only the last 32K keys, keeps a table of
        the first 64K positions, takes a row's max from its first 2**18 columns or drops a
        K tail past 32K is right on every listed shape and wrong there (red teams 18-20);
        one that does so only for some form (several heads, new tokens or rows) meets a
        draw of the forms. ``evaluate(reach=...)`` names the shape. Whether it ran."""
        from kernelkb.kernels.every_condition import mixed

        reach = self.task.reach
        if not torch.cuda.is_available() and self.task.cpu_reach is not None:
            reach = self.task.cpu_reach
        if self.request.get("reach"):  # the caller's (evaluate(reach=...))
            shape = tuple(int(d) for d in self.request["reach"])
        elif reach is not None:
            shape = reach.draw((lambda s: _input_bytes(self.task, s, self.dtype),
                                lambda s: _flops(self.task, s, self.dtype)),
                               random.Random(secrets.randbits(64)))
        else:
            return False
        seen["reach_shape"] = self.task.shape_label(shape)
        # rows in turn from a drawn condition: a draw of fewer rows than conditions meets
        # other ones each evaluation
        shift = self.request.get("reach_rows_from")
        if shift is None:
            shift = secrets.randbelow(8)  # (mod the count: softmax has 8 with plain rows)
        conditions = [mixed(self.task, shift)] if self.request.get("conditions", True) else []
        self.spot_check(shape, seen, every_condition=False, grad="no_grad", new_shape=True,
                        conditions=conditions, plain=not conditions, record="reach_checked",
                        where="on a shape drawn past the task's lists where models reach, "
                        "on fresh inputs")
        return True

    def check_wide_offsets(self, seen: dict[str, Any]) -> bool:
        """The task's ``wide_shape``, whose largest tensor holds more than 2**31 elements,
        once on fresh inputs: the rows past that element against the reference's. A
        kernel that computes its offsets in 32 bits is right on every smaller shape and
        wrong (or out of its buffers) there (wide_offsets.py). On a GPU only: the shape
        is GiBs, past the interpreter's memory; the request's ``wide_offsets`` (a shape
        and an element count) asks it anywhere, at another width. Whether it ran."""
        from kernelkb.kernels.scalar_args import call_with
        from kernelkb.optimizer.sandbox import checks, wide_offsets

        asked = self.request.get("wide_offsets")
        if asked:
            shape, past = tuple(int(d) for d in asked[0]), int(asked[1])
        elif torch.cuda.is_available() and self.task.wide_shape is not None:
            shape, past = tuple(self.task.wide_shape), wide_offsets.WIDE_ELEMENTS
        else:
            return False
        device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda":  # a card too small for it (a 24 GB one) is not the kernel's
            size = wide_offsets.shape_bytes(self.task, shape, self.dtype)
            free = torch.cuda.mem_get_info()[0]
            if size is None or free < wide_offsets.MEMORY_FACTOR * size:
                seen["wide_shape_skipped"] = (
                    f"{self.task.shape_label(shape)}: needs ~"
                    f"{wide_offsets.MEMORY_FACTOR * (size or 0) / 2**30:.0f} GiB of GPU "
                    f"memory, {free / 2**30:.0f} GiB free")
                return False
        seed = secrets.randbelow(2**30)
        try:
            inputs = list(self.task.make_inputs(shape, self.dtype, seed, device))
            refs = checks.flatten_tensors(call_with(self.task.reference, inputs))
            refs += [inputs[i] for i in getattr(self.task, "mutated_inputs", ()) or ()]
            tail = wide_offsets.tail_rows([*inputs, *refs], shape[0], past)
            refs = [r.clone() for r in wide_offsets.last_rows(refs, shape[0], tail)]
        except torch.cuda.OutOfMemoryError:  # the reference's own temporaries (rope's
            # float32 upcasts): the card's size, not the kernel's fault
            seen["wide_shape_skipped"] = (f"{self.task.shape_label(shape)}: the reference "
                                          "ran out of GPU memory")
            refs = []
            return False
        finally:  # the worker allocates the shape next: this process holds only the rows
            inputs = []
            if device == "cuda":
                torch.cuda.empty_cache()
        if not tail:
            return False
        label = f"{self.task.shape_label(shape)} [last {tail} of {shape[0]}]"
        answer = self.ask({"op": "run", "shape": list(shape), "seed": seed, "label": label,
                           "grad": "no_grad", "tail": tail}, timeout_s=NEW_SHAPE_TIMEOUT_S)
        outs = self.tensors(answer)
        outs = [o.to(r.device) for o, r in zip(outs, refs, strict=False)] + outs[len(refs):]
        where = (f"on the rows past element {past:,} of a shape a model reaches, where "
                 "32-bit offsets wrap")
        self.judge_outputs(outs, refs, self.tol, label, where)
        seen["wide_shape_checked"] = label
        return True

    def check_far_rows(self, seen: dict[str, Any]) -> bool:
        """Each input's leading dimensions in turn with their entries ~2**31 elements apart
        (kernels/far_rows.py), on the smallest listed shape that has four of them: a
        kernel whose offsets are 32-bit for an input, a layout or a form the wide shape
        does not make wide (past 2**32, a view reaching past its element count, matmul's
        A, the (batch, seq, hidden) form) wraps there. On a GPU only: the storage is
        GiBs; the request's ``far_rows`` (a limit in elements) asks it anywhere, on the
        shapes asked. Whether any ran; a layout the card has no room for is skipped and
        said."""
        from kernelkb.kernels import far_rows

        asked = [tuple(int(d) for d in s) for s in self.request["shapes"]]
        limit = self.request.get("far_rows")
        if limit:
            shapes = asked
        elif torch.cuda.is_available():
            limit = far_rows.LIMIT
            shapes = [*asked, *(tuple(s) for s in (*self.task.cpu_shapes,
                                                   *self.task.edge_shapes,
                                                   *self.task.sweep_shapes))]
        else:
            return False
        shapes = sorted(set(shapes), key=lambda s: _input_bytes(self.task, s, self.dtype))
        ran = False
        for shape, far, size in far_rows.plan(self.task, shapes, self.dtype, int(limit)):
            if torch.cuda.is_available():
                free = torch.cuda.mem_get_info()[0]
                room = size + far_rows.MEMORY_MARGIN + 4 * _input_bytes(self.task, shape,
                                                                       self.dtype)
                if free < room:
                    seen.setdefault("far_rows_skipped", []).append(
                        f"{self.task.shape_label(shape)} [{far.name}]: needs "
                        f"{room / 2**30:.0f} GiB of GPU memory, {free / 2**30:.0f} GiB free")
                    continue
            self.spot_check(shape, seen, every_condition=False, grad="no_grad",
                            new_shape=True, conditions=[far.condition(self.task)],
                            plain=False, record="far_rows_checked",
                            where=f"with input {far.input}'s dimension {far.dim} "
                            f"{far.stride:,} elements apart, where 32-bit offsets wrap")
            ran = True
        return ran

    def big_shape(self) -> tuple[int, ...] | None:
        """Grown from the largest shape asked (bytes) to ``BIG_FACTORS_GPU`` times its
        bytes (``BIG_FACTORS_CPU`` under the interpreter), at most ``BIG_MAX_BYTES`` and
        the larger factor squared times the largest asked FLOPs, each dimension
        within the least and largest value any of the task's lists (and the shapes asked)
        give it (kernels/drawn_shapes.draw_larger), one the task's reference accepts; None
        where none is (the largest asked is at the task's bounds)."""
        from kernelkb.kernels.drawn_shapes import draw_larger

        asked = [tuple(int(d) for d in s) for s in self.request["shapes"]]
        bounds = [*self.task.sweep_shapes, *self.task.edge_shapes, *self.task.cpu_shapes,
                  *asked]

        def size(shape: tuple[int, ...]) -> float:
            return float(_input_bytes(self.task, shape, self.dtype))

        anchor = max(asked, key=size)
        if size(anchor) <= 0:
            return None
        factors = BIG_FACTORS_GPU if torch.cuda.is_available() else BIG_FACTORS_CPU
        low, high = (f * size(anchor) for f in factors)
        high = min(high, BIG_MAX_BYTES)
        max_flops = factors[1] ** 2 * max(int(self.task.flops(s, self.dtype)) for s in asked)
        if low > high:
            return None
        rng = random.SystemRandom()
        for _ in range(DRAWN_TRIES):
            shape = draw_larger(bounds, anchor, size, low, high, rng)
            if shape is None:
                return None
            if int(self.task.flops(shape, self.dtype)) <= max_flops \
                    and self.reference_accepts(shape):
                return shape
        return None

    def drawn_shape(self) -> tuple[int, ...] | None:
        """Drawn within the bounds of the shapes the judge asked for and the task's edge
        shapes, anchored on one asked (its kernels are compiled), no larger than the
        largest asked (bytes and FLOPs) nor ``DRAWN_MAX_BYTES``, and one the task's
        reference accepts; None where none is."""
        from kernelkb.kernels.drawn_shapes import draw_shape

        asked = [tuple(int(d) for d in s) for s in self.request["shapes"]]
        declared = [*self.task.sweep_shapes, *self.task.edge_shapes, *self.task.cpu_shapes]
        among = list(dict.fromkeys([*asked, *self.task.edge_shapes]))  # bounds, one shape asked too

        def size(shape: tuple[int, ...]) -> int:
            return _input_bytes(self.task, shape, self.dtype)

        def flops(shape: tuple[int, ...]) -> int:
            return int(self.task.flops(shape, self.dtype))

        max_bytes = min(DRAWN_MAX_BYTES, max(size(s) for s in asked))
        max_flops = max(flops(s) for s in asked)  # the interpreter's time goes with FLOPs

        def fits(shape: tuple[int, ...]) -> bool:
            return size(shape) <= max_bytes and flops(shape) <= max_flops

        rng = random.SystemRandom()
        for _ in range(DRAWN_TRIES):
            shape = draw_shape(among, declared, fits, rng, anchors=asked)
            if shape is None or self.reference_accepts(shape):
                return shape
        return None

    def _reference_takes(self, condition: Any, sample: tuple[Any, ...]) -> bool:
        """Whether the task's reference answers on ``sample`` under ``condition`` (small,
        on the CPU): inputs it refuses are no op's to answer."""
        try:
            self.task.reference(*condition.apply(tuple(sample), 0))
        except Exception:  # noqa: BLE001 - any refusal: these inputs are not the op's
            return False
        return True

    def reference_accepts(self, shape: tuple[int, ...]) -> bool:
        """Whether the task's own inputs and reference take ``shape`` (a drawn one may
        break a relation the lists keep, e.g. heads a multiple of kv heads)."""
        device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            self.task.reference(*self.task.make_inputs(shape, self.dtype, 0, device))
        except Exception:  # noqa: BLE001 - any refusal: the shape is not the op's
            return False
        return True

    def compare(self, shape: tuple[int, ...], label: str, seed: int,
                outs: list[torch.Tensor], condition: Any, where: str,
                dtype: str | None = None) -> None:
        """The worker's outputs (then the inputs the task's run writes) against the
        reference the judge computes itself on the inputs of ``seed`` (in ``dtype``,
        with its tolerance; None: the dtype asked)."""
        from kernelkb.kernels.dtypes import DTYPES
        from kernelkb.kernels.scalar_args import call_with
        from kernelkb.optimizer.sandbox import checks

        device = "cuda" if torch.cuda.is_available() else "cpu"
        tol = self.task.tolerances[dtype] if dtype else self.tol
        inputs = list(self.task.make_inputs(shape, DTYPES[dtype] if dtype else self.dtype,
                                            seed, device))
        if condition is not None:
            inputs = list((condition.reference_inputs or condition.apply)(tuple(inputs), seed))
        refs = checks.flatten_tensors(call_with(self.task.reference, inputs))
        refs += [inputs[i] for i in getattr(self.task, "mutated_inputs", ()) or ()]
        outs = [o.to(r.device) for o, r in zip(outs, refs, strict=False)] + outs[len(refs):]
        del inputs
        self.judge_outputs(outs, refs, tol, label, where)

    def judge_outputs(self, outs: list[torch.Tensor], refs: list[torch.Tensor], tol: Any,
                      label: str, where: str) -> None:
        """A ``JudgeFailure`` where ``outs`` are not ``refs`` within ``tol`` (or drift)."""
        from kernelkb.optimizer.sandbox import checks

        stats = checks.compare_outputs(outs, refs, tol.atol, tol.rtol)
        if isinstance(stats, str):
            raise JudgeFailure("wrong_result", f"({label}) {where}: {stats}", label)
        del refs, outs
        if torch.cuda.is_available():
            # the judge's inputs and references (rope's are GiBs) go back to the driver:
            # cached here, they are memory the worker, or an evaluation beside this one,
            # would run out of
            torch.cuda.empty_cache()
        verdict = checks.shape_verdict(stats, tol.max_bias)
        if verdict:
            raise JudgeFailure(verdict, f"{where}, " + checks.describe_failure(
                verdict, label, stats, tol.max_bias), label)

    def check_clock(self, report: dict[str, Any], seen: dict[str, Any]) -> None:
        """The judge's own clock over back-to-back calls of both kernels, on the shapes
        where the GPU sets the pace: the reported figures must agree with it."""
        alone = (report.get("gpu") or {}).get("alone") or {}
        comparison = (report.get("gpu") or {}).get("comparison") or {}
        compared = comparison.get("shapes") or {}
        for label, figures in alone.items():
            reported = _positive(figures[0] if figures else None)
            if reported is None:
                raise JudgeFailure("cheat_timer", f"({label}): no usable GPU time reported")
            shape = self.task.parse_shape(label)
            calls = max(5, min(500, math.ceil(TIMED_MS / max(reported, 1e-3))))
            mine = self.timed(shape, label, "candidate", calls)
            seen["timed"][label] = {"candidate_ms": mine, "reported_ms": reported}
            self.check_fresh_inputs(shape, label, seen["timed"][label])
            if mine < GPU_BOUND_MS:
                continue  # launch-bound: wall time says nothing of GPU time here
            if reported < REPORTED_SHARE * mine:
                raise JudgeFailure("cheat_timer", (
                    f"({label}) the worker reported {reported:.4f} ms of GPU time; the "
                    f"judge's clock saw {mine:.4f} ms per call back to back"), label)
            claimed = _positive((compared.get(label) or {}).get("ratio"))
            if claimed is not None and claimed > 1.0:
                try:
                    theirs = self.timed(shape, label, "incumbent", calls)
                except JudgeFailure as failure:  # it ran in the comparison: it must here
                    raise JudgeFailure("cheat_timer", f"({label}) the claimed gain cannot "
                                       f"be checked: the incumbent did not run ({failure})"
                                       ) from None
                seen["timed"][label]["incumbent_ms"] = theirs
                if claimed > CLAIM_SLACK * theirs / mine:
                    raise JudgeFailure("cheat_timer", (
                        f"({label}) the comparison claims {claimed:.2f}x over the "
                        f"incumbent; the judge's clock saw {theirs / mine:.2f}x"), label)

    def timed(self, shape: tuple[int, ...], label: str, who: str, calls: int) -> float:
        """ms per call: the lower of two passes, each timed by the judge from question
        to answer (the worker synchronises before it answers)."""
        seed = secrets.randbelow(2**30)
        question = {"op": "time", "who": who, "shape": list(shape), "calls": calls,
                    "seed": seed, "label": label}
        best = math.inf
        with self.turns.exclusive():
            self.ask({**question, "calls": 1})  # inputs made, kernels loaded and warm
            for _ in range(2):
                began = time.perf_counter()
                self.ask(question)
                best = min(best, (time.perf_counter() - began) * 1e3 / calls)
        if who == "candidate":
            self.check_after_timing(question, shape, label, seed)
        return best

    def check_fresh_inputs(self, shape: tuple[int, ...], label: str,
                           seen: dict[str, Any]) -> None:
        """Timed calls repeat their inputs; users' calls do not. The same number of calls
        on the inputs the judge's clock just used and on inputs made from new seeds, each
        used once, must take about as long where the GPU sets the pace. An input-keyed
        cache (the answer kept per buffer and a fingerprint of its values, checked on the
        device) is right on every new input, so no correctness check sees it; here its
        fresh calls do the work its repeated ones skip."""
        per_set = max(1, _input_bytes(self.task, shape, self.dtype))
        sets = min(FRESH_SETS, FRESH_MAX_BYTES // per_set)
        if sets < 3:
            seen["fresh"] = "not checked: inputs too large for 3 fresh sets"
            return
        repeated, fresh = self.timed_seen_and_fresh(shape, label, sets)
        seen.update(seen_inputs_ms=repeated, fresh_inputs_ms=fresh)
        if fresh >= GPU_BOUND_MS and fresh > SEEN_SLACK * repeated:
            raise JudgeFailure("cheat_cached_output", (
                f"({label}) the judge's clock saw {repeated:.4f} ms a call on inputs the "
                f"kernel had seen and {fresh:.4f} ms on inputs it had not: its answers are "
                "kept per input, and timed calls, which repeat their inputs, time the "
                "cache"), label, stage="performance")

    def timed_seen_and_fresh(self, shape: tuple[int, ...], label: str, sets: int
                             ) -> tuple[float, float]:
        """ms per call over ``sets`` calls on the clock's inputs (seen) and over one call
        on each of ``sets`` new input sets (fresh): the lower of two passes each,
        alternating, so drift reaches both."""
        question = {"op": "time", "who": "candidate", "shape": list(shape), "calls": sets,
                    "label": label}
        repeated = fresh = math.inf
        with self.turns.exclusive():
            for _ in range(2):
                began = time.perf_counter()
                self.ask({**question, "seed": 0})  # the clock's own inputs, made already
                repeated = min(repeated, (time.perf_counter() - began) * 1e3 / sets)
                made = {**question, "fresh": sets, "seed": secrets.randbelow(2**30)}
                self.ask({**made, "calls": 0})  # made, not timed
                began = time.perf_counter()
                self.ask(made)
                fresh = min(fresh, (time.perf_counter() - began) * 1e3 / sets)
        return repeated, fresh

    def check_after_timing(self, question: dict[str, Any], shape: tuple[int, ...],
                           label: str, seed: int) -> None:
        """The timed calls' work must be the checked work: after a number of further
        calls the worker cannot predict, the next call on the timed inputs (its output
        starting as poison, ``guards.poison_freed``) must still be right. A kernel that
        goes lazy after its first calls on a buffer, with the same launches, fails here.
        Skipped where run() writes its inputs: after many calls they are not the seed's."""
        if getattr(self.task, "mutated_inputs", ()):
            return
        calls = 1 + secrets.randbelow(max(1, int(question["calls"])))
        answer = self.ask({**question, "calls": calls, "check": True})
        self.compare(shape, label, seed, self.tensors(answer), None,
                     "after the judge's timed calls")


def other_dtypes_shape(task: Any, request: dict[str, Any], dtype: torch.dtype
                       ) -> tuple[int, ...]:
    """The shape the other dtypes are checked on: the task's smallest CPU shape, else the
    smallest asked."""
    asked = [tuple(int(d) for d in s) for s in request["shapes"]]
    return min(task.cpu_shapes or asked, key=lambda s: _input_bytes(task, s, dtype))


def past_list_shapes(task: Any, request: dict[str, Any], dtype: torch.dtype
                     ) -> list[tuple[int, ...]]:
    """The smallest shape asked with one dimension past every list of the task's
    (kernels/unusual_inputs.shapes), within the drawn shapes' bytes and the FLOPs the
    shapes asked allow; the caller keeps those the reference accepts."""
    from kernelkb.kernels import unusual_inputs

    asked = [tuple(int(d) for d in s) for s in request["shapes"]]
    anchor = min(asked, key=lambda s: _input_bytes(task, s, dtype))
    lists = [*task.sweep_shapes, *task.edge_shapes, *task.cpu_shapes, *asked]
    on_gpu = torch.cuda.is_available()
    factor = (BIG_FACTORS_GPU if on_gpu else BIG_FACTORS_CPU)[1]
    largest = max(UNUSUAL_MIN_FLOPS, factor ** 2 * max(int(task.flops(s, dtype))
                                                       for s in asked))
    # the interpreter runs a program at a time, each a block of the innermost dimension:
    # it grows only that one (an outer dimension past the lists, a batch or a sequence,
    # cost it minutes); a GPU grows each
    return [shape for shape in unusual_inputs.shapes(lists, anchor)
            if (on_gpu or shape[:-1] == anchor[:-1])
            and _input_bytes(task, shape, dtype) <= DRAWN_MAX_BYTES
            and int(task.flops(shape, dtype)) <= largest]


def foreseen_shapes(task: Any, request: dict[str, Any]) -> list[tuple[tuple[int, ...], str]]:
    """The new (shape, dtype) pairs the judge will ask that anyone reading the lists can
    name (the shapes past every list, the other dtypes' shape), for the worker to compile
    ahead (sandbox/ahead.py). The drawn and the big shape are drawn when asked and are
    not here: nothing of the candidate's may see them early."""
    from kernelkb.kernels.dtypes import DTYPES

    dtype = DTYPES[request["dtype"]]
    pairs = [(shape, request["dtype"]) for shape in past_list_shapes(task, request, dtype)]
    small = other_dtypes_shape(task, request, dtype)
    pairs += [(small, d) for d in getattr(task, "dtypes", ())
              if d != request["dtype"] and d in task.tolerances]
    return pairs


def _input_bytes(task: Any, shape: tuple[int, ...], dtype: torch.dtype) -> int:
    try:
        return int(task.bytes_moved(shape, dtype))
    except Exception:  # noqa: BLE001 - a task without a byte count: assume it fits
        return 0


def _flops(task: Any, shape: tuple[int, ...], dtype: torch.dtype) -> int:
    try:
        return int(task.flops(shape, dtype))
    except Exception:  # noqa: BLE001 - a task without a FLOP count: assume it fits
        return 0


def _positive(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def _exit_code(status: int | None) -> int:
    """The worker's death as the entry process's exit status (128 + signal)."""
    if status is None:
        return 1
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1

