"""Red team 12: the trusted compile layer (docs/evaluator.md, "The trusted compile
layer"), attacked from the docs alone (tests/bad_kernels/REDTEAM12.md).

The claims: only a source that is exactly what the task's template renders for its own
knob values is compiled outside the jail (``trusted_cache.is_generated``); in the jail the
layer (``/kernelkb-trusted-triton``) is read-only by every route; nothing a jail wrote
reaches the layer and the drawn shapes never do; the worker's own cache poisons no other
evaluation. A route that is refused is a plain assertion that it is; one that gets
through is a strict xfail asserting the secure outcome, with how it gets through."""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from redteam import escaped, host_layer, probe

from kernelkb.kernels import drawn_shapes
from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import jail, judge, layered_cache, trusted_cache

TASKS = ("softmax", "rmsnorm", "swiglu", "rope", "matmul", "attention")
CONSTRAINED = ("softmax", "rmsnorm", "rope", "matmul", "attention")  # swiglu refuses none


def _set(source: str, name: str, value: str) -> str:
    """``source`` with its top-level ``name = ...`` line's value replaced (its comment kept)."""
    changed, n = re.subn(rf"(?m)^{name} = [^\s#]+", f"{name} = {value}", source, count=1)
    assert n == 1, name
    return changed


def _naive(name: str) -> tuple[Any, str]:
    task: Any = get_task(name)
    return task, task.render(task.default_config)


# --- claim 1: only the template's own renderings are "generated" ------------------------

def test_the_templates_other_header_constants_are_not_knob_values() -> None:
    """A top-level constant of the template that is no knob (softmax's ``LONG_ROW_COLS``,
    ``LONG_ROW_PERSISTENT``): ``header_constants`` reads it as configuration, but a source
    that changes it is a stranger's."""
    task, naive = _naive("softmax")
    assert {"LONG_ROW_COLS", "LONG_ROW_PERSISTENT"} <= set(trusted_cache.header_constants(naive))
    assert trusted_cache.is_generated(task, naive)
    for name, value in (("LONG_ROW_COLS", "1"), ("LONG_ROW_PERSISTENT", "4")):
        assert not trusted_cache.is_generated(task, _set(naive, name, value)), name


@pytest.mark.parametrize(("name", "value"), [
    ("NUM_WARPS", "3"), ("NUM_WARPS", "32"), ("BLOCK_SIZE", "7"),
    ("BLOCK_SIZE", "1073741824"), ("ROWS_PER_PROGRAM", "0"), ("ROWS_PER_PROGRAM", "-1"),
    ("NUM_WARPS", "'4'"), ("NUM_WARPS", "(4+0j)"), ("NUM_WARPS", "True"),
])
def test_a_knob_value_outside_the_tasks_space_is_a_strangers(name: str, value: str) -> None:
    task, naive = _naive("softmax")
    assert not trusted_cache.is_generated(task, _set(naive, name, value))


@pytest.mark.parametrize("name", CONSTRAINED)
def test_a_combination_the_tasks_constraint_refuses_is_a_strangers(name: str) -> None:
    """Every value in the task's space, the combination illegal (``why_illegal``): the
    header written by hand, as ``render`` refuses to."""
    import itertools

    task, naive = _naive(name)
    knobs: Any = (*task.knobs, *task.variants)
    names = [k.name for k in knobs]
    tried = 0
    for combo in itertools.product(*(k.values for k in knobs)):
        config = {**task.default_config, **dict(zip(names, combo, strict=True))}
        if not task.why_illegal(config):
            continue
        source = naive
        for key, value in config.items():
            source = _set(source, key, repr(value))
        assert not trusted_cache.is_generated(task, source), config
        tried += 1
        if tried == 4:
            break
    assert tried, "no illegal combination in the space"


def _same_text_other_bytes(naive: str) -> dict[str, str]:
    return {
        "CRLF line endings": naive.replace("\n", "\r\n"),
        "a UTF-8 BOM": "\ufeff" + naive,
        "a coding cookie": "# -*- coding: latin-1 -*-\n" + naive,
        "one more newline": naive + "\n",
        "no final newline": naive.rstrip("\n"),
        "a tab in a header line": naive.replace("NUM_WARPS = 4", "NUM_WARPS =\t4", 1),
        "a form feed between blocks": naive.replace("\n\n\n@triton.jit", "\n\n\x0c\n@triton.jit",
                                                    1),
        "a NUL at the end": naive + "\x00",
        "a header line twice": naive.replace("NUM_WARPS = 4\n", "NUM_WARPS = 4\nNUM_WARPS = 4\n",
                                             1),
        "a constant the template lacks": naive.replace("NUM_WARPS = 4\n", "NUM_WARPS = 4\nX = 1\n",
                                                       1),
        "a header line's comment changed": naive.replace("# columns per tile", "# cols per tile",
                                                         1),
    }


def test_the_same_code_in_other_bytes_is_a_strangers() -> None:
    task, naive = _naive("softmax")
    for what, source in _same_text_other_bytes(naive).items():
        assert source != naive, what
        assert not trusted_cache.is_generated(task, source), what


def _off_type(task: Any, naive: str) -> list[str]:
    """The header with one knob's value written as another type that compares equal to a
    value of the task's space: ``4.0`` for 4, ``0.0`` or ``0`` for False."""
    found = []
    for key, value in task.default_config.items():
        if not isinstance(value, (bool, int, float)):
            continue  # a string variant: render writes its repr, another quoting is refused
        alternatives = [float(value)] + ([int(value)] if isinstance(value, bool) else [])
        for other in alternatives:
            found.append(_set(naive, key, repr(other)))
    return found


@pytest.mark.parametrize("name", TASKS)
def test_a_knob_value_of_another_type_is_a_strangers(name: str) -> None:
    task, naive = _naive(name)
    generated = [s for s in _off_type(task, naive) if trusted_cache.is_generated(task, s)]
    assert generated == []


def test_the_off_type_renderings_compute_what_the_template_does_or_fail() -> None:
    """What the hole above gave, before it was closed (in the interpreter): the same
    answer, or an error; no off-type rendering computes something else."""
    import torch

    from kernelkb.kernels.candidate_loading import load_candidate

    task, naive = _naive("softmax")
    x = torch.randn(5, 300)
    expected = torch.softmax(x, -1)
    generated = _off_type(task, naive)
    assert len(generated) >= 5
    for n, source in enumerate(generated):
        try:
            out = load_candidate(source, f"redteam12_off_type_{n}").run(x)
        except Exception:  # noqa: BLE001, S112 - an error is not a wrong answer
            continue
        assert torch.allclose(out, expected, atol=1e-6), source[:2000]


# --- claim 2: the layer is read-only in the jail, by every route -------------------------

LAYER_ESCAPES = r'''
import ctypes, errno, json, mmap, os, sys

LAYER = "/kernelkb-trusted-triton"
KEY = os.path.join(LAYER, "KEY")
FILE = os.path.join(KEY, "kernel.cubin")
libc = ctypes.CDLL(None, use_errno=True)


def sysc(nr, *args):
    rc = libc.syscall(ctypes.c_long(nr), *args)
    return rc, ctypes.get_errno()


def fail(name):
    raise OSError(ctypes.get_errno(), name)


def routes():
    got = {}

    def write_existing():
        with open(FILE, "r+b") as h:
            h.write(b"poison")

    def create():
        os.close(os.open(os.path.join(KEY, "planted.cubin"), os.O_WRONLY | os.O_CREAT, 0o644))

    def tmpfile():
        fd = os.open(KEY, os.O_TMPFILE | os.O_WRONLY, 0o644)
        os.write(fd, b"poison")
        os.link(f"/proc/self/fd/{fd}", os.path.join(KEY, "tmp.cubin"))

    def through(prefix):
        def write():
            with open(prefix + FILE, "r+b") as h:
                h.write(b"poison")
        return write

    def reopen_o_path():
        fd = os.open(FILE, os.O_PATH)
        with open(f"/proc/self/fd/{fd}", "r+b") as h:
            h.write(b"poison")

    def mmap_shared():
        fd = os.open(FILE, os.O_RDONLY)
        m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        m[0:1] = b"X"
        m.flush()

    def remount():
        if libc.mount(None, LAYER.encode(), None, 32 | 4096, None) != 0:  # REMOUNT|BIND
            fail("mount")

    def mount_over():
        if libc.mount(b"tmpfs", LAYER.encode(), b"tmpfs", 0, None) != 0:
            fail("mount")

    def mount_setattr():  # the new mount API: clear MOUNT_ATTR_RDONLY
        attr = (ctypes.c_uint64 * 4)(0, 1, 0, 0)
        rc, err = sysc(442, -100, LAYER.encode(), 0, ctypes.byref(attr), 32)
        if rc != 0:
            raise OSError(err, "mount_setattr")

    def open_tree_clone():  # a detached copy of the mount, made writable
        fd, err = sysc(428, -100, LAYER.encode(), 1 | 0o2000000)
        if fd < 0:
            raise OSError(err, "open_tree")
        attr = (ctypes.c_uint64 * 4)(0, 1, 0, 0)
        rc, err = sysc(442, fd, b"", 0x1000, ctypes.byref(attr), 32)
        if rc != 0:
            raise OSError(err, "mount_setattr")
        with open(f"/proc/self/fd/{fd}/KEY/kernel.cubin", "r+b") as h:
            h.write(b"poison")

    def fspick():  # the layer's superblock, to reconfigure
        fd, err = sysc(433, -100, LAYER.encode(), 0)
        if fd < 0:
            raise OSError(err, "fspick")

    def unshare():
        if libc.unshare(0x10000000 | 0x00020000) != 0:  # NEWUSER | NEWNS
            fail("unshare")

    def clone3():  # its flags lie in a struct a seccomp filter cannot read
        args = (ctypes.c_uint64 * 11)()
        args[0], args[4] = 0x10000000 | 0x00020000, 17
        r, w = os.pipe()
        pid, err = sysc(435, ctypes.byref(args), 88)
        if pid < 0:
            raise OSError(err, "clone3")
        if pid == 0:
            said = "child "
            if libc.mount(None, LAYER.encode(), None, 32 | 4096, None) == 0:
                said += "remounted "
            try:
                with open(FILE, "r+b") as h:
                    h.write(b"poison")
                said += "wrote"
            except OSError:
                pass
            os.write(w, said.encode())
            os._exit(0)
        os.waitpid(pid, 0)
        os.close(w)
        said = os.read(r, 4096).decode()
        if "remounted" in said or "wrote" in said:
            return said
        raise OSError(errno.EPERM, said)

    for name, fn in [
        ("write a kernel", write_existing),
        ("create a kernel", create),
        ("mkdir a key", lambda: os.mkdir(os.path.join(LAYER, "NEWKEY"))),
        ("rename in the layer", lambda: os.rename(FILE, os.path.join(KEY, "moved"))),
        ("rename a key", lambda: os.rename(KEY, os.path.join(LAYER, "KEY2"))),
        ("rename the mount point", lambda: os.rename(LAYER, "/kernelkb-moved")),
        ("unlink a kernel", lambda: os.unlink(FILE)),
        ("hard link", lambda: os.link(FILE, os.path.join(KEY, "alias"))),
        ("symlink", lambda: os.symlink("/tmp/x", os.path.join(KEY, "sym"))),
        ("chmod", lambda: os.chmod(FILE, 0o666)),
        ("chown", lambda: os.chown(FILE, os.getuid(), os.getgid())),
        ("utime", lambda: os.utime(FILE, (0, 0))),
        ("truncate", lambda: os.truncate(FILE, 0)),
        ("setxattr", lambda: os.setxattr(FILE, "user.kernelkb", b"x")),
        ("O_TMPFILE and linkat", tmpfile),
        ("/proc/self/root", through("/proc/self/root")),
        ("/proc/1/root", through("/proc/1/root")),
        ("O_PATH reopened", reopen_o_path),
        ("mmap shared writable", mmap_shared),
        ("remount read-write", remount),
        ("tmpfs over it", mount_over),
        ("mount_setattr", mount_setattr),
        ("open_tree clone", open_tree_clone),
        ("fspick", fspick),
        ("unshare user+mount", unshare),
        ("clone3 user+mount", clone3),
    ]:
        try:
            fn()
            got[name] = "done"
        except Exception as e:
            code = getattr(e, "errno", None) or 0
            got[name] = "refused " + errno.errorcode.get(code, type(e).__name__)
    return got


def layer():
    out = {}
    for root, dirs, files in os.walk(LAYER):
        for name in files:
            out[os.path.join(root, name)] = open(os.path.join(root, name), "rb").read().decode()
        for name in dirs:
            out[os.path.join(root, name) + "/"] = ""
    return out


seen = {"root": {"routes": routes()}}
import importlib.util
spec = importlib.util.spec_from_file_location("jail", sys.argv[1])
jail = importlib.util.module_from_spec(spec)
spec.loader.exec_module(jail)
read, write = os.pipe()
pid = os.fork()
if pid == 0:  # as the judge forks the worker
    jail.become_worker()
    os.write(write, json.dumps({"uid": os.getuid(), "routes": routes()}).encode())
    os._exit(0)
os.close(write)
os.waitpid(pid, 0)
data = b""
while chunk := os.read(read, 65536):
    data += chunk
seen["worker"] = json.loads(data)
seen["layer"] = layer()
print(json.dumps(seen))
'''


@pytest.mark.skipif(jail.unavailable_reason() is not None or os.geteuid() != 0,
                    reason="needs the jail, run by root (the judge's and the worker's uids)")
def test_no_route_writes_the_layer_from_the_jail() -> None:
    """26 routes, as the jail's root (the judge's kept capabilities) and as the worker,
    against a host layer whose files and folders are world-writable, so only the
    read-only mount stands in the way."""
    home, layer = host_layer("kernelkb_rt12_home_", 0o777, 0o666)
    folder = tempfile.mkdtemp(prefix="kernelkb_rt12_probe_")
    os.chmod(folder, 0o755)
    Path(folder, "probe.py").write_text(LAYER_ESCAPES)
    os.chmod(Path(folder, "probe.py"), 0o644)
    with tempfile.TemporaryDirectory(prefix="kernelkb_rt12_work_") as work:
        keep = [sys.prefix, sys.base_prefix, folder, os.path.dirname(jail.__file__)]
        argv = jail.command([sys.executable, "-I", f"{folder}/probe.py", jail.__file__],
                            workdir=work, cwd=work, hide=[str(home)], keep=keep,
                            layers={trusted_cache.JAIL_PATH: str(layer)})
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen["worker"]["uid"] == jail.WORKER_UID
    for who in ("root", "worker"):
        routes = seen[who]["routes"]
        assert len(routes) == 26
        assert [name for name, said in routes.items() if not said.startswith("refused")] == [], \
            (who, routes)
    assert seen["layer"] == {f"{trusted_cache.JAIL_PATH}/KEY/": "",
                             f"{trusted_cache.JAIL_PATH}/KEY/kernel.cubin": "compiled outside"}
    assert sorted(p.name for p in layer.rglob("*")) == ["KEY", "kernel.cubin"]
    assert (layer / "KEY" / "kernel.cubin").read_text() == "compiled outside"


def _layer_and_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A kernel group the fill wrote (Triton's own manager) in the layer, and the
    evaluation's own cache, as the worker is given them."""
    from triton.runtime.cache import FileCacheManager

    layer, own = tmp_path / "layer", tmp_path / "own"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(layer))
    maker = FileCacheManager("KEY")
    paths = {name: maker.put(b"trusted " + name.encode(), name) for name in ("k.cubin", "k.json")}
    maker.put_group("k.json", paths)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(own))
    monkeypatch.setenv(trusted_cache.LAYER_ENV, str(layer))
    monkeypatch.setattr(layered_cache, "READS", {"layer": 0, "own": 0, "missing": 0})
    return layer, own


def test_a_kernel_the_layer_holds_is_not_shadowed_by_the_evaluations_own_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.runtime.cache import FileCacheManager

    layer, own = _layer_and_own(tmp_path, monkeypatch)
    planted = FileCacheManager("KEY")  # what a candidate's code can do in its own folder
    paths = {name: planted.put(b"planted " + name.encode(), name) for name in ("k.cubin", "k.json")}
    planted.put_group("k.json", paths)
    group = layered_cache.LayeredCache("KEY").get_group("k.json")
    assert group is not None
    assert Path(group["k.cubin"]).read_bytes() == b"trusted k.cubin"


def test_the_worker_cannot_point_the_layer_at_its_own_folder_for_anyone_else(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The layer's place is an environment variable the worker can change: it then reads
    its own folder as a "layer", which gains it nothing its own cache did not, and the
    runner's layer is where it was."""
    layer, own = _layer_and_own(tmp_path, monkeypatch)
    fake = tmp_path / "fake"
    fake.mkdir()
    monkeypatch.setenv(trusted_cache.LAYER_ENV, str(fake))
    cache = layered_cache.LayeredCache("KEY")
    assert cache.get_group("k.json") is None  # nothing of the real layer is shown there
    written = cache.put(b"built", "k.cubin")
    assert Path(written).is_relative_to(own)
    assert not any(fake.iterdir())
    assert (layer / "KEY" / "k.cubin").read_bytes() == b"trusted k.cubin"


# --- claim 3: the layer gets the foreseeable shapes only, and nothing of a jail's --------

def test_the_drawn_shapes_are_never_among_the_layers_jobs() -> None:
    task: Any = get_task("softmax")
    template = task.template
    shapes = [[1, 7], [64, 1000], [256, 4096]]
    request = {"task": "softmax", "dtype": "float16", "source": template, "shapes": shapes,
               "conditions": True, "parent_source": template, "timing": True}
    timed = [(64, 1000), (256, 4096)]
    jobs = {tuple(shape) for _, shape, _, _ in trusted_cache.jobs(task, request, timed)}
    foreseen = {tuple(s) for s, _ in judge.foreseen_shapes(task, request)}
    assert jobs <= {tuple(s) for s in shapes} | foreseen | set(timed)
    lists = (*task.sweep_shapes, *task.edge_shapes, *task.cpu_shapes)
    declared = [tuple(s) for s in (*lists, *shapes)]
    rng = random.Random(12)
    drawn = {drawn_shapes.draw_shape([tuple(s) for s in shapes], declared, lambda s: True, rng)
             for _ in range(200)}
    drawn.discard(None)
    assert drawn and not drawn & jobs


# --- claim 4: an evaluation's writes reach no other evaluation, nor the layer ------------

PERSIST = r'''
import os
import subprocess
import sys

TOKEN = "__TOKEN__"
CHILD = r"""
import json, os, sys
token = sys.argv[1]
places = {"HOME": os.environ.get("HOME"), "TMPDIR": os.environ.get("TMPDIR"),
          "TRITON_CACHE_DIR": os.environ.get("TRITON_CACHE_DIR"), "/tmp": "/tmp",
          "/dev/shm": "/dev/shm", "cwd": os.getcwd(),
          "layer": "/kernelkb-trusted-triton"}
for name, place in places.items():
    if not place or not os.path.isdir(place):
        continue
    for root, dirs, files in os.walk(place):
        for f in files + dirs:
            if token in f:
                print("ESCAPED: an earlier evaluation's", f, "in", name, flush=True)
wrote = []
for name, place in places.items():
    try:
        if name == "TRITON_CACHE_DIR":  # a group, as Triton's manager lays one out
            key = os.path.join(place, "rt12" + token + "KEY")
            os.makedirs(key)
            open(os.path.join(key, "k.cubin"), "w").write("planted")
            open(os.path.join(key, "__grp__k.json"), "w").write(json.dumps(
                {"child_paths": {"k.cubin": os.path.join(key, "k.cubin")}}))
        else:
            open(os.path.join(place, "rt12_" + token), "w").write("planted")
        wrote.append(name)
    except (OSError, TypeError) as e:
        print("HELD", name, type(e).__name__, flush=True)
print("WROTE", " ".join(wrote), flush=True)
print("LAYER SHOWN", os.path.isdir("/kernelkb-trusted-triton"), flush=True)
"""


def _launch():
    rfd, wfd = os.pipe()
    for exe in ("/usr/bin/python3", "/root/.pyenv/versions/3.11.7/bin/python3"):
        try:
            child = subprocess.Popen([exe, "-I", "-c", CHILD, TOKEN], stdout=wfd, stderr=wfd)
            break
        except FileNotFoundError:
            continue
    os.close(wfd)
    chunks = []
    while chunk := os.read(rfd, 65536):
        chunks.append(chunk)
    child.wait(timeout=120)
    return b"".join(chunks).decode(errors="replace")[-3500:]


def run(x, weight, eps=1e-6):
    report = _launch()
    print(report, flush=True)
    raise RuntimeError("probe report (never ok):\n" + report)
'''


@pytest.mark.slow
@pytest.mark.skipif(jail.unavailable_reason() is not None, reason="needs the jail")
def test_an_evaluations_cache_and_folders_reach_neither_the_next_one_nor_the_layer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two evaluations one after the other in one process (the second on the worker
    started ahead): the first plants a group in its Triton cache and a file in every
    folder it may write; the second finds none, and the host's layer holds none."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    token = secrets.token_hex(6)
    source = PERSIST.replace("__TOKEN__", token)
    _, first = probe(source, "rmsnorm")
    assert "WROTE HOME TMPDIR TRITON_CACHE_DIR" in first, first
    assert not escaped(first), first
    _, second = probe(source, "rmsnorm")
    assert "WROTE" in second and not escaped(second), second
    layer = trusted_cache.directory()
    planted = [p for p in layer.rglob("*") if token in p.name] if layer.exists() else []
    assert planted == []
