"""Red team 9 escape probe: the host seen through the bound /sys.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). The jail binds the
host's /sys read-only and covers the network folders; what else of the host can it read?
run() starts a fresh Python that reads: the cgroup tree (other groups' names, i.e. other
evaluations and tenants, and their member PIDs and memory use), the host's disks (serial
numbers, WWIDs, models), PCI inventory, firmware and hypervisor identifiers (DMI product
UUID and serials, /sys/hypervisor/uuid), the TPM, IMA's measurement log, and the kernel's
module list. ESCAPED: a host-unique identifier (a serial, a UUID, a WWID), another
group's PIDs or memory use, or a cgroup of another evaluation; LEAK: host facts (device
counts, models). The report is raised, so the probe is never ok.
"""
import os
import subprocess

CHILD = r'''
import os, glob
def read(p, n=200):
    try:
        with open(p, "rb") as f:
            return f.read(n).decode(errors="replace").strip()
    except OSError as e:
        return None
def out(tag, what, detail=""):
    print(tag, what, str(detail)[:300], flush=True)
own = read("/proc/self/cgroup", 2000)
out("INFO", "own cgroups", (own or "").replace("\n", " | ")[:300])
groups = []
for root in glob.glob("/sys/fs/cgroup/*"):
    for dirpath, dirnames, files in os.walk(root):
        groups.append(dirpath)
        if len(groups) > 5000:
            break
out("LEAK" if groups else "HELD", f"cgroup folders visible: {len(groups)}", groups[:3])
others = [g for g in groups if "kernelkb" in g.lower()]
mine = (own or "")
foreign = [g for g in others if g.split("/")[-1] not in mine]
if foreign:
    out("ESCAPED:", "other evaluations' cgroups visible", foreign[:5])
owned = [line.split(":", 2)[2] for line in mine.splitlines() if line.count(":") >= 2]
def foreign_group(g):
    rel = "/" + "/".join(g.split("/")[4:])  # the path below the controller's mount
    return rel != "/" and not any(o == rel or o.startswith(rel + "/") for o in owned)
procs = 0
for g in groups[:2000]:
    text = read(g + "/cgroup.procs", 100000)
    if text and foreign_group(g):
        procs += len([p for p in text.split() if p.isdigit()])
out("ESCAPED:" if procs else "HELD", f"{procs} PIDs listed in cgroup.procs of groups not the jail's")
for g in groups[:50]:
    use = read(g + "/memory.usage_in_bytes") or read(g + "/memory.current")
    if use and g.rstrip("/").count("/") <= 4:
        out("ESCAPED:" if g.split("/")[-1] not in mine else "LEAK", f"memory use of {g}", use)
        break
for pat in ("/sys/block/*/device/serial", "/sys/block/*/device/wwid", "/sys/block/*/serial",
            "/sys/block/*/wwid", "/sys/class/nvme/*/serial", "/sys/devices/virtual/dmi/id/product_uuid",
            "/sys/devices/virtual/dmi/id/product_serial", "/sys/devices/virtual/dmi/id/board_serial",
            "/sys/devices/virtual/dmi/id/chassis_serial", "/sys/class/dmi/id/product_uuid",
            "/sys/hypervisor/uuid", "/sys/firmware/efi/efivars/*", "/sys/class/tpm/*/device/description",
            "/sys/kernel/security/ima/ascii_runtime_measurements", "/sys/bus/*/devices/*/serial",
"/sys/class/net/*/address"):
    hits = glob.glob(pat)[:20]
    vals = [(h, read(h, 120)) for h in hits]
    vals = [(h, v) for h, v in vals if v]
    if vals:
        out("ESCAPED:", f"host identifier readable: {pat}", vals[:3])
    else:
        out("HELD", f"{pat}", f"{len(hits)} paths, none readable")
virtio = [(os.path.basename(p), read(p + "/device")) for p in glob.glob("/sys/bus/virtio/devices/*")]
out("LEAK" if virtio else "HELD", f"virtio devices listed: {len(virtio)}", virtio[:6])
models = [(p, read(p)) for p in glob.glob("/sys/block/*/device/model")]
out("LEAK" if models else "HELD", "disk models", models[:4])
pci = glob.glob("/sys/bus/pci/devices/*")
out("LEAK" if pci else "HELD", f"PCI devices listed: {len(pci)}", [(os.path.basename(p), read(p + "/vendor"), read(p + "/device")) for p in pci[:4]])
mods = os.listdir("/sys/module") if os.path.isdir("/sys/module") else []
out("LEAK" if mods else "HELD", f"kernel modules listed: {len(mods)}", sorted(mods)[:8])
out("INFO", "uevent seqnum", read("/sys/kernel/uevent_seqnum"))
print("done", flush=True)
'''


def _launch(code, args=(), keep_fds=False, wait=True):
    """A fresh Python in the jail (no hooks of the worker's); its output read through a
    pipe made by os.pipe (round 7's launcher)."""
    try:
        rfd, wfd = os.pipe()
        child = None
        for exe in ("/usr/bin/python3", "/root/.pyenv/versions/3.11.7/bin/python3"):
            try:
                child = subprocess.Popen([exe, "-I", "-c", code, *args], stdout=wfd, stderr=wfd,
                                         close_fds=not keep_fds)
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
    report = _launch(CHILD)
    print(report, flush=True)
    raise RuntimeError("probe report (never ok):\n" + report)
