"""The parent side of the sandbox: one subprocess per candidate, bounded in time and memory.

The request goes to the worker as a JSON file and the result comes back as a JSON file
(never parsed from stdout). The worker runs in its own process group so a timeout kills
everything it started. A hang, crash, segfault or illegal memory access ends only that
subprocess; the runner turns what is left (exit signal, stderr, last progress record)
into a classified failure.

Memory: on the CPU the worker's address space is capped with RLIMIT_AS. On a GPU that is
impossible (CUDA reserves huge virtual ranges), so the limit becomes
``torch.cuda.set_per_process_memory_fraction`` inside the worker instead.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from optimizer.sandbox.errors import classify_exit

log = logging.getLogger(__name__)

TAIL_CHARS = 4000
# torch + triton map ~3 GiB of virtual address space before any tensor exists.
DEFAULT_CPU_MEM_LIMIT_MB = 8192
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class WorkerOutcome:
    data: dict[str, Any]  # the worker's result (or a classified failure in its place)
    stdout_tail: str
    stderr_tail: str
    returncode: int | None
    wall_s: float


def _limit_address_space(limit_mb: int) -> Any:
    def apply() -> None:
        import resource

        limit = limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def run_worker(request: dict[str, Any], *, timeout_s: float, use_gpu: bool,
               mem_limit_mb: int | None) -> WorkerOutcome:
    """Run one request in a fresh ``python -m optimizer.sandbox.worker`` process."""
    with tempfile.TemporaryDirectory(prefix="kernelkb_sandbox_") as tmp:
        request = {**request, "result_path": os.path.join(tmp, "result.json")}
        if use_gpu:
            request["gpu_mem_limit_mb"] = mem_limit_mb
        request_path = os.path.join(tmp, "request.json")
        with open(request_path, "w") as handle:
            json.dump(request, handle)
        env = {**os.environ, "PYTHONPATH": _pythonpath(), "PYTHONUNBUFFERED": "1"}
        if use_gpu:
            env.pop("TRITON_INTERPRET", None)
        else:
            env["TRITON_INTERPRET"] = "1"
        preexec = None
        if not use_gpu:
            preexec = _limit_address_space(mem_limit_mb or DEFAULT_CPU_MEM_LIMIT_MB)
        out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        start = time.monotonic()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "optimizer.sandbox.worker", request_path],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=_PROJECT_ROOT,
                start_new_session=True, preexec_fn=preexec,
            )
            timed_out = False
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
            except BaseException:  # Ctrl-C / SIGTERM here: the worker has its own session
                _kill_group(proc)
                raise
        wall = time.monotonic() - start
        stdout_tail, stderr_tail = _tail(out_path), _tail(err_path)
        data = _read_json(request["result_path"])
        if timed_out:
            data = _timeout(data, timeout_s)
        elif not data.get("final"):
            stage, kind, message = classify_exit(proc.returncode, stderr_tail)
            where = f"on ({data['shape']}): " if data.get("shape") else ""
            failing = [data["shape"]] if data.get("shape") else []
            data = {**data, "final": True, "stage": data.get("stage") or stage,
                    "error_kind": kind, "error_message": where + message,
                    "failing_shapes": data.get("failing_shapes", []) + failing}
        return WorkerOutcome(data, stdout_tail, stderr_tail, proc.returncode, wall)


def _timeout(progress: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    shape = progress.get("shape")
    where = f" while running ({shape})" if shape else ""
    stage = progress.get("stage") or "run"
    if stage in ("syntax", "compile"):
        stage = "run" if shape else stage
    return {**progress, "final": True, "stage": stage, "error_kind": "timeout",
            "error_message": f"no result after {timeout_s:g} s{where}: endless loop or "
                             "far too slow; the process was killed",
            "failing_shapes": progress.get("failing_shapes", []) + ([shape] if shape else [])}


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def _tail(path: str) -> str:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - TAIL_CHARS))
        return handle.read().decode(errors="replace")


def _pythonpath() -> str:
    existing = os.environ.get("PYTHONPATH")
    return _PROJECT_ROOT + (os.pathsep + existing if existing else "")
