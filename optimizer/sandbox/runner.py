"""The parent side of the sandbox: one subprocess per candidate, bounded in time and memory.

The request goes to the worker as a JSON file and the result comes back as a JSON file
(never parsed from stdout). The worker runs in its own process group so a timeout kills
everything it started. A hang, crash, segfault or illegal memory access ends only that
subprocess; the runner turns what is left (exit signal, stderr, last progress record)
into a classified failure.

Memory: on the CPU the worker's address space is capped with RLIMIT_AS. On a GPU that is
impossible (CUDA reserves huge virtual ranges), so the limit becomes
``torch.cuda.set_per_process_memory_fraction`` inside the worker instead.

Containment (jail.py): the worker gets a scrubbed environment (``worker_env``: no API
keys, tokens or ``KERNELKB_*``; HOME, TMPDIR and the Triton cache inside the evaluation's
own directory, which is also its working directory) and runs in user, mount, network and
PID namespaces where the host allows them. Where it does not, the run goes on with the
scrubbed environment alone, a warning is logged and the outcome says it was not contained.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from optimizer.sandbox import jail
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
    containment: str = "namespaces"  # or "uncontained: <why>"


def _limit_address_space(limit_mb: int) -> Any:
    def apply() -> None:
        import resource

        limit = limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def run_worker(request: dict[str, Any], *, timeout_s: float, use_gpu: bool,
               mem_limit_mb: int | None) -> WorkerOutcome:
    """Run one request in a fresh, contained ``python -m optimizer.sandbox.worker``."""
    with tempfile.TemporaryDirectory(prefix="kernelkb_sandbox_") as tmp, \
            tempfile.TemporaryDirectory(prefix="kernelkb_task_") as task_copy:
        origin, task_keep = place_task(request, task_copy)
        request = {**request, "result_path": os.path.join(tmp, "result.json"),
                   "task_origin": origin}
        if use_gpu:
            request["gpu_mem_limit_mb"] = mem_limit_mb
        request_path = os.path.join(tmp, "request.json")
        with open(request_path, "w") as handle:
            json.dump(request, handle)
        run_id = uuid.uuid4().hex
        env = worker_env(os.environ, tmp, use_gpu=use_gpu, run_id=run_id)
        argv = [sys.executable, "-m", "optimizer.sandbox.worker", request_path]
        reason = jail.unavailable_reason()
        if reason is None:
            argv = jail.command(argv, workdir=tmp, cwd=env["HOME"], hide=hidden_paths(),
                                keep=kept_paths() + task_keep)
            containment = "namespaces"
        else:
            log.warning("sandbox: no namespaces here (%s); the candidate runs with a "
                        "scrubbed environment only", reason)
            containment = f"uncontained: {reason}"
        preexec = None
        if not use_gpu:
            preexec = _limit_address_space(mem_limit_mb or DEFAULT_CPU_MEM_LIMIT_MB)
        out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        start = time.monotonic()
        with open(out_path, "wb") as out, open(err_path, "wb") as err, \
                _gpu_lock(use_gpu) as lock_fd:
            if lock_fd is not None:
                request["gpu_lock_fd"] = lock_fd
                with open(request_path, "w") as handle:
                    json.dump(request, handle)
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                cwd=env["HOME"], start_new_session=True, preexec_fn=preexec,
                pass_fds=() if lock_fd is None else (lock_fd,),
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
            finally:
                _kill_group(proc)
                _kill_marked(run_id)
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
        return WorkerOutcome(data, stdout_tail, stderr_tail, proc.returncode, wall,
                             containment)


@contextlib.contextmanager
def _gpu_lock(use_gpu: bool) -> Iterator[int | None]:
    """An open descriptor of this GPU's timing lock file, handed to the worker: workers
    evaluating at once on one GPU (an MCP server, several loops) take turns for their
    timing phase (worker.time_all), so no one's kernels run under another's clock."""
    if not use_gpu:
        yield None
        return
    device = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
    path = os.path.join(tempfile.gettempdir(), f"kernelkb-gpu-{_safe(device)}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        yield fd
    finally:
        os.close(fd)


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)[:40]


# What Python, Triton and CUDA need from the parent's environment; nothing else passes
# (API keys, tokens, KERNELKB_* settings, proxies stay behind).
_ENV_NAMES = frozenset({"PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME",
                        "CUDA_PATH", "LANG", "LC_ALL", "OMP_NUM_THREADS", "MKL_NUM_THREADS"})
_ENV_PREFIXES = ("TRITON_", "CUDA_", "PYTORCH_", "NVIDIA_")
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
RUN_ID_VAR = "SANDBOX_RUN_ID"


def worker_env(parent: Any, evaldir: str, *, use_gpu: bool, run_id: str) -> dict[str, str]:
    """The worker's whole environment: the allowed names from ``parent``, and HOME,
    TMPDIR, the working directory and the Triton cache inside the evaluation's directory
    (a fresh cache per candidate: a shared one could be poisoned for the next)."""
    env = {k: v for k, v in parent.items()
           if (k in _ENV_NAMES or k.startswith(_ENV_PREFIXES))
           and not any(word in k.upper() for word in _SECRET_WORDS)}
    for name in ("home", "tmp", "triton"):
        os.makedirs(os.path.join(evaldir, name), exist_ok=True)
    env.update(HOME=os.path.join(evaldir, "home"), TMPDIR=os.path.join(evaldir, "tmp"),
               TRITON_CACHE_DIR=os.path.join(evaldir, "triton"), PYTHONPATH=_PROJECT_ROOT,
               PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", **{RUN_ID_VAR: run_id})
    env.setdefault("PATH", os.defpath)
    if use_gpu:
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"
    return env


def hidden_paths() -> list[str]:
    """Covered by empty tmpfs inside the jail: the project (and with it the task modules
    and a store kept there), the parent's working directory and HOME, shared temporary
    space, and any path a KERNELKB_* setting names (the store, the service's data)."""
    paths = [_PROJECT_ROOT, os.getcwd(), os.path.expanduser("~"), "/root", "/home", "/tmp",
             "/var/tmp", "/dev/shm"]
    for name, value in os.environ.items():
        if name.startswith("KERNELKB_") and os.path.isabs(value):
            paths.append(value if os.path.isdir(value) else os.path.dirname(value))
    if os.environ.get("XDG_DATA_HOME"):  # the store's default home (kb/settings.py)
        paths.append(os.path.join(os.environ["XDG_DATA_HOME"], "kernelkb"))
    return [p for p in paths if p and p != "/" and os.path.isdir(p)]


def kept_paths() -> list[str]:
    """Bound back read-only: the code the worker imports and the Python that runs it."""
    import numpy
    import torch
    import triton

    paths = [os.path.join(_PROJECT_ROOT, "kernels"), os.path.join(_PROJECT_ROOT, "optimizer"),
             sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    for module in (torch, triton, numpy):
        paths.append(os.path.dirname(os.path.dirname(os.path.realpath(module.__file__))))
    return list(dict.fromkeys(paths))


def place_task(request: dict[str, Any], copy_dir: str) -> tuple[dict[str, str] | None,
                                                                list[str]]:
    """Where the worker loads the request's task from, and what the jail must show it.

    A task of this package needs nothing. A task file from a user's folder is copied
    with its template (``templates/`` beside it) into ``copy_dir``, bound read-only:
    binding the folder itself could show the worker what the jail hides (a tasks folder
    that is the working directory, with a .env in it). An installed entry point's
    top-level package is bound read-only where it lies (a single-file module is copied).
    """
    from kernels.discovery import origin_request

    origin = request.get("task_origin") or origin_request(str(request.get("task")))
    if not origin or (origin.get("module", "").startswith("kernels.") and not origin.get("root")):
        return origin, []
    if origin.get("file"):
        return {"file": _copy_task_file(origin["file"], copy_dir)}, [copy_dir]
    root, top = origin["root"], origin["module"].split(".")[0]
    if os.path.isdir(os.path.join(root, top)):
        return origin, [os.path.join(root, top)]
    _copy_task_file(os.path.join(root, f"{top}.py"), copy_dir)
    return {"module": origin["module"], "root": copy_dir}, [copy_dir]


def _copy_task_file(file: str, copy_dir: str) -> str:
    """Copy a task module and the templates folder beside it; the copy's path."""
    import shutil

    target = os.path.join(copy_dir, os.path.basename(file))
    shutil.copy2(file, target)
    templates = os.path.join(os.path.dirname(file), "templates")
    if os.path.isdir(templates):
        shutil.copytree(templates, os.path.join(copy_dir, "templates"), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _kill_marked(run_id: str) -> None:
    """End every process still carrying this run's id (the fallback without a PID
    namespace: children that left the process group with setsid)."""
    marker = f"{RUN_ID_VAR}={run_id}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    os.kill(int(pid), signal.SIGKILL)
        except OSError:
            continue


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
    except (ProcessLookupError, PermissionError):
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


