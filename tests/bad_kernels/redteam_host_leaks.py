"""Red team, host leaks (planted; filled in by test_redteam_jail.py):
tries to learn what the jail should hide, from a child Python process (ctypes is refused in
the candidate's own process):
- the host's name (the test passes it in): as a word of /etc/hosts, /etc/hostname,
  /etc/mailname, /proc/sys/kernel/hostname or uname;
- the host's network interfaces: any interface but lo under /sys/class/net, or one of the
  host's MAC addresses (passed in) readable there;
- decoy secrets the test plants: an environment variable (TRITON_API_KEY) of the parent
  process, a file in /root and one in the host's /tmp, searched in this process's
  environment, every visible process's environ, and those two paths;
- the network: a TCP connection to the test's server on the host's loopback and on each of
  the host's addresses, an abstract unix socket the test listens on, and AF_VSOCK, which a
  network namespace does not isolate on kernels without vsock namespaces: binding the vsock
  port the test holds on the host fails with EADDRINUSE when the jail shares the host's
  vsock port space (and with it the hypervisor's listeners); nothing is sent over vsock.
It raises with every attempt that worked, so the test reads them in the error message.
Expected: runtime_error whose message lists nothing but 'uname=...'."""
import os
import re
import socket
import subprocess
import sys

MARKER = "__MARKER__"
HOSTNAME = "__HOSTNAME__"  # empty where the host's name says nothing (localhost)
HOST_MACS = [m for m in "__HOST_MACS__".split("|") if m]
HOST_ADDRS = [a for a in "__HOST_ADDRS__".split("|") if a]
DECOY = "__DECOY__"
DECOY_FILES = [p for p in "__DECOY_FILES__".split("|") if p]
PORT = int("__PORT__")
VSOCK_PORT = int("__VSOCK_PORT__")  # 0: the host has no vsock


def _attempt(found, what, action):
    try:
        result = action()
    except Exception:  # noqa: BLE001 - a refusal is the expected outcome
        return
    if result is not False:
        found.append(what if result is None or result is True else f"{what}: {result}")


def run(x):
    child = subprocess.run([sys.executable, __file__], capture_output=True, text=True)
    raise RuntimeError(child.stdout.strip() or f"the probe failed: {child.stderr[-800:]}")


def _names_host(path):
    words = re.split(r"[\s,.]+", open(path).read())
    return HOSTNAME in words or False


def _connect(address, family=socket.AF_INET):
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(3)
        sock.connect(address)
        sock.sendall(f"jail {MARKER}\n".encode())


def _vsock_shared():
    with socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((socket.VMADDR_CID_ANY, VSOCK_PORT))
        except OSError as exc:
            return f"bind of the host's port {VSOCK_PORT}: {exc.strerror}" if exc.errno == 98 \
                else False
    return False


def _visible_secrets():
    hits = [k for k, v in os.environ.items() if DECOY in v or k == "TRITON_API_KEY"]
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            if DECOY.encode() in open(f"/proc/{pid}/environ", "rb").read():
                hits.append(f"/proc/{pid}/environ")
        except OSError:
            pass
    return hits or False


def probe():
    found = [f"uname={os.uname().nodename}"]
    if HOSTNAME:
        for path in ("/etc/hosts", "/etc/hostname", "/etc/mailname", "/proc/sys/kernel/hostname",
                     "/proc/sys/kernel/domainname"):
            _attempt(found, f"read the host's name '{HOSTNAME}' in {path}",
                     lambda p=path: _names_host(p))
        _attempt(found, "uname gave the host's name", lambda: os.uname().nodename == HOSTNAME)
    _attempt(found, "saw the host's network interfaces in /sys/class/net",
             lambda: sorted(n for n in os.listdir("/sys/class/net") if n != "lo") or False)
    for name in os.listdir("/sys/class/net") if os.path.isdir("/sys/class/net") else ():
        _attempt(found, f"read a host MAC address (/sys/class/net/{name}/address)",
                 lambda n=name: (open(f"/sys/class/net/{n}/address").read().strip()
                                 in HOST_MACS) and n)
    _attempt(found, "found the decoy secret in an environment", _visible_secrets)
    for path in DECOY_FILES:
        _attempt(found, f"read {path}", lambda p=path: DECOY in open(p).read() or False)
    _attempt(found, "connected to the host's loopback server",
             lambda: _connect(("127.0.0.1", PORT)))
    for address in HOST_ADDRS:
        _attempt(found, f"connected to the host's server on {address}",
                 lambda a=address: _connect((a, PORT)))
    _attempt(found, "connected to the host's abstract unix socket",
             lambda: _connect(f"\0kernelkb-redteam-{MARKER}", socket.AF_UNIX))
    if VSOCK_PORT:
        _attempt(found, "shares the host's AF_VSOCK port space", _vsock_shared)
    return "PROBE " + " | ".join(found)


if __name__ == "__main__":
    print(probe())
