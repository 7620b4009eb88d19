"""Fills its working tree (a planted candidate for tests/optimizer/sandbox/test_jailbreak.py):
writes 64 MiB chunks until the jail refuses, then raises with how much it wrote.
Expected: runtime_error 'FILLED <bytes> <errno name>', bytes within the tree's size."""
import errno
import os


def run(x):
    written, chunk, why = 0, b"x" * (64 * 2**20), "nothing-refused"
    fd = os.open("fill.bin", os.O_WRONLY | os.O_CREAT)
    try:
        for _ in range(64):  # 4 GiB at most
            written += os.write(fd, chunk)
    except OSError as err:
        why = errno.errorcode.get(err.errno, str(err.errno))
    message = f"FILLED {written} {why}"
    raise RuntimeError(message)
