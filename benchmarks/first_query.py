"""First-query latency on an existing store, each in a fresh process (not a test).

What a user waits for once: a whole `kernelkb query` process, and the first
``LocalKnowledge.retrieve`` of a fresh process (the opening of the store and the first
query apart: imports, ``LocalKnowledge(...)``, first ``retrieve``, second ``retrieve``).
Each figure is the median and range of ``--repeat`` fresh processes. Build the store once,
the way a user gets one, e.g.

    KERNELKB_DATA_DIR=/tmp/kb100k kernelkb import /work/shared/data/benchmark_hub
    python benchmarks/first_query.py --store /tmp/kb100k --op convolution --gpu A100

Target (issue 29): both <= 1 s on a 100k-record store.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# one fresh process: the stages of opening the store and of the first two queries
_IN_PROCESS = r"""
import json, sys, time
t0 = time.perf_counter()
from kernelkb.kb.settings import Settings
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.service import LocalKnowledge
from kernelkb.cli.common import knowledge
from kernelkb.operations import related_ops, resolve
t1 = time.perf_counter()
kb = knowledge()
t2 = time.perf_counter()
op, gpu = sys.argv[1], sys.argv[2]
names = resolve(kb, op_type=op, gpu_name=gpu)
query = RetrievalQuery(op_type=names["op_type"], gpu_name=names["gpu_name"],
                       related_ops=related_ops(names["op_type"]))
t3 = time.perf_counter()
first = kb.retrieve(query)
t4 = time.perf_counter()
kb.retrieve(query.model_copy(update={"feedback_text": "second query"}))
t5 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "names_s": t3 - t2,
                  "first_retrieve_s": t4 - t3, "second_retrieve_s": t5 - t4,
                  "hits": [h.id for h in first.hits], "laps_ms": first.timings_ms,
                  "torch_loaded": "torch" in sys.modules}))
"""


def _summary(values: list[float]) -> str:
    return (f"median {statistics.median(values):.2f} s "
            f"(range {min(values):.2f}-{max(values):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="KERNELKB_DATA_DIR to read")
    parser.add_argument("--op", default="convolution")
    parser.add_argument("--gpu", default="A100")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    env = {**os.environ, "KERNELKB_DATA_DIR": str(args.store)}
    cli = [sys.executable, "-m", "kernelkb"] if not (Path(sys.executable).parent
                                                  / "kernelkb").exists() \
        else [str(Path(sys.executable).parent / "kernelkb")]
    command = [*cli, "query", "--op", args.op, "--gpu", args.gpu]
    walls: list[float] = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        walls.append(time.perf_counter() - start)
        if done.returncode:
            sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"`kernelkb query --op {args.op} --gpu {args.gpu}` (whole process): {_summary(walls)}")
    runs = []
    for _ in range(args.repeat):
        out = subprocess.run([sys.executable, "-c", _IN_PROCESS, args.op, args.gpu], env=env,
                             capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    for key in ("import_s", "open_s", "names_s", "first_retrieve_s", "second_retrieve_s"):
        print(f"fresh process, {key[:-2]}: {_summary([r[key] for r in runs])}")
    first = [r["open_s"] + r["names_s"] + r["first_retrieve_s"] for r in runs]
    print(f"fresh process, open + names + first retrieve: {_summary(first)}")
    print(f"first retrieve's stages (ms, last run): {runs[-1]['laps_ms']}")
    print(f"torch imported: {runs[-1]['torch_loaded']}; hits: {runs[-1]['hits']}")


if __name__ == "__main__":
    main()
