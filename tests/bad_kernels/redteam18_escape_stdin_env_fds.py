"""Red team 18 escape probe: what of the runner's process reaches a process the candidate
starts in the jail: its stdin, its environment, its descriptors.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`), as the earlier escape
probes are; the runner's stdin is a file holding a token and its environment holds
secrets under common names (HF_TOKEN, OPENAI_API_KEY, KERNELKB_API_TOKEN, ...) and host
paths under the toolchain names (TRITON_PTXAS_PATH, CUDA_HOME, LD_LIBRARY_PATH, ...).
run() forks and execs a fresh Python (os.fork + os.execv: the environment the child gets
is the worker's C environ, never read through os.environ) that reports:

- its descriptors and what fd 0 is; a non-blocking read of fd 0 (a runner started as
  `kernelkb optimize ... < prompt.txt`, or a CI step fed a token on stdin);
- the size and first bytes of each inherited memfd (the report and the data channel);
- its environment: every name, and every value holding the host's marker.

LEAK: a host value reaching the jail; ESCAPED: the stdin token or a secret's value. The
report is raised, so the probe is never ok.
"""
import os

CHILD = r'''
import os
def out(tag, what, detail=""):
    print(tag, what, str(detail)[:400], flush=True)
fds = []
for fd in sorted(int(f) for f in os.listdir("/proc/self/fd")):
    try:
        fds.append((fd, os.readlink("/proc/self/fd/%d" % fd)))
    except OSError as e:
        fds.append((fd, e.strerror))
out("INFO", "descriptors", fds)
try:
    os.set_blocking(0, False)
    got = os.read(0, 300)
except OSError as e:
    got = e.strerror.encode()
out("ESCAPED:" if b"STDIN_TOKEN" in got else "HELD", "stdin", got)
for fd, what in fds:
    if "memfd" in str(what):
        try:
            out("INFO", "memfd %d %s size %d" % (fd, what, os.fstat(fd).st_size), os.pread(fd, 160, 0))
        except OSError as e:
            out("INFO", "memfd %d" % fd, e.strerror)
env = [e for e in open("/proc/self/environ", "rb").read().split(b"\0") if e]
out("INFO", "environment names", [e.split(b"=")[0].decode() for e in env])
secrets = [e.decode() for e in env if b"SECRET-" in e]
out("ESCAPED:" if secrets else "HELD", "secret values", secrets)
paths = [e.decode() for e in env if b"alice-secret" in e]
out("LEAK" if paths else "HELD", "host paths", paths)
'''


def _launch(code):
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(wfd, 1)
        os.dup2(wfd, 2)
        os.execv("/usr/bin/python3", ["python3", "-I", "-c", code])
    os.close(wfd)
    chunks = []
    while True:
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.waitpid(pid, 0)
    lines = b"".join(chunks).decode(errors="replace").splitlines()
    rank = {"ESCAPED:": 0, "LEAK": 1, "HELD": 2}
    lines.sort(key=lambda line: rank.get(line.split(" ", 1)[0], 3))
    return "\n".join(lines)


def run(x, weight, eps=1e-6):
    report = _launch(CHILD)
    print(report, flush=True)
    raise RuntimeError("probe report (never ok):\n" + report)
