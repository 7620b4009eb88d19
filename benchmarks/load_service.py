"""Load on the HTTP service: N concurrent clients retrieving while one client writes.

Starts `kernelkb serve` on loopback over a fresh store (the shipped seeds), runs the
clients for a fixed time and prints requests/s, latency p50/p99, errors, and whether
every read stayed correct (hits for the queried op) while the writes went on.

    python benchmarks/load_service.py --clients 20 --seconds 60
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
OPS = ("softmax", "rmsnorm", "matmul", "attention", "rope", "swiglu")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _record(n: int) -> dict:
    return {"run_id": f"load-{n // 100}", "iteration": n % 100,
            "task": {"op_type": "softmax", "task_id": "softmax", "dtype": "float16"},
            "env": {"gpu_name": "NVIDIA H200", "arch": "sm_90", "triton_version": "3.6.0",
                    "torch_version": "2.11.0"},
            "edit": {"summary": f"load test edit {n}: rows per program {n % 8}",
                     "categories": ["launch_shape"], "config": {"ROWS": n},
                     "child_hash": f"load-child-{n:08d}"},
            "feedback": {"stage": "correctness"}, "verdict": "neutral",
            "provenance": {"agent": "load"}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--writes-per-s", type=float, default=2.0)
    args = parser.parse_args()
    port = _free_port()
    data = tempfile.mkdtemp(prefix="kernelkb-load-")
    env = {**os.environ, "KERNELKB_DATA_DIR": data, "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen([sys.executable, "-m", "kb.cli", "serve", "--port", str(port)],
                              cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and server.poll() is None, "server did not start"
            time.sleep(0.5)
        latencies: list[float] = []
        errors = wrong = writes = 0
        lock = threading.Lock()
        stop = time.monotonic() + args.seconds

        def reader(seed: int) -> None:
            nonlocal errors, wrong
            with httpx.Client(timeout=60) as client:
                n = seed
                while time.monotonic() < stop:
                    op = OPS[n % len(OPS)]
                    n += 1
                    body = {"op_type": op, "gpu_name": "NVIDIA H200", "arch": "sm_90",
                            "feedback_text": f"time {n % 97} ms, bandwidth bound", "k": 5}
                    start = time.perf_counter()
                    try:
                        r = client.post(f"{url}/retrieve", json=body)
                    except httpx.HTTPError:
                        with lock:
                            errors += 1
                        continue
                    took = time.perf_counter() - start
                    ok = r.status_code == 200 and all(
                        h["record"]["task"]["op_type"] == op for h in r.json()["hits"]
                        if h["rung"] in ("same_gpu_triton", "same_gpu", "same_arch"))
                    with lock:
                        latencies.append(took)
                        errors += r.status_code != 200
                        wrong += r.status_code == 200 and not ok

        def writer() -> None:
            nonlocal writes, errors
            with httpx.Client(timeout=60) as client:
                n = 0
                while time.monotonic() < stop:
                    r = client.post(f"{url}/experiences", json=_record(n))
                    with lock:
                        writes += r.status_code in (200, 201)
                        errors += r.status_code not in (200, 201)
                    n += 1
                    time.sleep(1 / args.writes_per_s)

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(args.clients)]
        threads.append(threading.Thread(target=writer))
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - began
        lat = sorted(latencies)
        q = statistics.quantiles(lat, n=100) if len(lat) >= 2 else [float("nan")] * 99
        print(json.dumps({
            "clients": args.clients, "seconds": round(elapsed, 1), "retrieves": len(lat),
            "retrieves_per_s": round(len(lat) / elapsed, 1),
            "p50_ms": round(1000 * q[49], 1), "p99_ms": round(1000 * q[98], 1),
            "errors": errors, "wrong_reads": wrong, "writes_stored": writes,
            "cpus": os.cpu_count()}, indent=2))
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
