"""Red team 8 escape probe: floods of output and of the jail's own disks.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). A fresh Python in the
jail fills the working tree, /tmp and /dev/shm until ENOSPC (or 1 GiB each), makes
50,000 empty files, and reports what it managed; run() then writes 256 MiB to its own
stdout and to its stderr (the runner's pipes) and raises an exception whose message is
32 MiB (its report first). What matters is what the host pays: the size of what comes back in the
result (message, text, artifacts), the host's disk and memory during and after, and
whether anything is left behind on the host when the evaluation ends.
"""
import os
import subprocess

CHILD = r'''
import os, sys, errno
def rep(tag, what, detail=""):
    print(tag, what, detail, flush=True)
block = b"x" * (1 << 20)
for folder in (os.path.expanduser("~"), "/tmp", "/dev/shm", os.getcwd()):
    path = os.path.join(folder, "rt8_fill")
    n = 0
    try:
        with open(path, "wb") as f:
            for _ in range(1024):
                f.write(block)
                n += 1
        rep("INFO", f"{folder}: 1 GiB written, no ENOSPC")
    except OSError as e:
        rep("HELD", f"{folder}: filled at {n} MiB", e.strerror)
    try:
        os.unlink(path)
    except OSError:
        pass
made = 0
try:
    os.makedirs("/tmp/rt8_many", exist_ok=True)
    for i in range(50000):
        open(f"/tmp/rt8_many/{i}", "w").close()
        made += 1
    rep("INFO", "50000 files made in /tmp")
except OSError as e:
    rep("HELD", f"files: stopped at {made}", e.strerror)
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
    block = b"y" * (1 << 20)
    for fd in (1, 2):  # the worker's own stdout and stderr: the runner's pipes
        for _ in range(256):
            os.write(fd, block)
    raise RuntimeError("probe report (never ok):\n" + report + "\n" + "z" * (32 << 20))
