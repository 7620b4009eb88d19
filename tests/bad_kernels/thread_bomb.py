"""Processes and threads without end (a planted candidate for
tests/optimizer/sandbox/test_jailbreak.py): starts sleeping threads until one is refused.
Raises 'THREADS <started>'."""
import threading
import time


def run(x):
    started = 0
    try:
        for _ in range(5000):
            threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
            started += 1
    except RuntimeError:
        pass
    raise RuntimeError(f"THREADS {started}")
