"""Memory through children (a planted candidate for tests/optimizer/sandbox/test_jailbreak.py):
three child processes each touch 1600 MiB at once. A limit per process lets all three
live; a limit on the evaluation's tree kills at least one. Raises 'CHILDREN <exit codes>'."""
import subprocess
import sys

HOLD = "import time; b = b'x' * (1600 * 2**20); time.sleep(8)"


def run(x):
    children = [subprocess.Popen([sys.executable, "-c", HOLD]) for _ in range(3)]
    codes = [c.wait() for c in children]
    raise RuntimeError(f"CHILDREN {codes}")
