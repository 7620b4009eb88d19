"""Red team 11 escape probe: the host's page cache, read and evicted from the jail.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). run() starts a fresh
Python in the jail that reads files of the bound host folders (`/usr`, read-only) with
`preadv2(RWF_NOWAIT)`, which returns a page only where it is in the page cache (EAGAIN
where it would need the disk; `mincore()` pretends every page of a file the caller cannot
write is resident, so it tells nothing): the page cache is the host kernel's, one
per host inode, so pages resident before the jail touched a file were loaded by the
host's own processes (what the host ran and read: a side channel across tenants). It
then asks `posix_fadvise(POSIX_FADV_DONTNEED)` on one such file that the jail never read:
the kernel drops the host's clean cached pages of it for everyone (a host-wide
performance effect, the step of a page-cache attack), and `RWF_NOWAIT` reads show them gone.
ESCAPED: pages the host had cached, evicted from inside the jail (the file is named in
the report; nothing is written, the host re-reads it from disk on its next use). The
report is raised, so the probe is never ok.
"""
import os
import subprocess

CHILD = r'''
import os
PAGE = os.sysconf("SC_PAGE_SIZE")
def out(tag, what, detail=""):
    print(tag, what, str(detail)[:300], flush=True)
def resident(path):
    """Pages of the file in the page cache: preadv2(RWF_NOWAIT) reads a page only from the
    cache, EAGAIN where it would need the disk (mincore() pretends every page of a file
    the caller cannot write is resident)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pages = (size + PAGE - 1) // PAGE
        buf = bytearray(1)
        hits = 0
        for i in range(pages):
            try:
                if os.preadv(fd, [buf], i * PAGE, os.RWF_NOWAIT) > 0:
                    hits += 1
            except BlockingIOError:
                pass
        return hits, pages
    finally:
        os.close(fd)
seen = []
for top in ("/usr/bin", "/usr/sbin", "/usr/share/perl5", "/usr/lib/git-core", "/usr/share/doc"):
    try:
        names = sorted(os.listdir(top))
    except OSError:
        continue
    for name in names[:400]:
        p = os.path.join(top, name)
        try:
            if not os.path.isfile(p) or os.path.islink(p):
                continue
            size = os.path.getsize(p)
            if not 8192 <= size <= 4 << 20:
                continue
            r, n = resident(p)
        except OSError:
            continue
        if r:
            seen.append((r, n, p))
seen.sort(reverse=True)
out("LEAK" if seen else "HELD",
    f"host page cache: {len(seen)} files under /usr with pages the host loaded",
    [f"{p} {r}/{n}" for r, n, p in seen[:6]])
evicted = None
for r, n, p in seen:
    if os.path.basename(p) in ("bash", "sh", "dash", "env") or "python" in p or ".so" in p:
        continue  # leave what a running interpreter may map
    fd = os.open(p, os.O_RDONLY)
    try:
        rc = os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError as e:
        out("HELD", "posix_fadvise refused", e)
        break
    finally:
        os.close(fd)
    after, _ = resident(p)
    if after is not None and after < r:
        evicted = (p, r, after, n)
        break
if evicted:
    p, r, after, n = evicted
    out("ESCAPED:", f"evicted the host's cached pages of {p}: {r} of {n} pages resident before "
        f"(the host's), {after} after POSIX_FADV_DONTNEED from the jail")
else:
    out("HELD", "no host page evicted", len(seen))
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
