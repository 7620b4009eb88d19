"""The parent side of the sandbox: one subprocess per candidate, bounded in time and memory.

The request goes to the worker and the result comes back through descriptors of files in
a folder of the runner's that the jail does not show (never parsed from stdout, never
re-opened by a path the candidate could shape). The worker runs in its own process
group so a timeout kills everything it started. A hang, crash, segfault or illegal
memory access ends only that subprocess; the runner turns what is left (exit signal,
stderr, last progress record) into a classified failure.

Memory: the evaluation's whole process tree is limited by a cgroup of its own (limits.py);
on the CPU the worker's address space is also capped with RLIMIT_AS. On a GPU that is
impossible (CUDA reserves huge virtual ranges), so the GPU memory limit becomes
``torch.cuda.set_per_process_memory_fraction`` inside the worker instead.

Containment (jail.py): the worker gets a scrubbed environment (``worker_env``: no API
keys, tokens or ``KERNELKB_*``; HOME, TMPDIR and the Triton cache inside the evaluation's
own directory, which is also its working directory) and runs in user, mount, network and
PID namespaces where the host allows them, in a root built from an allow-list, with its
capabilities dropped and a seccomp filter. Where it does not, the run goes on with the
scrubbed environment alone, a warning is logged and the outcome says it was not contained.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kernelkb.kernels.shared.errors import UserFixable
from kernelkb.optimizer.sandbox import jail, limits, orphans, trusted_cache
from kernelkb.optimizer.sandbox.errors import classify_exit
from kernelkb.optimizer.sandbox.gpu_turns import MAX_WAIT_S

log = logging.getLogger(__name__)

TAIL_CHARS = 4000
# the project's folders: the checkout's root, or the installed package's folder
# (kernelkb/__init__.py); and the folder the worker imports ``kernelkb`` from
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PACKAGE = os.path.join(_PROJECT_ROOT, "kernelkb")
_IMPORT_ROOT = _PROJECT_ROOT if os.path.isdir(_PACKAGE) else os.path.dirname(_PROJECT_ROOT)


@dataclass
class WorkerOutcome:
    data: dict[str, Any]  # the worker's result (or a classified failure in its place)
    stdout_tail: str
    stderr_tail: str
    returncode: int | None
    wall_s: float
    containment: str = "namespaces"  # or "uncontained: <why>"


class SandboxBusy(UserFixable, RuntimeError):
    """More evaluations waiting than the queue holds (``KERNELKB_SANDBOX_QUEUE``)."""


def _int_env(name: str, default: int, low: int) -> int:
    value = os.environ.get(name, "").strip()
    try:
        return max(low, int(value)) if value else default
    except ValueError:
        raise ValueError(f"{name}={value!r}: a whole number is expected") from None


class _Slots:
    """At most ``KERNELKB_SANDBOX_CONCURRENCY`` evaluations at once in this process (an
    MCP or HTTP server, a loop), at most ``KERNELKB_SANDBOX_QUEUE`` more waiting: an
    MCP server once ran three at once with nothing capping it. ``take(alone=True)``
    waits until none runs, and from when it asks until it is done no other starts."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.running = self.waiting = self.started = self.wanting_alone = 0
        self.alone = False

    @contextlib.contextmanager
    def take(self, alone: bool = False) -> Iterator[Callable[[], bool]]:
        """Yields ``crowded()``: whether another evaluation ran beside this one."""
        limit = _int_env("KERNELKB_SANDBOX_CONCURRENCY", 2, 1)
        queue = _int_env("KERNELKB_SANDBOX_QUEUE", 8, 0)
        with self.lock:
            if self.running >= limit and self.waiting >= queue:
                raise SandboxBusy(f"{self.running} evaluations running and {self.waiting} "
                                  "waiting: try again later (KERNELKB_SANDBOX_CONCURRENCY, "
                                  "KERNELKB_SANDBOX_QUEUE)")
            self.waiting += 1
            self.wanting_alone += alone
            while self.alone or self.running >= (1 if alone else limit) or (
                    self.wanting_alone and not alone):
                self.lock.wait()
            self.waiting -= 1
            self.wanting_alone -= alone
            self.running += 1
            self.started += 1
            self.alone = alone
            beside, started = self.running > 1, self.started
        try:
            yield lambda: beside or self.started != started
        finally:
            with self.lock:
                self.running -= 1
                self.alone = self.alone and not alone
                self.lock.notify_all()


SLOTS = _Slots()


def run_worker(request: dict[str, Any], *, timeout_s: float, use_gpu: bool,
               mem_limit_mb: int | None) -> WorkerOutcome:
    """``_run_worker`` in one of this process's evaluation slots (``SLOTS``). A GPU
    evaluation that ran out of memory while others shared the GPU is run again alone:
    the memory it lacked may have been theirs (on the H200, rope's large shapes take
    ~34 GiB an evaluation), and an out-of-memory verdict must be the candidate's own."""
    with SLOTS.take() as crowded:
        outcome = _run_worker(request, timeout_s=timeout_s, use_gpu=use_gpu,
                              mem_limit_mb=mem_limit_mb)
    if use_gpu and crowded() and outcome.data.get("error_kind") == "out_of_memory":
        log.info("sandbox: out of memory beside other evaluations; running it again alone")
        with SLOTS.take(alone=True):
            outcome = _run_worker(request, timeout_s=timeout_s, use_gpu=use_gpu,
                                  mem_limit_mb=mem_limit_mb)
    return outcome


def run_worker_beside(request: dict[str, Any], *, timeout_s: float) -> WorkerOutcome:
    """A CPU-interpreter worker run beside a GPU evaluation, as part of it, so in that
    evaluation's slot (interpreter_pass.py): its own jail, no GPU in it."""
    return _run_worker(request, timeout_s=timeout_s, use_gpu=False, mem_limit_mb=None)


def _run_worker(request: dict[str, Any], *, timeout_s: float, use_gpu: bool,
                mem_limit_mb: int | None) -> WorkerOutcome:
    """Run one request in a contained ``python -m optimizer.sandbox.worker``: one
    started ahead for this kind of evaluation where there is one (``WARM``), else a fresh
    one; then start the next ahead, so the next evaluation does not wait for a jail to
    be built and torch to be imported.

    Nothing the runner reads is the candidate's to shape: the request, the result and the
    logs live in a folder of the runner's that the jail does not show, opened before the
    worker starts and handed over as descriptors; they are read back through those same
    descriptors, bounded in size, never re-opened by a path."""
    key = _warm_key(use_gpu, mem_limit_mb)
    started = WARM.take(key) or _Started.start(use_gpu, mem_limit_mb)
    try:
        try:
            return started.run(request, timeout_s)
        except _NotThisOne as other:  # an installed task package, bound where it lies
            started.close()
            started = _Started.start(use_gpu, mem_limit_mb, keep=other.keep)
            return started.run(request, timeout_s)
    finally:
        started.close()
        WARM.start_ahead(key, lambda: _Started.start(use_gpu, mem_limit_mb))


class _Started:
    """One worker process started in its jail and confinement, its imports done,
    blocked on reading its request from a pipe; single use."""

    def __init__(self, use_gpu: bool, mem_limit_mb: int | None, keep: list[str]) -> None:
        self.use_gpu, self.mem_limit_mb, self.keep = use_gpu, mem_limit_mb, keep
        self.stack = contextlib.ExitStack()
        self.proc: subprocess.Popen[bytes] | None = None
        self.ended = False

    @classmethod
    def start(cls, use_gpu: bool, mem_limit_mb: int | None,
              keep: list[str] | None = None) -> _Started:
        """``keep``: paths the jail must show besides the code (a task package)."""
        self = cls(use_gpu, mem_limit_mb, list(keep or []))
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        enter = self.stack.enter_context
        # a file landing while the folder is removed (seen once) must not turn the
        # verdict into a crash
        orphans.sweep_once()  # what runners killed outright left behind
        self.tmp = enter(orphans.folder("sandbox"))
        private = enter(orphans.folder("runner"))
        self.task_copy = enter(orphans.folder("task"))
        orphans.claim(private, [self.tmp, self.task_copy])
        self.files = enter(_private_files(private))
        self.gate_fd, self.lock_fd = enter(_gpu_lock(self.use_gpu))
        self.confine = enter(limits.per_evaluation(self.use_gpu, self.mem_limit_mb))
        self.request_r, self.request_w = os.pipe()
        # by attribute, at close time: each end is closed once, then marked -1 (closing
        # a number twice could close a descriptor someone else has opened since)
        self.stack.callback(lambda: _close(self.request_r, self.request_w))
        self.run_id = uuid.uuid4().hex
        usable, why = jail.mode()
        layer = trusted_layer() if self.use_gpu else None
        self.env = worker_env(os.environ, self.tmp, use_gpu=self.use_gpu, run_id=self.run_id,
                              trusted_layer=layer is not None)
        argv = [sys.executable, "-m", "kernelkb.optimizer.sandbox.worker",
                f"fd:{self.request_r}"]
        if usable is not None:
            _readable(self.task_copy)  # the jail's root may be an unprivileged host uid
            argv = jail.command(argv, workdir=self.tmp, cwd=self.env["HOME"],
                                hide=hidden_paths(),
                                keep=kept_paths() + [self.task_copy, *self.keep],
                                unprivileged=usable,
                                layers={trusted_cache.JAIL_PATH: layer} if layer else None)
            self.containment = "namespaces" if usable else f"namespaces; {why}"
            if os.geteuid() != 0 and jail.rootless_worker_ids() is None:
                self.containment += ("; one uid: the worker shares the judge's (this user "
                                     "owns no subordinate ids in /etc/subuid)")
        else:
            log.warning("sandbox: no namespaces here (%s); the candidate runs with a "
                        "scrubbed environment only", why)
            self.containment = f"uncontained: {why}"
        if self.confine.note:
            self.containment += f"; {self.confine.note}"
        keep_fds = tuple(fd for fd in (self.request_r, self.files.result, self.lock_fd,
                                       self.gate_fd) if fd is not None)
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=self.env, cwd=self.env["HOME"], start_new_session=True,
            preexec_fn=self.confine.preexec, pass_fds=keep_fds)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.stdout, self.stderr = OutputTail(self.proc.stdout), OutputTail(self.proc.stderr)
        os.close(self.request_r)  # the worker holds its end now
        self.request_r = -1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def run(self, request: dict[str, Any], timeout_s: float) -> WorkerOutcome:
        """Hand the request over and wait for the result, bounded by ``timeout_s``."""
        assert self.proc is not None
        origin, task_keep = place_task(request, self.task_copy)
        if any(path not in (self.task_copy, *self.keep) for path in task_keep):
            raise _NotThisOne(task_keep)  # an installed package, shown where it lies
        _readable(self.task_copy)
        request = {**request, "result_fd": self.files.result, "task_origin": origin,
                   "gpu_lock_fd": self.lock_fd, "gpu_gate_fd": self.gate_fd}
        if self.use_gpu:
            request["gpu_mem_limit_mb"] = self.mem_limit_mb
        start = time.monotonic()
        try:
            os.write(self.request_w, json.dumps(request).encode())
        except BrokenPipeError:
            pass  # it died waiting: classified below from its exit and stderr
        finally:
            os.close(self.request_w)
            self.request_w = -1
        waited, limit_s = 0.0, timeout_s
        try:
            timed_out, waited, limit_s = _wait(self.proc, self.files.result, start,
                                               timeout_s, shared_gpu=self.use_gpu)
        except BaseException:  # Ctrl-C / SIGTERM here: the worker has its own session
            _kill_group(self.proc)
            raise
        finally:
            self._end()
        wall = time.monotonic() - start
        stdout_tail, stderr_tail = self.stdout.text(), self.stderr.text()
        data = read_result(self.files.result)
        if timed_out:
            data = _timeout(data, limit_s, waited)
        elif not data.get("final"):
            stage, kind, message = classify_exit(self.proc.returncode, stderr_tail)
            if self.confine.hit_limit():
                kind, message = "out_of_memory", (
                    f"the evaluation's memory limit was reached: {self.confine.hit_limit()}")
            where = f"on ({data['shape']}): " if data.get("shape") else ""
            failing = [data["shape"]] if data.get("shape") else []
            data = {**data, "final": True, "stage": data.get("stage") or stage,
                    "error_kind": kind, "error_message": where + message,
                    "failing_shapes": data.get("failing_shapes", []) + failing}
        return WorkerOutcome(data, stdout_tail, stderr_tail, self.proc.returncode, wall,
                             self.containment)

    def _end(self) -> None:
        """The process group and anything still marked with this run's id, once."""
        if self.ended or self.proc is None:
            return
        self.ended = True
        _kill_group(self.proc)
        _kill_marked(self.run_id)
        self.confine.end()

    def close(self) -> None:
        """End the process (if it still runs) and free everything it held."""
        self._end()
        self.stack.close()


class _NotThisOne(Exception):
    """A request a started worker cannot take: its task must be shown where it lies."""

    def __init__(self, keep: list[str]) -> None:
        super().__init__(keep)
        self.keep = keep


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def _warm_key(use_gpu: bool, mem_limit_mb: int | None) -> tuple[Any, ...]:
    """What a worker started ahead was made for: an evaluation that differs in any of it
    gets a fresh one."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k in ENV_NAMES))
    return (use_gpu, mem_limit_mb, env, tuple(hidden_paths()), jail.mode(),
            trusted_layer() if use_gpu else None)


class _Warm:
    """At most one worker started ahead per kind of evaluation (``KERNELKB_PRESTART=0``
    turns it off). Each is used once; every one left is ended when this process exits,
    and a runner that dies takes them with it (the jail's parent-death signal)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.ready: dict[tuple[Any, ...], _Started] = {}
        self.starting: set[tuple[Any, ...]] = set()
        self.todo: queue.Queue[tuple[tuple[Any, ...], Callable[[], _Started]]] = queue.Queue()
        self.starter: threading.Thread | None = None
        atexit.register(self.close)

    @staticmethod
    def enabled() -> bool:
        return os.environ.get("KERNELKB_PRESTART", "1") != "0"

    def take(self, key: tuple[Any, ...]) -> _Started | None:
        """The worker started ahead for ``key``; one still starting is waited for (it
        is further along than a fresh one would be)."""
        with self.lock:
            self.lock.wait_for(lambda: key not in self.starting, timeout=120)
            started = self.ready.pop(key, None)
        if started is not None and not started.alive():
            started.close()
            return None
        return started

    def start_ahead(self, key: tuple[Any, ...], make: Callable[[], _Started]) -> None:
        if not self.enabled():
            return
        with self.lock:
            if key in self.ready or key in self.starting:
                return
            self.starting.add(key)
            if self.starter is None:
                # one thread starts them all and never ends: a jailed worker dies with the
                # thread that started it (the parent-death signal follows the thread)
                self.starter = threading.Thread(target=self._start_loop, daemon=True,
                                                name="kernelkb-worker-ahead")
                self.starter.start()
        self.todo.put((key, make))

    def _start_loop(self) -> None:
        while True:
            key, make = self.todo.get()
            started = old = None
            try:
                started = make()
            except Exception as err:  # noqa: BLE001 - the next evaluation starts its own
                log.info("sandbox: no worker started ahead (%s)", err)
            finally:
                with self.lock:
                    if started is not None:
                        old = self.ready.pop(key, None)
                        self.ready[key] = started
                    self.starting.discard(key)
                    self.lock.notify_all()
            if old is not None:
                old.close()

    def close(self) -> None:
        with self.lock:
            ready, self.ready = list(self.ready.values()), {}
        for started in ready:
            started.close()


WARM = _Warm()


@dataclass
class _Files:
    request: int
    result: int


@contextlib.contextmanager
def _private_files(folder: str) -> Iterator[_Files]:
    """The runner's own descriptors: request (read by the worker) and result (written by
    it); created exclusively, never followed as links."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fds = [os.open(os.path.join(folder, name), flags, 0o600)
           for name in ("request.json", "result.json")]
    try:
        yield _Files(*fds)
    finally:
        for fd in fds:
            os.close(fd)


MAX_RESULT_BYTES = 16 * 2**20  # a worker's result is a few KB; more is not a result


def read_result(fd: int) -> dict[str, Any]:
    """The worker's result through the runner's descriptor: {} when missing, over
    ``MAX_RESULT_BYTES`` or not a JSON object (a crash mid-write, or junk)."""
    try:
        size = os.fstat(fd).st_size
        if size > MAX_RESULT_BYTES:
            log.warning("sandbox: a result of %d bytes was refused", size)
            return {}
        data = json.loads(os.pread(fd, size, 0).decode())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def _gpu_lock(use_gpu: bool) -> Iterator[tuple[int | None, int | None]]:
    """Open descriptors (gate, lock) of this GPU's two lock files, handed to the worker:
    evaluations at once on one GPU share it for checks and take turns to time
    (gpu_turns.py), so no one's kernels run under another's clock."""
    if not use_gpu:
        yield None, None
        return
    device = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    base = os.path.join(tempfile.gettempdir(), f"kernelkb-gpu-{_safe(device)}")
    gate = os.open(base + ".gate", flags, 0o600)
    try:
        lock = os.open(base + ".lock", flags, 0o600)
        try:
            yield gate, lock
        finally:
            os.close(lock)
    finally:
        os.close(gate)


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)[:40]


# What Python, Triton and CUDA need from the parent's environment, by exact name; nothing
# else passes (API keys, tokens, KERNELKB_* settings, proxies, a secret under a prefix
# that looks like Triton's or CUDA's stay behind).
ENV_NAMES = frozenset({
    "LD_LIBRARY_PATH", "LANG", "LC_ALL", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH",
    "CUDA_MODULE_LOADING", "CUDA_LAUNCH_BLOCKING", "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH",
    "TRITON_LIBCUDA_PATH", "TRITON_LIBDEVICE_PATH", "TRITON_INTERPRET"})
RUN_ID_VAR = "SANDBOX_RUN_ID"
# the jail's own PATH, not the host's (which named host folders and carried whatever a
# host put in it): the Python that runs the worker, and the system's tools (the C
# compiler Triton builds its launcher with)
JAIL_PATH = os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin",
                             "/bin"])


def worker_env(parent: Any, evaldir: str, *, use_gpu: bool, run_id: str,
               trusted_layer: bool = False) -> dict[str, str]:
    """The worker's whole environment: the allowed names from ``parent``, and HOME,
    TMPDIR, the working directory and the Triton cache inside the evaluation's directory
    (a fresh cache per candidate: a shared one could be poisoned for the next);
    ``trusted_layer``: Triton reads the jail's read-only trusted layer too
    (trusted_cache.py)."""
    env = {k: v for k, v in parent.items() if k in ENV_NAMES}
    for name in ("home", "tmp", "triton"):
        os.makedirs(os.path.join(evaldir, name), exist_ok=True)
    env.update(HOME=os.path.join(evaldir, "home"), TMPDIR=os.path.join(evaldir, "tmp"),
               TRITON_CACHE_DIR=os.path.join(evaldir, "triton"), PYTHONPATH=_IMPORT_ROOT,
               PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", **{RUN_ID_VAR: run_id})
    env["PATH"] = JAIL_PATH
    if trusted_layer:
        env.update(TRITON_CACHE_MANAGER=trusted_cache.MANAGER,
                   **{trusted_cache.LAYER_ENV: trusted_cache.JAIL_PATH})
    if use_gpu:
        env.pop("TRITON_INTERPRET", None)
    else:  # the interpreter, on the CPU even where a GPU is (interpreter_pass.py)
        env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    return env


def trusted_layer() -> str | None:
    """The host folder of the trusted compile layer, made if missing (None: turned off,
    no jail here to show it read-only, or it cannot be made)."""
    if not trusted_cache.wanted() or jail.mode()[0] is None:
        return None
    try:
        trusted_cache.directory().mkdir(parents=True, exist_ok=True)
    except OSError as err:
        log.info("sandbox: no trusted compile layer (%s)", err)
        return None
    return str(trusted_cache.directory())


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
             _PACKAGE if os.path.isdir(_PACKAGE) else _PROJECT_ROOT,
             sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    for module in (torch, triton, numpy):
        assert module.__file__ is not None  # packages imported from their folders
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
    from kernelkb.kernels.discovery import origin_request

    origin = request.get("task_origin") or origin_request(str(request.get("task")))
    builtin = origin.get("module", "").startswith("kernelkb.kernels.") if origin else False
    if not origin or (builtin and not origin.get("root")):
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


SHARED_GPU_FACTOR = 3  # the limit on a GPU other processes use too, at most, per NVML


def _wait(proc: subprocess.Popen[bytes], result_fd: int, start: float, timeout_s: float,
          shared_gpu: bool = False) -> tuple[bool, float, float]:
    """Wait for the worker: ``timeout_s`` of its own time, plus what it spent waiting for
    the GPU while other evaluations were timed (the worker reports it; bounded by
    gpu_turns.MAX_WAIT_S, since the candidate could write that report too). Where
    ``shared_gpu`` and NVML sees other processes on the GPU when the limit is reached,
    it grows once to ``SHARED_GPU_FACTOR`` times: a neighbour's work slows every timed
    call, and an honest kernel must not time out for it (the host asks, not the worker).
    (timed out, seconds waited for the GPU, the limit on the worker's own time)."""
    waited, limit_s = 0.0, timeout_s
    while True:
        left = start + limit_s + waited - time.monotonic()
        try:
            proc.wait(timeout=max(0.0, left))
            return False, waited, limit_s
        except subprocess.TimeoutExpired:
            reported = _reported_wait(read_result(result_fd))
            if reported > waited + 0.05:
                waited = reported
                continue
            if shared_gpu and limit_s == timeout_s and _gpu_shared():
                limit_s = SHARED_GPU_FACTOR * timeout_s
                continue
            return True, waited, limit_s


def _gpu_shared() -> bool:
    from kernelkb.optimizer.sandbox import neighbours

    return neighbours.shared_note() is not None


def _reported_wait(progress: dict[str, Any]) -> float:
    try:
        return min(MAX_WAIT_S, max(0.0, float(progress.get("gpu_wait_s") or 0.0)))
    except (TypeError, ValueError):
        return 0.0


def _timeout(progress: dict[str, Any], timeout_s: float, waited: float = 0.0
             ) -> dict[str, Any]:
    shape = progress.get("shape")
    where = f" while running ({shape})" if shape else ""
    besides = f" (besides {waited:.0f} s waiting for the GPU)" if waited >= 1 else ""
    stage = progress.get("stage") or "run"
    if stage in ("syntax", "compile"):
        stage = "run" if shape else stage
    return {**progress, "final": True, "stage": stage, "error_kind": "timeout",
            "error_message": f"no result after {timeout_s:g} s{where}{besides}: endless "
                             "loop or far too slow; the process was killed",
            "failing_shapes": progress.get("failing_shapes", []) + ([shape] if shape else [])}


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


class OutputTail:
    """Drains one of the worker's output pipes on a thread and keeps only its last
    ``TAIL_CHARS`` bytes: what a candidate prints costs the host no disk and at most
    that much memory, however much it prints (it was a host file capped at 8 GiB)."""

    def __init__(self, pipe: Any) -> None:
        self.pipe, self.kept, self.total = pipe, b"", 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := self.pipe.read1(65536):
                self.total += len(chunk)
                self.kept = (self.kept + chunk)[-TAIL_CHARS:]

    def text(self) -> str:
        """The kept tail, once the pipe is closed (every writer ended) or after 2 s."""
        self.thread.join(timeout=2.0)
        dropped = self.total - len(self.kept)
        head = f"[{dropped} earlier bytes not kept]\n" if dropped > 0 else ""
        return head + self.kept.decode(errors="replace")


def _readable(folder: str) -> None:
    """A task copy the runner made, readable to any uid (the jail's root may be none of
    the runner's): folders 0755, files 0644; its contents are the user's task, no secret."""
    for base, _dirs, names in os.walk(folder):
        os.chmod(base, 0o755)
        for name in names:
            os.chmod(os.path.join(base, name), 0o644)


