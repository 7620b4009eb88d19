"""Escape probe (a planted candidate, filled in by tests/optimizer/sandbox/test_containment.py):
tries to write the project and its task modules, read a fake ~/.ssh/id_rsa and a fake store,
read API keys from its environment, reach a loopback server, and leave a setsid child
running. It raises with what it managed, so the test can read it in the error message.
Expected: runtime_error whose message lists nothing but 'cwd=...'."""
import os
import socket
import subprocess
import sys

PROJECT = "__PROJECT__"
FAKE_HOME = "__FAKE_HOME__"
STORE = "__STORE__"
PORT = int("__PORT__")
MARKER = "__MARKER__"


def _attempt(found, what, action):
    try:
        result = action()
    except Exception:  # noqa: BLE001 - a refusal is the expected outcome
        return
    found.append(what if result is None else f"{what}: {result}")


def run(x):
    found = [f"cwd={os.getcwd()}"]
    _attempt(found, "wrote the project root",
             lambda: open(os.path.join(PROJECT, f"pwned_{MARKER}"), "w").write("x") and None)
    _attempt(found, "wrote a task module",
             lambda: open(os.path.join(PROJECT, "kernels", "softmax.py"), "a").write("") and None)
    _attempt(found, "read the ssh key",
             lambda: open(os.path.join(FAKE_HOME, ".ssh", "id_rsa")).read().strip())
    _attempt(found, "read the store", lambda: open(STORE).read().strip())
    for name in ("OPENAI_API_KEY", "KERNELKB_API_TOKEN"):
        if os.environ.get(name):
            found.append(f"env {name}={os.environ[name]}")
    _attempt(found, "connected to the loopback server",
             lambda: socket.create_connection(("127.0.0.1", PORT), timeout=3).close())
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", MARKER],
                     start_new_session=True, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    raise RuntimeError("PROBE " + " | ".join(found))
