"""Red team, survivor (planted; filled in by test_redteam_jail.py):
tries to leave processes running after the evaluation: a double-forked, setsid child that
ignores SIGTERM, SIGHUP, SIGINT and SIGPIPE, one that also moves to a process group of its
own and tries to leave the evaluation's cgroups (writing its pid to the root cgroup.procs),
and a nohup'd shell loop, each with the marker in its command line and sleeping 300 s.
The test looks for the marker in every host process's command line after evaluate returns.
Expected: runtime_error 'PROBE spawned ...' and no process with the marker left on the host."""
import subprocess
import sys

MARKER = "__MARKER__"
DAEMON = """
import os, signal, sys, time
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
if sys.argv[2] == "leave":
    os.setpgid(0, 0)
    for name in ("pids", "memory", "freezer", "unified", "systemd"):
        try:
            with open(f"/sys/fs/cgroup/{name}/cgroup.procs", "w") as handle:
                handle.write(str(os.getpid()))
        except OSError:
            pass
for fd in (0, 1, 2):
    os.close(fd)
time.sleep(300)
"""


def run(x):
    for mode in ("stay", "leave"):
        subprocess.run([sys.executable, "-c", DAEMON, MARKER, mode], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    subprocess.Popen(["nohup", "/bin/sh", "-c", f"while :; do sleep 300; done # {MARKER}"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    raise RuntimeError(f"PROBE spawned survivors {MARKER}")
