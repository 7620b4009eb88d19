"""Red team 9 escape probe: the worker's report rewritten after the worker has exited.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). The worker reports into
a memfd of the judge's. run() makes every descriptor inheritable and starts a fresh
Python (no hooks) that keeps all of them, detaches (a new session, its parent gone, so
the judge, PID 1, is its parent), finds the memfds among its descriptors and says what it
found (which come back in this probe's message). Then it stays behind: for 60 s it reads
each memfd every millisecond and, where it finds this probe's marker (the text of the
exception run() raises, so of the report), writes over it in place, the same length, a
line "ESCAPED: report rewritten after the worker exited ...". If the verdict's message
holds that line, a process of the candidate outlived the worker and wrote the report the
judge read; if it holds the marker, the report was read before or held against it.
"""
import os
import subprocess

MARKER = "RT9-MARKER-" + "Q" * 300

CHILD = r'''
import os, sys, time
marker = sys.argv[1].encode()
worker = os.getppid()  # the worker started this Python
found = []
for fd in range(3, 1024):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if "memfd" in target:
        try:
            flags = open(f"/proc/self/fdinfo/{fd}").read().split("flags:")[1].split()[0]
        except Exception as e:
            flags = repr(e)
        found.append((fd, target, flags))
print("LEAK memfds kept by the child:", found or "none", flush=True)
for fd, target, flags in found:
    try:
        size = os.fstat(fd).st_size
        print(f"LEAK memfd {fd} {target}: {size} bytes, flags {flags}", flush=True)
    except OSError as e:
        print(f"HELD fstat memfd {fd}: {e.strerror}", flush=True)
print("stay", flush=True)
sys.stdout.flush()
os.close(1); os.close(2)
os.open("/dev/null", os.O_WRONLY); os.dup2(1, 2)
if os.fork():
    os._exit(0)
os.setsid()
deadline = time.time() + 60
hits = 0
while time.time() < deadline and found:
    gone = False
    try:
        os.kill(worker, 0)
    except ProcessLookupError:
        gone = True
    for fd, _, _ in found:
        try:
            data = os.pread(fd, 1 << 22, 0)
        except OSError:
            continue
        at = data.find(marker)
        while at >= 0:
            note = (f"ESCAPED: report rewritten by a child of the candidate (pid {os.getpid()}, "
                    f"parent {os.getppid()}, worker gone: {gone}, rewrite {hits + 1}) ").encode()
            note = note.ljust(len(marker), b".")[:len(marker)]
            try:
                os.pwrite(fd, note, at)
                hits += 1
            except OSError:
                pass
            at = data.find(marker, at + 1)
    time.sleep(0.001)
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
                                         close_fds=not keep_fds, env=env)
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
    for fd in range(3, 1024):
        try:
            os.set_inheritable(fd, True)
        except OSError:
            pass
    report = _launch(CHILD, (MARKER,), keep_fds=True, wait=False, env={})
    print(report, flush=True)
    raise RuntimeError("probe report (never ok):\n" + report.replace("stay", "") + "\n" + MARKER)
