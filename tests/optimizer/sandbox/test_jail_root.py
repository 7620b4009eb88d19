"""The jail gives root nothing (optimizer/sandbox/jail.py, runner.py): run by root, as CI,
the developers' machines and the GPU host run it, the jail's uid 0 is an unprivileged
host uid; host-global /proc files refuse writes (and stay refused where the jail's root
had to be the host's); the host name is not the host's; no core file can be written;
the environment passes by exact names; the worker's output costs the host a bounded
tail, not a file. Each is asserted from inside a real jail, by a small probe, without
torch, so it runs in seconds."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from redteam import host_layer

from kernelkb.optimizer.sandbox import jail, runner, trusted_cache

pytestmark = pytest.mark.skipif(jail.unavailable_reason() is not None,
                                reason=f"no namespaces here: {jail.unavailable_reason()}")

# opened for writing only, never written: where the jail failed, nothing on the host moves
HOST_GLOBAL = ["/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
               "/proc/sys/vm/drop_caches", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger"]
PROBE = textwrap.dedent("""
    import json, os, resource, socket
    opened = []
    for path in {paths!r}:
        try:
            os.close(os.open(path, os.O_WRONLY))
            opened.append(path)
        except OSError:
            pass
    print(json.dumps({{
        "uid_map": open("/proc/self/uid_map").read().split(),
        "opened_for_writing": opened,
        "kcore": os.path.exists("/proc/kcore") and os.stat("/proc/kcore").st_size,
        "host_counts": [p for p in ("/proc/sys/fs/dentry-state", "/proc/sys/fs/inode-nr",
                                    "/proc/sys/fs/file-nr") if os.path.exists(p)],
        "host": socket.gethostname(),
        "cgroup": open("/proc/self/cgroup").read().split(),
        "core_limit": resource.getrlimit(resource.RLIMIT_CORE),
        "env": sorted(os.environ),
        "accounts": {{name: open("/etc/" + name).read() for name in ("passwd", "group")}},
        "me": __import__("pwd").getpwuid(os.getuid()).pw_name,
    }}))
""")


def _run_in_jail(source: str, *, unprivileged: bool | None = None,
                 env: dict[str, str] | None = None, extra_keep: list[str] | None = None,
                 hide: list[str] | None = None, layers: dict[str, str] | None = None
                 ) -> subprocess.CompletedProcess[str]:
    folder = tempfile.mkdtemp(prefix="kernelkb_jail_test_")
    os.chmod(folder, 0o755)  # the jail's root may be an unprivileged host uid
    Path(folder, "probe.py").write_text(source)
    os.chmod(Path(folder, "probe.py"), 0o644)
    with tempfile.TemporaryDirectory(prefix="kernelkb_jail_work_") as work:
        keep = [sys.prefix, sys.base_prefix, folder, *(extra_keep or [])]
        argv = jail.command([sys.executable, "-I", f"{folder}/probe.py"], workdir=work,
                            cwd=work, hide=hide or [], keep=keep, unprivileged=unprivileged,
                            layers=layers)
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


def _probe(**kwargs: object) -> dict[str, object]:
    done = _run_in_jail(PROBE.format(paths=HOST_GLOBAL), **kwargs)  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _lines(words: object) -> list[list[str]]:
    """/proc/self/uid_map's words, a line (inside, outside, count) each."""
    assert isinstance(words, list)
    return [words[i:i + 3] for i in range(0, len(words), 3)]


def test_the_jails_root_is_no_host_root_and_host_global_files_refuse_writes():
    seen = _probe()
    if os.geteuid() == 0:  # the judge's uid 0, and the worker's own
        assert _lines(seen["uid_map"]) == [["0", str(jail.JAIL_UID), "1"], [
            str(jail.WORKER_UID), str(jail.WORKER_HOST_UID), "1"]]
        assert jail.mode() == (True, "")
    else:
        assert _lines(seen["uid_map"]) == [["0", str(os.geteuid()), "1"]]
    assert seen["opened_for_writing"] == []
    assert seen["kcore"] in (False, 0)  # covered by /dev/null where the kernel has one
    assert seen["host_counts"] == []  # the host's file-system counters: covered
    assert seen["host"] == jail.HOST_NAME != socket.gethostname()
    if os.path.exists("/proc/self/ns/cgroup"):  # its own cgroup root, not the host's path
        assert all(line.endswith(":/") for line in seen["cgroup"]), seen["cgroup"]
    assert seen["core_limit"] == [0, 0]
    # its own accounts, not the host's (red team 10: the host's names and home folders)
    assert seen["accounts"] == jail.ACCOUNTS and seen["me"] == "root"


@pytest.mark.skipif(os.geteuid() != 0, reason="the root-mapped jail is made by root only")
def test_where_the_jails_root_must_be_host_root_the_host_global_files_are_masked():
    seen = _probe(unprivileged=False)
    assert _lines(seen["uid_map"]) == [["0", "0", "1"], [str(jail.WORKER_UID),
                                                         str(jail.WORKER_HOST_UID), "1"]]
    assert seen["opened_for_writing"] == []  # read-only binds, not the kernel's uid rule
    assert seen["host_counts"] == []
    assert seen["host"] == jail.HOST_NAME


def test_the_environment_passes_by_exact_names_only():
    decoys = {"TRITON_API_KEY": "k1", "CUDA_TOKEN": "k2", "NVIDIA_SECRET_X": "k3",
              "PYTORCH_HUB_TOKEN": "k4", "TRITON_CACHE_KEY_SALT": "k5",
              "CUDA_PASSWD": "k6", "NVIDIA_CREDS": "k7"}
    parent = {"PATH": "/host/secret-tools:/usr/bin", "CUDA_VISIBLE_DEVICES": "0",
              "TRITON_PTXAS_PATH": "/x", **decoys}
    env = runner.worker_env(parent, tempfile.mkdtemp(prefix="kernelkb_env_"), use_gpu=True,
                            run_id="r")
    assert not set(decoys) & set(env)
    assert env["TRITON_PTXAS_PATH"] == "/x" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["PATH"] == runner.JAIL_PATH  # the jail's own, not the host's (red team 8)
    assert set(env) <= runner.ENV_NAMES | {"HOME", "TMPDIR", "TRITON_CACHE_DIR", "PYTHONPATH",
                                           "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
                                           "PATH", runner.RUN_ID_VAR}
    seen = _probe(env=env)
    assert not set(decoys) & set(seen["env"])  # type: ignore[arg-type]
    # with the trusted compile layer: Triton's manager and where the layer is, no more
    layered = runner.worker_env(parent, tempfile.mkdtemp(prefix="kernelkb_env_"),
                                use_gpu=True, run_id="r", trusted_layer=True)
    assert set(layered) - set(env) == {"TRITON_CACHE_MANAGER", trusted_cache.LAYER_ENV}
    assert layered[trusted_cache.LAYER_ENV] == trusted_cache.JAIL_PATH


LAYER_PROBE = textwrap.dedent("""
    import json, os
    layer = {layer!r}
    wrote = []
    for name in ("kernel.cubin", "planted.cubin"):
        try:
            with open(os.path.join(layer, "KEY", name), "wb") as handle:
                handle.write(b"poison")
            wrote.append(name)
        except OSError:
            pass
    try:
        os.mkdir(os.path.join(layer, "NEWKEY"))
        wrote.append("NEWKEY")
    except OSError:
        pass
    print(json.dumps({{"read": open(os.path.join(layer, "KEY", "kernel.cubin")).read(),
                      "wrote": wrote, "host_path_seen": os.path.exists({host!r})}}))
""")


def test_the_trusted_compile_layer_is_shown_read_only_wherever_it_lies():
    """The host's trusted layer (trusted_cache.py) at its jail path: the worker reads the
    kernels there and can neither change one nor add one, even where the layer lies under
    a folder the jail hides (the user's cache folder under HOME)."""
    home, layer = host_layer("kernelkb_home_", 0o755, 0o644)
    done = _run_in_jail(LAYER_PROBE.format(layer=trusted_cache.JAIL_PATH, host=str(layer)),
                        hide=[str(home)], layers={trusted_cache.JAIL_PATH: str(layer)})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen == {"read": "compiled outside", "wrote": [], "host_path_seen": False}
    assert sorted(p.name for p in (layer / "KEY").iterdir()) == ["kernel.cubin"]
    assert (layer / "KEY" / "kernel.cubin").read_text() == "compiled outside"


def test_the_workers_output_costs_the_host_a_bounded_tail():
    spam = "import os\nfor _ in range(256):\n    os.write(1, b'x' * (1 << 20))\nprint('END')\n"
    folder = tempfile.mkdtemp(prefix="kernelkb_out_")
    Path(folder, "spam.py").write_text(spam)
    proc = subprocess.Popen([sys.executable, "-I", f"{folder}/spam.py"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    tail = runner.OutputTail(proc.stdout)
    proc.wait(timeout=60)
    text = tail.text()
    assert tail.total > 256 << 20  # all of it was read, so the worker never blocked
    assert len(tail.kept) == runner.TAIL_CHARS and text.rstrip().endswith("END")
    assert text.startswith(f"[{tail.total - runner.TAIL_CHARS} earlier bytes not kept]")


SPLIT_PROBE = textwrap.dedent("""
    import importlib.util, json, os, resource, signal, time
    spec = importlib.util.spec_from_file_location("jail", {jail_file!r})
    jail = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(jail)
    judge_before = jail.lock_status()["CapBnd"]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # as judge.run forks the worker
        jail.become_worker()
        status = jail.lock_status()
        judge, seen = os.getppid(), {{"uid": os.getuid(), "gid": os.getgid(),
                                      "caps": status["CapEff"] | status["CapBnd"]}}
        reach = {{
            "signal": lambda: os.kill(judge, 0),
            "oom_score_adj": lambda: open(f"/proc/{{judge}}/oom_score_adj", "w").write("999"),
            "prlimit": lambda: resource.prlimit(judge, resource.RLIMIT_CPU, (1, 1)),
            "setpriority": lambda: os.setpriority(os.PRIO_PROCESS, judge, 19),
            "setuid 0": lambda: os.setuid(0),
        }}
        seen["reached"] = []
        for name, call in reach.items():
            try:
                call()
                seen["reached"].append(name)
            except OSError:
                pass
        os.write(write, json.dumps(seen).encode())
        time.sleep(60)
        os._exit(0)
    jail.drop_kept_capabilities(jail.JUDGE_KEEPS)
    worker = json.loads(os.read(read, 65536))
    os.kill(pid, signal.SIGKILL)  # the judge ends the worker's uid (strays.py)
    ended = os.WTERMSIG(os.waitpid(pid, 0)[1]) == signal.SIGKILL
    status = jail.lock_status()
    print(json.dumps({{"judge_before": judge_before,
                      "judge_after": [status["CapEff"], status["CapPrm"], status["CapBnd"]],
                      "uid": os.getuid(), "worker": worker, "ended_worker": ended}}))
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="a jail made by another user has one uid")
def test_the_worker_has_a_uid_of_its_own_and_the_judge_keeps_only_cap_kill():
    """Run by root: the judge holds CAP_SETUID and CAP_SETGID through its exec, forks the
    worker onto the jail's second uid; then the worker holds none and the judge CAP_KILL
    only (none in its bounding set), which ends the worker's processes; the worker cannot
    signal, limit, renice or reconfigure the judge (red team 8's routes), or become uid 0
    again."""
    done = _run_in_jail(SPLIT_PROBE.format(jail_file=jail.__file__), extra_keep=[
        os.path.dirname(jail.__file__)])
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    # KILL, SETGID, SETUID, SETPCAP; then KILL alone, effective and permitted
    assert seen["judge_before"] == (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8), seen
    assert seen["judge_after"] == [1 << 5, 1 << 5, 0] and seen["uid"] == 0, seen
    assert seen["ended_worker"], seen
    worker = seen["worker"]
    assert (worker["uid"], worker["gid"], worker["caps"]) == (jail.WORKER_UID,) * 2 + (0,)
    assert worker["reached"] == [], worker


ROOTLESS_PROBE = textwrap.dedent("""
    import ctypes, json, os, resource
    seen = {"uid_map": open("/proc/self/uid_map").read().split(),
            "worker_env": os.environ.get("KERNELKB_JAIL_WORKER_UID")}
    read, write = os.pipe()
    if os.fork() == 0:  # the judge's fork onto the worker's uid, then at the judge
        os.setresgid(1, 1, 1)
        os.setresuid(1, 1, 1)
        # as jail.become_worker: no capability left (the judge's CAP_KILL included)
        capsets = (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()
        assert ctypes.CDLL(None).capset(*capsets) == 0
        refused = {}
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)
        for name, call in (("kill", lambda: os.kill(1, 0)),
                           ("prlimit", lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, limit)),
                           ("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))):
            try:
                call()
                refused[name] = False
            except PermissionError:
                refused[name] = True
        os.write(write, json.dumps(refused).encode())
        os._exit(0)
    os.close(write)
    seen["refused"] = json.loads(os.read(read, 4096))
    print(json.dumps(seen))
""")


def _rootless_user() -> tuple[int, int, tuple[int, int]] | None:
    """A user of this host (not root) owning subordinate uids and gids, where the setuid
    helpers that map them exist: (uid, gid, (first subordinate uid, gid))."""
    import pwd

    if not all(os.access(h, os.X_OK) for h in ("/usr/bin/newuidmap", "/usr/bin/newgidmap")):
        return None
    firsts: list[dict[str, int]] = []
    for table in ("/etc/subuid", "/etc/subgid"):
        try:
            rows = [line.strip().split(":") for line in Path(table).read_text().splitlines()]
        except OSError:
            return None
        firsts.append({r[0]: int(r[1]) for r in rows if len(r) == 3 and r[1].isdigit()})
    for user in pwd.getpwall():
        if user.pw_uid and user.pw_name in firsts[0] and user.pw_name in firsts[1]:
            return user.pw_uid, user.pw_gid, (firsts[0][user.pw_name], firsts[1][user.pw_name])
    return None


@pytest.mark.skipif(os.geteuid() != 0 or _rootless_user() is None,
                    reason="needs root, to run the jail as a user owning subordinate ids "
                           "(/etc/subuid, /etc/subgid, the uidmap package)")
def test_a_user_with_subordinate_ids_gives_the_worker_a_uid_of_its_own():
    """A runner that is not root, as on a workstation: the worker's uid is the user's
    first subordinate one, so it cannot signal, limit or renice the judge."""
    uid, gid, worker_ids = _rootless_user()  # type: ignore[misc]
    folder = tempfile.mkdtemp(prefix="kernelkb_rootless_")
    os.chmod(folder, 0o755)
    Path(folder, "probe.py").write_text(ROOTLESS_PROBE)
    work = Path(folder, "work")
    work.mkdir()
    os.chown(work, uid, gid)
    python = "/usr/bin/python3"  # the host's: this checkout's may sit under root's home
    argv = jail.command([python, "-I", f"{folder}/probe.py"], workdir=str(work),
                        cwd=str(work), hide=[], keep=[folder], unprivileged=True,
                        worker_ids=worker_ids)
    done = subprocess.run([python, *argv[1:]], capture_output=True, text=True, timeout=60,
                          user=uid, group=gid, extra_groups=[], env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert _lines(seen["uid_map"]) == [["0", str(uid), "1"],
                                       [str(jail.WORKER_UID), str(worker_ids[0]), "1"]]
    assert seen["worker_env"] == str(jail.WORKER_UID)
    assert seen["refused"] == {"kill": True, "prlimit": True, "setpriority": True}
