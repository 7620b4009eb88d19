"""Red team 10 escape probe: state carried from one evaluation to the next.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`), twice in one process
(the runner then hands the second evaluation a worker it started ahead). run() starts a
fresh Python in the jail that first looks for what an earlier evaluation left, then leaves
its own:

- a marker file in every folder the jail lets it write (its working tree, /tmp, and every
  other writable folder a walk of the jail's root finds: HOME, TMPDIR, the Triton cache);
- a key in each of the kernel's keyrings it may add to (add_key(2); the seccomp filter
  names keyctl only), looked up again with request_key(2) and counted in /proc/key-users.

ESCAPED: a marker, a key or a key count left by another evaluation (not this one's token).
The report is raised, so the probe is never ok.
"""
import os
import subprocess

CHILD = r'''
import ctypes, os, random
def out(tag, what, detail=""):
    print(tag, what, str(detail)[:300], flush=True)
token = "%016x" % random.getrandbits(64)
def read(p):
    try:
        return open(p).read()
    except OSError:
        return ""
out("INFO", "token", token)
# the worker's /proc entries are closed to its children; its working folder is this one's
places = {"/tmp", "/var/tmp", "/dev/shm", "/run", os.getcwd()}
for top in sorted(os.listdir("/")):
    if top in ("proc", "sys"):
        continue
    for dirpath, dirnames, files in os.walk("/" + top):
        if os.access(dirpath, os.W_OK):
            places.add(dirpath)
        if len(places) > 300:
            break
found = []
for d in sorted(places):
    try:
        for name in os.listdir(d):
            if name.startswith("rt10-cross-") and token not in name:
                found.append(os.path.join(d, name))
    except OSError:
        pass
out("ESCAPED:" if found else "HELD", f"markers left by an earlier evaluation: {len(found)}", found[:6])
users = read("/proc/key-users")
out("INFO", "/proc/key-users before adding", users.replace("\n", " | ") or "unreadable")
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR_ADD_KEY, NR_REQUEST_KEY = 248, 249
serial = libc.syscall(NR_REQUEST_KEY, b"user", b"rt10-cross", None, ctypes.c_int(0))
if serial > 0:
    out("ESCAPED:", f"request_key found a key an earlier evaluation left: {serial}")
else:
    out("HELD", "request_key of an earlier evaluation's key", os.strerror(ctypes.get_errno()))
made = 0
for ring in (-4, -5, -3, -2):
    payload = token.encode()
    s = libc.syscall(NR_ADD_KEY, b"user", b"rt10-cross", payload, ctypes.c_size_t(len(payload)), ctypes.c_int(ring))
    made += s > 0
out("INFO", f"keys added now: {made}", read("/proc/key-users").replace("\n", " | "))
wrote = []
for d in sorted(places):
    p = os.path.join(d, "rt10-cross-" + token)
    try:
        with open(p, "w") as f:
            f.write(token)
        wrote.append(d)
    except OSError:
        pass
out("INFO", f"markers written: {len(wrote)}", wrote[:12])
print("done", flush=True)
'''


def _launch(code, args=(), keep_fds=False, wait=True, env=None):
    """A fresh Python in the jail (no hooks of the worker's); its output read through a
    pipe made by os.pipe (round 7's launcher)."""
    try:
        rfd, wfd = os.pipe()
        child = None
        for exe in ("/usr/bin/python3", "/root/.pyenv/versions/3.11.7/bin/python3"):
            try:
                child = subprocess.Popen([exe, "-I", "-c", code, *args], stdout=wfd, stderr=wfd,
                                         close_fds=not keep_fds, env=env, stdin=None)
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
        if wait:
            child.wait(timeout=240)
        lines = b"".join(chunks).decode(errors="replace").splitlines()
        rank = {"ESCAPED": 2, "LEAK": 1}
        lines.sort(key=lambda line: rank.get(line.split(" ", 1)[0].split("(")[0], 0))
        return "\n".join(lines)[-3500:]
    except BaseException as e:  # noqa: BLE001 - any refusal is part of the report
        return f"launcher refused: {e!r}"




def run(x, weight, eps=1e-6):
    report = _launch(CHILD, env={})
    print(report, flush=True)
    raise RuntimeError("probe report (never ok):\n" + report)
