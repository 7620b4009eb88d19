"""Load on the HTTP service: N concurrent clients retrieving, with and without a writer.

One command, self-contained: it builds a temporary store (the shipped seeds plus
``--extra`` fabricated records, through the CLI), starts ``kernelkb serve`` on a free
loopback port, and runs each phase ``--repeat`` times:

- ``read``: ``--clients`` clients (threads spread over ``--client-processes`` processes,
  as separate agents would be) post ``/retrieve`` back to back for ``--seconds``;
- ``read+write``: the same, while one more client posts batches of new records
  (``--writes-per-s`` records a second) through ``/experiences/batch``.

Queries cycle over the six ops and two GPUs; a ``--fresh`` share of them carry feedback
text never seen before (the embedding cache misses, as for an optimizer's new candidate),
the rest repeat texts from a pool (each pool text once per op: until the pool has been
asked, those miss too; ``embedded_share`` is the share the server actually embedded,
from its /stats counters). Several ``--fresh`` values sweep that cost and plot it.

A read is correct when it answers 200 and every hit of an own-op rung is of the queried
op; after the writes, every acknowledged record must be listed and have its vector (rows =
vectors). Printed per run: requests/s, p50/p95/p99, errors, wrong reads, the server's and
the clients' CPU time per request, and the load average of the machine (the clients run
on the same cores).
Results go to benchmarks/results/load_service.{md,json} (and .png with a sweep).

    python benchmarks/load_service.py                       # 20 clients, 3 x 30 s a phase
    python benchmarks/load_service.py --clients 20 --seconds 60 --repeat 5
    python benchmarks/load_service.py --fresh 0 0.2 0.5 1 --repeat 2   # the cost of embedding
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
OPS = ("softmax", "rmsnorm", "matmul", "attention", "rope", "swiglu")
GPUS = (("NVIDIA H200", "sm_90"), ("NVIDIA A100-SXM4-80GB", "sm_80"))
OWN_RUNGS = ("same_gpu_triton", "same_gpu", "same_arch")
PHRASES = ("bandwidth bound, {n}% of peak", "compile error: out of shared memory",
           "time {n} ms, latency bound on small rows", "register spills {n}, occupancy low",
           "numerics mismatch max abs err 1e-{n}", "launch overhead dominates at batch {n}")
CATEGORIES = ("tiling", "warps_stages", "vectorization", "launch_shape", "fusion", "masking")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fabricated(n: int, tag: str = "load") -> dict[str, Any]:
    """A clearly fabricated experience record (provenance says so); ``n`` varies it."""
    rng = random.Random(n)
    op = OPS[n % len(OPS)]
    gpu, arch = GPUS[(n // len(OPS)) % len(GPUS)]
    category = CATEGORIES[n % len(CATEGORIES)]
    block = 2 ** rng.randint(5, 12)
    verdict = rng.choice(("improved", "improved", "neutral", "regressed", "failed"))
    timed = verdict != "failed"
    speedup = round(rng.uniform(0.6, 1.8), 3) if timed else None
    return {
        "run_id": f"{tag}-{n // 50}", "iteration": n % 50,
        "task": {"op_type": op, "task_id": op, "dtype": "float16"},
        "env": {"gpu_name": gpu, "arch": arch, "triton_version": "3.6.0",
                "torch_version": "2.11.0"},
        "edit": {"summary": f"{category}: BLOCK {block} with {rng.choice((2, 4, 8))} warps, "
                            f"{rng.choice(PHRASES).format(n=n % 90)}",
                 "categories": [category], "config": {"BLOCK": block, "N": n},
                 "diff": f"-BLOCK = 128\n+BLOCK = {block}",
                 "child_hash": f"{tag}-child-{n:08d}"},
        "feedback": {"stage": "performance" if timed else "compile",
                     "timing_available": timed, "time_ms": 0.5 if timed else None,
                     "baseline_ms": 0.6 if timed else None, "speedup_vs_parent": speedup,
                     "error_kind": None if timed else "compile_error",
                     "error_message": None if timed else "out of shared memory",
                     "text": "fabricated by benchmarks/load_service.py"},
        "verdict": verdict,
        "provenance": {"agent": "load", "source": "benchmarks/load_service.py (fabricated)"},
    }


# -- the server ---------------------------------------------------------------------
class Server:
    """``kernelkb serve`` over a temporary seeded store (plus fabricated records)."""

    def __init__(self, extra: int, workers: int | None, store: Path | None = None) -> None:
        self.keep = store is not None
        self.data = store or Path(tempfile.mkdtemp(prefix="kernelkb-load-"))
        self.data.mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELKB_")}
        self.env.update(KERNELKB_DATA_DIR=str(self.data), HF_HUB_OFFLINE="1")
        self.extra = extra
        self.port = free_port()
        self.workers = workers
        self.proc: subprocess.Popen[bytes] | None = None

    def _cli(self, *args: str) -> None:
        subprocess.run([sys.executable, "-m", "kernelkb", *args], cwd=REPO, env=self.env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self) -> None:
        built = self.data / "built"
        if not built.exists():
            self._build()
            built.write_text(str(self.extra))
        self._serve()

    def _build(self) -> None:
        self._cli("seed")
        if self.extra:
            path = self.data / "extra.jsonl"
            path.write_text("".join(json.dumps(fabricated(n)) + "\n" for n in range(self.extra)))
            self._cli("ingest", str(path))

    def _serve(self) -> None:
        cmd = [sys.executable, "-m", "kernelkb", "serve", "--port", str(self.port)]
        if self.workers:
            cmd += ["--workers", str(self.workers)]
        self.log = open(self.data / "serve.log", "wb")  # noqa: SIM115  (closed in stop)
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 600
        while True:
            try:
                if request(self.port, "GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start; see {self.data / 'serve.log'}")
            time.sleep(0.5)

    def cpu_seconds(self) -> float:
        """User + system CPU of the server and its worker processes."""
        assert self.proc is not None
        pids = [self.proc.pid] + _children(self.proc.pid)
        total = 0
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
            except (OSError, IndexError, ValueError):
                continue
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.log.close()
        if not self.keep:
            shutil.rmtree(self.data, ignore_errors=True)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def request(port: int, method: str, path: str, body: bytes | None = None,
            conn: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body,
                     headers={"Content-Type": "application/json"} if body else {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        if own:
            conn.close()


# -- the clients --------------------------------------------------------------------
class Phase:
    """Counters of one timed phase, shared by its client threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.errors = 0
        self.wrong = 0
        self.written: list[str] = []
        self.write_errors = 0
        self.duplicates = 0  # writes the store already had: no write work was done


def query_body(n: int, rng: random.Random, fresh: float, pool: int) -> tuple[str, bytes]:
    op = OPS[n % len(OPS)]
    gpu, arch = GPUS[rng.randrange(len(GPUS))]
    if rng.random() < fresh:  # a text no query had: the embedding cache misses
        text = f"{rng.choice(PHRASES).format(n=rng.randrange(10**6))} after edit " \
               f"{time.monotonic_ns()}"
    else:
        k = rng.randrange(pool)
        text = f"{PHRASES[k % len(PHRASES)].format(n=k)} (pool {k})"
    body = {"op_type": op, "gpu_name": gpu, "arch": arch, "triton_version": "3.6.0",
            "feedback_text": text, "k": 5}
    return op, json.dumps(body).encode()


def reader(port: int, phase: Phase, stop: float, seed: int, fresh: float, pool: int) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    n = seed
    while time.monotonic() < stop:
        op, body = query_body(n, rng, fresh, pool)
        n += 1
        start = time.perf_counter()
        try:
            status, data = request(port, "POST", "/retrieve", body, conn)
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            with phase.lock:
                phase.errors += 1
            continue
        took = time.perf_counter() - start
        ok = status == 200 and all(h["record"]["task"]["op_type"] == op
                                   for h in json.loads(data)["hits"] if h["rung"] in OWN_RUNGS)
        with phase.lock:
            phase.latencies.append(took)
            phase.errors += status != 200
            phase.wrong += status == 200 and not ok
    conn.close()


def reader_group(port: int, stop: float, seeds: list[int], fresh: float, pool: int,
                 out: Any) -> None:
    """One client process: a reader thread per seed; puts (latencies, errors, wrong, CPU
    seconds of this process)."""
    phase = Phase()
    cpu = time.process_time()
    threads = [threading.Thread(target=reader, args=(port, phase, stop, seed, fresh, pool))
               for seed in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((phase.latencies, phase.errors, phase.wrong, time.process_time() - cpu))


def writer(port: int, phase: Phase, stop: float, per_s: float, first: int, tag: str) -> None:
    """Posts batches of new records, ``per_s`` records a second in batches of 5. ``tag``
    is new for each invocation, so a kept ``--store`` gets new records, not duplicates."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    n = first
    batch = 5
    next_at = time.monotonic()
    while time.monotonic() < stop:
        records = [fabricated(n + i, tag=tag) for i in range(batch)]
        n += batch
        try:
            status, data = request(port, "POST", "/experiences/batch",
                                   json.dumps(records).encode(), conn)
        except (OSError, http.client.HTTPException):
            status, data = 0, b""
        with phase.lock:
            if status == 200:
                report = json.loads(data)
                phase.written += report["accepted"]
                phase.duplicates += len(report.get("duplicates", []))
            else:
                phase.write_errors += 1
        next_at += batch / per_s
        time.sleep(max(0.0, next_at - time.monotonic()))
    conn.close()


def phase_name(with_writer: bool) -> str:
    return "read+write" if with_writer else "read"


def query_counts(port: int) -> dict[str, int]:
    """The server's query-embedding counters (asked, cached, embedded, batches)."""
    return json.loads(request(port, "GET", "/stats")[1]).get("query_embedding", {})


def run_phase(server: Server, args: argparse.Namespace, with_writer: bool, first: int,
              run: int, fresh: float | None = None) -> dict[str, Any]:
    """One timed phase; ``fresh``: the share of new query texts (default ``--fresh``)."""
    fresh = args.fresh[0] if fresh is None else fresh
    phase = Phase()
    counts_before = query_counts(server.port)
    load_before = os.getloadavg()[0]
    cpu_before = server.cpu_seconds()
    stop = time.monotonic() + args.seconds
    # each phase its own query sequence
    seed = 1000 * (2 * run + with_writer) + round(1000 * fresh) * 10**6
    # the readers in --client-processes processes (threads within each): one process of 20
    # threads adds its own GIL queueing to every latency it measures
    groups = [list(range(g, args.clients, args.client_processes))
              for g in range(args.client_processes)]
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    procs = [context.Process(target=reader_group, args=(server.port, stop, [seed + i for i in g],
                                                        fresh, args.pool, results))
             for g in groups if g]
    threads = []
    if with_writer:
        threads.append(threading.Thread(target=writer, args=(server.port, phase, stop,
                                                             args.writes_per_s, first,
                                                             args.write_tag)))
    began = time.monotonic()
    for p in procs:
        p.start()
    for t in threads:
        t.start()
    client_cpu = 0.0
    for _ in procs:
        latencies, errors, wrong, cpu_s = results.get(timeout=args.seconds + 300)
        phase.latencies += latencies
        phase.errors += errors
        phase.wrong += wrong
        client_cpu += cpu_s
    for p in procs:
        p.join()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    cpu = server.cpu_seconds() - cpu_before
    counts = query_counts(server.port)
    embedded = counts.get("embedded", 0) - counts_before.get("embedded", 0)
    batches = counts.get("batches", 0) - counts_before.get("batches", 0)
    lat = sorted(phase.latencies)
    q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) >= 2 else [0.0] * 99
    row: dict[str, Any] = {
        "phase": phase_name(with_writer), "run": run, "fresh": fresh,
        # what the server embedded: new texts, and pool texts it had not cached yet
        "embedded_share": round(embedded / max(1, len(lat)), 3),
        "texts_per_batch": round(embedded / batches, 2) if batches else None,
        "clients": args.clients, "client_processes": len(procs),
        "seconds": round(elapsed, 1), "retrieves": len(lat),
        "req_per_s": round(len(lat) / elapsed, 1),
        "p50_ms": round(1000 * q[49], 1), "p95_ms": round(1000 * q[94], 1),
        "p99_ms": round(1000 * q[98], 1), "max_ms": round(1000 * lat[-1], 1) if lat else 0,
        "errors": phase.errors, "wrong_reads": phase.wrong,
        "server_cpu_ms_per_req": round(1000 * cpu / max(1, len(lat)), 2),
        "client_cpu_ms_per_req": round(1000 * client_cpu / max(1, len(lat)), 2),
        "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
    }
    if with_writer:
        row.update(records_written=len(phase.written), write_errors=phase.write_errors,
                   write_duplicates=phase.duplicates,
                   **check_writes(server.port, phase.written))
    return row


def check_writes(port: int, written: list[str]) -> dict[str, Any]:
    """Every acknowledged record is listed, and rows = vectors."""
    missing = sum(request(port, "GET", f"/experiences/{i}")[0] != 200 for i in written)
    stats = json.loads(request(port, "GET", "/stats")[1])
    return {"written_missing": missing,
            "rows_eq_vectors": stats["experiences"] == stats["vectors"]}


# -- profile ------------------------------------------------------------------------
def profiler(server: Server, args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], Path]:
    """py-spy sampling every thread of the server for the coming phase (raw stacks)."""
    assert server.proc is not None
    out = server.data / "profile.txt"
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    proc = subprocess.Popen([spy, "record", "-p", str(server.proc.pid), "-d",
                             str(int(args.seconds)), "-r", "50", "-f", "raw", "-o", str(out),
                             "--subprocesses"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    return proc, out


def profile_summary(proc: subprocess.Popen[bytes], out: Path, top: int = 25) -> str:
    """Share of the samples in which each function was on the stack (threads waiting for
    work included, so the shares of request handling show how busy the server was)."""
    proc.wait(timeout=120)
    if not out.exists():
        return "py-spy wrote no profile (not installed, or not allowed to attach)"
    inclusive: dict[str, int] = {}
    total = 0
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        total += int(count)
        for name in {frame.split(" (")[0] for frame in stack.split(";")}:
            inclusive[name] = inclusive.get(name, 0) + int(count)
    ranked = sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]
    return "\n".join([f"profile: {total} samples", *(f"{100 * n / total:5.1f}%  {name}"
                                                     for name, n in ranked)])


# -- output -------------------------------------------------------------------------
COLUMNS = ("phase", "run", "fresh", "embedded_share", "req_per_s", "p50_ms", "p95_ms",
           "p99_ms", "errors", "wrong_reads", "server_cpu_ms_per_req", "client_cpu_ms_per_req",
           "load_before", "load_after", "records_written", "write_duplicates",
           "written_missing", "rows_eq_vectors")


def table(rows: list[dict[str, Any]]) -> str:
    head = "| " + " | ".join(COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
    body = ["| " + " | ".join(str(r.get(c, "")) for c in COLUMNS) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for name, fresh in dict.fromkeys((r["phase"], r["fresh"]) for r in rows):
        runs = [r for r in rows if r["phase"] == name and r["fresh"] == fresh]
        if runs:
            out.append({"phase": name, "fresh": fresh, "runs": len(runs),
                        "median_embedded_share": statistics.median(
                            r["embedded_share"] for r in runs),
                        "median_req_per_s": statistics.median(r["req_per_s"] for r in runs),
                        "median_p50_ms": statistics.median(r["p50_ms"] for r in runs),
                        "median_p99_ms": statistics.median(r["p99_ms"] for r in runs),
                        "errors": sum(r["errors"] for r in runs),
                        "wrong_reads": sum(r["wrong_reads"] for r in runs)})
    return out


GOAL_REQ_PER_S, GOAL_P99_MS = 100, 250  # issue 16's goal for 20 clients on 2 cores


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Requests/s and p99 against the share of requests the server had to embed, one
    point per run, read-only and with the writer, with the goal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rate, tail) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for name, marker in (("read", "o"), ("read+write", "s")):
        mine = [r for r in rows if r["phase"] == name]
        x = [r["embedded_share"] for r in mine]
        rate.scatter(x, [r["req_per_s"] for r in mine], marker=marker, label=name)
        tail.scatter(x, [r["p99_ms"] for r in mine], marker=marker, label=name)
    rate.axhline(GOAL_REQ_PER_S, color="grey", linestyle="--", label="goal (at least)")
    tail.axhline(GOAL_P99_MS, color="grey", linestyle="--", label="goal (at most)")
    rate.set(xlabel="share of requests whose query text the server embedded",
             ylabel="retrieves / s", ylim=(0, None))
    tail.set(xlabel="share of requests whose query text the server embedded",
             ylabel="p99 latency (ms)", ylim=(0, None))
    clients = rows[0]["clients"]
    fig.suptitle(f"/retrieve under {clients} concurrent clients, one server, "
                 f"{os.cpu_count()} CPUs shared with the clients")
    rate.legend()
    tail.legend()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--client-processes", type=int, default=4,
                        help="processes the clients are spread over (1: all threads of one "
                             "process, whose GIL then queues the clients themselves)")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each phase")
    parser.add_argument("--writes-per-s", type=float, default=10.0)
    parser.add_argument("--extra", type=int, default=3000,
                        help="fabricated records added to the seeds before the start")
    parser.add_argument("--fresh", type=float, nargs="+", default=[0.2],
                        help="share of queries whose text was never asked before; several "
                             "values: each run goes through the phases at each, and a plot "
                             "of req/s and p99 against the share the server embedded is "
                             "written beside the results")
    parser.add_argument("--pool", type=int, default=300, help="repeated query texts")
    parser.add_argument("--workers", type=int, default=None,
                        help="server worker processes (default: `kernelkb serve`'s own)")
    parser.add_argument("--store", type=Path, default=None,
                        help="build the store in this folder once and keep it (default: a "
                             "temporary folder, removed after)")
    parser.add_argument("--profile", nargs="?", const="read", default=None,
                        choices=("read", "read+write"),
                        help="sample the server with py-spy during the first phase of this "
                             "kind (default: read) and print where its time went")
    parser.add_argument("--out", type=Path, default=RESULTS / "load_service")
    args = parser.parse_args()
    args.write_tag = f"write-{uuid.uuid4().hex[:8]}"
    server = Server(args.extra, args.workers, args.store)
    rows: list[dict[str, Any]] = []
    try:
        started = time.monotonic()
        server.start()
        print(f"server up on port {server.port} after {time.monotonic() - started:.0f} s "
              f"(store: seeds + {args.extra} fabricated records)", flush=True)
        for run in range(args.repeat):
            for step, fresh in enumerate(args.fresh):
                for with_writer in (False, True):
                    spy = profiler(server, args) if args.profile == phase_name(with_writer) \
                        and not run and not step else None
                    first = 10**6 * (run + 1) + 10**5 * step  # the writer's record numbers
                    rows.append(run_phase(server, args, with_writer, first, run, fresh))
                    if spy is not None:
                        print(profile_summary(*spy), flush=True)
                    print(table(rows[-1:]).splitlines()[-1], flush=True)
    finally:
        server.stop()
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "cpus": os.cpu_count(),
            "command": "python benchmarks/load_service.py " + " ".join(sys.argv[1:]),
            "args": {k: str(v) for k, v in vars(args).items()}}
    print("\n" + table(rows))
    print("\n" + json.dumps(summary(rows), indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "summary": summary(rows), "runs": rows}, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(
        f"# Load on the HTTP service\n\n`{meta['command']}` on {meta['cpus']} CPUs, "
        f"{meta['date']}. Clients run on the same machine; load average is the 1-minute "
        "figure before and after each run (other processes included).\n\n"
        + table(rows) + "\n")
    if len(args.fresh) > 1:
        plot(rows, args.out.with_suffix(".png"))
        print(f"plot: {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
