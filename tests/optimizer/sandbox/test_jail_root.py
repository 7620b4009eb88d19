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

from kernelkb.optimizer.sandbox import jail, runner

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
        "host": socket.gethostname(),
        "core_limit": resource.getrlimit(resource.RLIMIT_CORE),
        "env": sorted(os.environ),
    }}))
""")


def _run_in_jail(source: str, *, unprivileged: bool | None = None,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    folder = tempfile.mkdtemp(prefix="kernelkb_jail_test_")
    os.chmod(folder, 0o755)  # the jail's root may be an unprivileged host uid
    Path(folder, "probe.py").write_text(source)
    os.chmod(Path(folder, "probe.py"), 0o644)
    with tempfile.TemporaryDirectory(prefix="kernelkb_jail_work_") as work:
        argv = jail.command([sys.executable, "-I", f"{folder}/probe.py"], workdir=work,
                            cwd=work, hide=[], keep=[sys.prefix, sys.base_prefix, folder],
                            unprivileged=unprivileged)
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


def _probe(**kwargs: object) -> dict[str, object]:
    done = _run_in_jail(PROBE.format(paths=HOST_GLOBAL), **kwargs)  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_the_jails_root_is_no_host_root_and_host_global_files_refuse_writes():
    seen = _probe()
    inside, outside, count = seen["uid_map"]
    assert inside == "0" and count == "1"
    if os.geteuid() == 0:
        assert outside == str(jail.JAIL_UID), seen["uid_map"]
        assert jail.mode() == (True, "")
    else:
        assert outside == str(os.geteuid())
    assert seen["opened_for_writing"] == []
    assert seen["kcore"] in (False, 0)  # covered by /dev/null where the kernel has one
    assert seen["host"] == jail.HOST_NAME != socket.gethostname()
    assert seen["core_limit"] == [0, 0]


@pytest.mark.skipif(os.geteuid() != 0, reason="the root-mapped jail is made by root only")
def test_where_the_jails_root_must_be_host_root_the_host_global_files_are_masked():
    seen = _probe(unprivileged=False)
    assert seen["uid_map"] == ["0", "0", "1"]
    assert seen["opened_for_writing"] == []  # read-only binds, not the kernel's uid rule
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
