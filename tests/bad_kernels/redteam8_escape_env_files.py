"""Red team 8 escape probe: secrets in the environment and on disk, writes to the host.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`) with secrets planted in
the evaluating process's environment under names a host has (HF_TOKEN, OPENAI_API_KEY,
AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, KERNELKB_SECRET_KEY, PYTHONSTARTUP, LD_PRELOAD,
TRITON_RT8_TOKEN, CUDA_RT8_TOKEN, PATH holding one too): run() starts a fresh Python
in the jail and raises its report. LEAK lines are host facts or secrets seen inside;
ESCAPED a write that reached a host path (checked from the host afterwards too).
"""
import os
import subprocess

CHILD = r'''
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def rep(tag, what, detail=""):
    print(tag, what, detail, flush=True)
MARK = "RT8SECRET"
env = dict(os.environ)
rep("INFO", "environment", " ".join(f"{k}={v[:60]}" for k, v in sorted(env.items())))
for k, v in env.items():
    if MARK in v:
        rep("LEAK", "secret in the environment", k)
try:
    raw = open("/proc/self/environ", "rb").read()
    rep("LEAK" if MARK.encode() in raw else "HELD", "/proc/self/environ holds a secret", str(MARK.encode() in raw))
except OSError as e:
    rep("HELD", "/proc/self/environ", e.strerror)
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            raw = open(f"/proc/{pid}/environ", "rb").read()
            rep("LEAK" if MARK.encode() in raw else "INFO", f"/proc/{pid}/environ", f"{len(raw)} bytes, secret={MARK.encode() in raw}")
        except OSError as e:
            rep("HELD", f"/proc/{pid}/environ", e.strerror)
for path in ("/root/.netrc", "/root/.ssh", "/root/.cache/huggingface/token", "/root/.bash_history",
             "/root/.config", "/home", "/work", "/work/main", "/work/main/.git", "/work/main/.env",
             "/work/main/kb", "/work/main/.venv/pyvenv.cfg", "/etc/shadow", "/etc/machine-id",
             "/etc/environment", "/etc/hostname", "/var/run/secrets", "/run", "/proc/1/cwd",
             "/proc/1/root/work", "/proc/self/cwd"):
    try:
        if os.path.isdir(path):
            rep("LEAK", "listed " + path, ",".join(sorted(os.listdir(path))[:15]))
        else:
            data = open(path, "rb").read(200)
            rep("LEAK", "read " + path, repr(data[:80]))
    except OSError as e:
        rep("HELD", path, e.strerror)
try:
    rep("INFO", "sys.path roots", " ".join(sorted({p.split("/")[1] for p in __import__("sys").path if p.startswith("/")})))
except Exception as e:
    rep("INFO", "sys.path", repr(e))
for path in ("/work/main/RT8_WROTE", "/work/main/kernels/RT8_WROTE", "/etc/RT8_WROTE", "/etc/hosts",
             "/usr/lib/RT8_WROTE", "/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
             "/proc/sys/vm/overcommit_memory", "/sys/kernel/mm/ksm/run", "/dev/shm/RT8_WROTE",
             "/tmp/RT8_WROTE"):
    try:
        mode = "a" if os.path.exists(path) else "w"
        with open(path, mode) as f:
            f.write("")
        rep("WROTE", path, "(a jail-private place unless it shows on the host)")
    except OSError as e:
        rep("HELD", "write " + path, e.strerror)
name = b"rt8-renamed"
rc = libc.sethostname(name, len(name))
rep("INFO", "sethostname in the jail's UTS namespace", "ok" if rc == 0 else os.strerror(ctypes.get_errno()))
rep("INFO", "host name now", socket.gethostname())
mounts = open("/proc/self/mountinfo").read().splitlines()
hostish = sorted({m.split()[3] for m in mounts if m.split()[3] not in ("/",)})[:12]
rep("LEAK", "mount roots named in /proc/self/mountinfo", " ".join(hostish))
print("done", flush=True)
'''


def _launch(code):
    """A fresh Python in the jail; its output read through a pipe made by os.pipe (the
    evaluator refuses open(), which subprocess's own pipes go through)."""
    try:
        rfd, wfd = os.pipe()
        child = None
        for exe in ("/usr/bin/python3", "/root/.pyenv/versions/3.11.7/bin/python3"):
            try:  # an absolute path: Popen then reads no PATH from the environment
                child = subprocess.Popen([exe, "-I", "-c", code], stdout=wfd, stderr=wfd)
                break
            except FileNotFoundError:
                continue
        os.close(wfd)
        chunks = []
        while True:
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        child.wait(timeout=240)
        lines = b"".join(chunks).decode(errors="replace").splitlines()
        rank = {"ESCAPED": 2, "LEAK": 1}  # ESCAPED last: the output keeps its tail
        lines.sort(key=lambda line: rank.get(line.split(" ", 1)[0].split("(")[0], 0))
        return "\n".join(lines)[-3500:]
    except BaseException as e:  # noqa: BLE001 - any refusal is part of the report
        return f"launcher refused: {e!r}"


def run(x, weight, eps=1e-6):
    report = _launch(CHILD)
    print(report, flush=True)  # also in the stdout tail, whatever kind the verdict is
    raise RuntimeError("probe report (never ok):\n" + report)
