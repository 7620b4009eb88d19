"""Server time of each web page on a store seeded with the shipped seeds (vectors off: the
pages read SQL only). Prints p50 / p90 over N requests per page, over loopback HTTP.

    python -m benchmarks.web_pages [--requests 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from kernelkb.kb.settings import Settings
from kernelkb.service import LocalKnowledge
from tests.api.live_server import live_server  # the tests' live server, in a thread

RUN = "rope-20261129T144940-8e7697"
PAGES = ["/", "/ui/insights?op=softmax&gpu=NVIDIA+H200",
         "/ui/plots/insights.png?op=softmax&gpu=NVIDIA+H200",
         "/ui/experiences?op=rope&verdict=improved", "/ui/runs", f"/ui/runs/{RUN}",
         f"/ui/runs/{RUN}/best.png", "/docs"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kb = LocalKnowledge(Settings(data_dir=Path(tmp), vectors=False,
                                     runs_dir=Path(tmp) / "runs"))
        kb.seed_if_empty()
        with live_server(kb) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}",
                                                   timeout=60) as client:
            id_page = client.get("/ui/experiences?op=rope").text
            exp_id = id_page.split("/ui/experiences/")[1][:32]
            print(f"{kb.stats()['experiences']} experiences; {args.requests} requests a page")
            print(f"{'page':60} {'p50 ms':>8} {'p90 ms':>8}")
            for path in [*PAGES, f"/ui/experiences/{exp_id}"]:
                client.get(path).raise_for_status()  # warm
                times = []
                for _ in range(args.requests):
                    start = time.perf_counter()
                    client.get(path).raise_for_status()
                    times.append(1000 * (time.perf_counter() - start))
                p90 = statistics.quantiles(times, n=10)[-1]
                print(f"{path[:60]:60} {statistics.median(times):8.1f} {p90:8.1f}")
        kb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
