"""Red team, output flood (planted; run by test_redteam_jail.py):
tries to make the runner on the host hold or store unbounded output: 256 MiB to stdout and
256 MiB to stderr (lines and one line with no newline), 512 MiB into every writable
descriptor it inherited (the worker's report and data channels, pipes written without
blocking), then an exception whose message is 64 MiB. The test samples the runner's
resident memory and the host's /tmp while it runs and reads the result's sizes.
Expected: a failed evaluation (runtime_error or crash) whose text and artifacts stay a few
KiB, with the runner's memory and the host's disk unchanged."""
import fcntl
import os
import sys

MIB = 1 << 20


def _flood_descriptors():
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd < 3:
            continue
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            if flags & os.O_ACCMODE == os.O_RDONLY:
                continue
            fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
            block = b"{" * MIB
            for _ in range(512):
                os.write(fd, block)
        except OSError:
            pass


def run(x):
    line = ("y" * 1023 + "\n") * 1024
    for _ in range(128):
        sys.stdout.write(line)
        sys.stderr.write(line)
    blob = "z" * MIB
    for _ in range(128):
        sys.stdout.write(blob)
        sys.stderr.write(blob)
    sys.stdout.flush()
    sys.stderr.flush()
    _flood_descriptors()
    raise RuntimeError("w" * (64 * MIB))
