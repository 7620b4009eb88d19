"""Red team of the jail: the planted candidates tests/bad_kernels/redteam_*.py run through
evaluate with the in-process rule on surroundings off, so the jail holds alone. Each
asserts what got out from inside (the probe's own report) and from the host (marker files,
processes left behind, decoy secrets in the result, the runner's memory and disk)."""
import contextlib
import fcntl
import os
import secrets
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import evaluate, jail

pytestmark = pytest.mark.skipif(jail.unavailable_reason() is not None,
                                reason=f"no jail here: {jail.unavailable_reason()}")

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"
PROJECT = Path(__file__).resolve().parents[3]
PREFIX = Path(os.path.realpath(sys.executable)).parent.parent
SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGQUIT", "SIGXCPU",
           "SIGVTALRM", "SIGPROF", "SIGWINCH")


def _evaluate(name, **fill):
    source = (BAD / f"redteam_{name}.py").read_text()
    for key, value in fill.items():
        source = source.replace(f"__{key.upper()}__", str(value))
    return evaluate("softmax", source, shapes=[(1, 7)], seeds=1, timeout_s=120,
                    refuse_surroundings=False)


def _everything(result):
    """All the text the runner hands back: the decoys must be in none of it."""
    return "\n".join([result.text or "", result.error_message or "",
                      *(str(v) for v in result.artifacts.values())])


def _probe_items(result):
    message = result.error_message or ""
    assert result.error_kind == "runtime_error" and "PROBE " in message, (
        f"the probe did not report: {result.error_kind}: {message[:600]}")
    return message.split("PROBE ", 1)[1].splitlines()[0].split(" | ")


def _marker_processes(marker):
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
    return found


def _marker_paths(marker, roots=("/tmp", "/dev/shm"), depth=4):
    found = []
    for root in roots:
        top = root.rstrip("/").count("/")
        for folder, dirs, files in os.walk(root):
            if folder.count("/") - top >= depth:
                dirs[:] = []
            found += [os.path.join(folder, n) for n in dirs + files if marker in n]
    return found


def _kill(pids):
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)


@contextlib.contextmanager
def _listeners(marker):
    """A TCP server on every host address, an abstract unix socket and a vsock port, all
    recording whoever reaches them."""
    reached = []
    tcp = socket.socket()
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("0.0.0.0", 0))
    tcp.listen(8)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(f"\0kernelkb-redteam-{marker}")
    unix.listen(8)
    vsock, vsock_port = None, 0
    with contextlib.suppress(OSError, AttributeError):
        vsock = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
        vsock.bind((socket.VMADDR_CID_ANY, socket.VMADDR_PORT_ANY))
        vsock.listen(8)
        vsock_port = vsock.getsockname()[1]
    servers = [s for s in (tcp, unix, vsock) if s is not None]
    stop = threading.Event()

    def accept(server):
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                peer, _ = server.accept()
                with peer:
                    peer.settimeout(1)
                    with contextlib.suppress(OSError):
                        reached.append(f"{server.family.name}: {peer.recv(100)!r}")

    threads = [threading.Thread(target=accept, args=(s,), daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    try:
        yield tcp.getsockname()[1], vsock_port, reached
    finally:
        stop.set()
        for thread in threads:
            thread.join(2)
        for server in servers:
            server.close()


def _host_addresses():
    addresses = []
    for _, name in socket.if_nameindex():
        if name == "lo":
            continue
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
            addresses.append(socket.inet_ntoa(packed[20:24]))  # SIOCGIFADDR
    return addresses


def _host_macs():
    macs = []
    for folder in Path("/sys/class/net").glob("*"):
        with contextlib.suppress(OSError):
            mac = (folder / "address").read_text().strip()
            if folder.name != "lo" and mac.strip("0:"):
                macs.append(mac)
    return macs


def test_signals_to_the_judge_change_no_verdict():
    result = _evaluate("judge_signal")
    message = result.error_message or ""
    # the zeros come from PyTorch, which the worker refuses first (torch_compute); the
    # judge refuses them as wrong_result: either is the kernel's own verdict, a crash is not
    assert result.error_kind in ("wrong_result", "torch_compute"), (
        f"a signal to the judge set the verdict: {result.error_kind}: {message[:400]}")
    assert not [s for s in SIGNALS if s in message], message[:400]


def test_the_judge_is_out_of_reach():
    """The judge's /proc/<pid>/oom_score_adj and its signals: the worker runs as the jail's
    second uid, so neither is its to touch."""
    items = _probe_items(_evaluate("judge_reach"))
    assert items[0].startswith("judge=")
    assert items[1:] == [], f"reached the judge: {items[1:]}"


def test_the_host_stays_unknown_and_unreachable(monkeypatch):
    marker = secrets.token_hex(6)
    decoy = f"decoy-{secrets.token_hex(8)}"
    monkeypatch.setenv("TRITON_API_KEY", decoy)
    decoy_files = [Path.home() / f".kernelkb_redteam_{marker}",
                   Path(tempfile.gettempdir()) / f"kernelkb_redteam_{marker}"]
    written = []
    for path in decoy_files:
        with contextlib.suppress(OSError):
            path.write_text(decoy)
            written.append(path)
    hostname = socket.gethostname()
    try:
        with _listeners(marker) as (port, vsock_port, reached):
            result = _evaluate(
                "host_leaks", marker=marker, decoy=decoy, port=port, vsock_port=vsock_port,
                hostname="" if hostname in ("localhost", "kernelkb-jail") else hostname,
                host_macs="|".join(_host_macs()), host_addrs="|".join(_host_addresses()),
                decoy_files="|".join(str(p) for p in written))
            time.sleep(0.5)
    finally:
        for path in written:
            path.unlink()
    assert decoy not in _everything(result), "a decoy secret came back in the result"
    assert reached == [], f"the jail reached the host's listeners: {reached}"
    items = _probe_items(result)
    assert items[0] == "uname=kernelkb-jail", items[0]
    assert items[1:] == [], f"learned or reached from the jail: {items[1:]}"


def test_the_host_stays_unwritten():
    marker = secrets.token_hex(6)
    host_paths = [PROJECT / f"redteam_{marker}_via_link"] + [
        Path(folder) / f"redteam_{marker}" for folder in (
            PROJECT, PROJECT / "kernelkb", PROJECT / "kernels", PROJECT / "optimizer",
            PROJECT / ".venv", PREFIX, "/usr", "/usr/bin", "/etc", "/sys/fs/cgroup", "/tmp",
            "/dev/shm", "/dev", Path.home())]
    try:
        result = _evaluate("host_writes", marker=marker, project=PROJECT)
        time.sleep(0.5)
        present = [str(p) for p in host_paths if os.path.lexists(p)]
        present += _marker_paths(marker)
        keys = Path("/proc/keys").read_text() if os.path.exists("/proc/keys") else ""
    finally:
        for path in host_paths:
            with contextlib.suppress(OSError):
                path.unlink()
    assert present == [], f"the jail wrote on the host: {present}"
    assert f"redteam_{marker}" not in keys, "the jail added a key the host's /proc/keys shows"
    items = _probe_items(result)
    if os.geteuid() == 0:
        # the judge's uid 0 as host nobody, the worker's own uid beside it
        assert items[0] == (f"uid_map=0 {jail.JAIL_UID} 1 {jail.WORKER_UID} "
                            f"{jail.WORKER_HOST_UID} 1"), items[0]
    assert items[1:] == [], f"changed the host or gained privilege: {items[1:]}"


def test_no_process_outlives_the_evaluation():
    marker = secrets.token_hex(6)
    result = _evaluate("survivor", marker=marker)
    assert f"spawned survivors {marker}" in (result.error_message or ""), result.error_message
    time.sleep(1.0)
    left = _marker_processes(marker)
    _kill(left)
    assert left == [], f"processes outlived the evaluation: {left}"


def _rss():
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _free(path):
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def test_output_costs_the_runner_nothing():
    rss0, free0 = _rss(), _free(tempfile.gettempdir())
    peak, low = [rss0], [free0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak.append(_rss())
            low.append(_free(tempfile.gettempdir()))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = _evaluate("output_flood")
    finally:
        done.set()
        sampler.join(2)
    assert not result.ok and result.error_kind in ("runtime_error", "crash"), result.error_kind
    grown, used = max(peak) - rss0, free0 - min(low)
    assert grown < 128 << 20, f"the runner's memory grew by {grown >> 20} MiB"
    assert used < 512 << 20, f"the host's {tempfile.gettempdir()} lost {used >> 20} MiB"
    sizes = {k: len(str(v)) for k, v in result.artifacts.items()}
    sizes["text"], sizes["error_message"] = len(result.text), len(result.error_message or "")
    assert max(sizes.values()) < 64 << 10, sizes
