"""How long a coding agent waits on `kernelkb mcp` (stdio): start-up on an empty store
(the shipped seeds are loaded and embedded) and on a filled one, until the client is
connected and until the first answer from the store, then each tool's
latency, median of a few calls. The evaluation runs the Triton interpreter without a GPU
(correctness only) on the task's cpu shapes, the sandbox's worker start included.

    python benchmarks/mcp_latency.py [--calls 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[1]


def _server(store: Path) -> StdioServerParameters:
    env = {"KERNELKB_DATA_DIR": str(store), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO),
           "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "1")}
    return StdioServerParameters(command=sys.executable, args=["-m", "kernelkb", "mcp"],
                                 env=env, cwd=str(REPO))


async def _timed(call) -> float:  # type: ignore[no-untyped-def]
    began = time.perf_counter()
    result = await call
    if getattr(result, "is_error", False):
        raise RuntimeError(result.content[0].text)
    return (time.perf_counter() - began) * 1000


async def _tools(client: Client, calls: int) -> dict[str, list[float]]:
    from kernelkb.kernels.discovery import get_task

    asks = {
        "retrieve_experiences": ("retrieve_experiences", {
            "op_type": "softmax", "gpu_name": "NVIDIA H200",
            "feedback_text": "far from the memory roofline on long rows"}),
        "insights": ("insights", {"op_type": "attention", "gpu_name": "NVIDIA H200"}),
        "bootstrap_plan": ("bootstrap_plan", {"gpu_name": "NVIDIA H100 SXM",
                                              "op_type": "rmsnorm", "limit": 5}),
    }
    out: dict[str, list[float]] = {name: [] for name in asks}
    for _ in range(calls):
        for name, (tool, args) in asks.items():
            out[name].append(await _timed(client.call_tool(tool, args)))
    template = get_task("softmax").template
    out["evaluate_kernel (first call: + baseline round)"] = []
    out["evaluate_kernel"] = []
    for n, warps in enumerate((2, 1, 8)):
        source = template.replace("NUM_WARPS = 4", f"NUM_WARPS = {warps}", 1)
        key = "evaluate_kernel (first call: + baseline round)" if n == 0 else "evaluate_kernel"
        out[key].append(await _timed(client.call_tool("evaluate_kernel", {
            "task": "softmax", "source": source, "summary": f"{warps} warps",
            "categories": ["warps_stages"], "shapes": "cpu"})))
    return out


async def main(calls: int) -> None:
    store = Path(tempfile.mkdtemp(prefix="kernelkb-mcp-bench-"))
    rows: list[tuple[str, list[float]]] = []
    for label in ("empty store", "seeded store"):
        began = time.perf_counter()
        async with Client(_server(store)) as client:
            rows.append((f"start-up, {label}: client connected",
                         [(time.perf_counter() - began) * 1000]))
            # the store opens (and a first start embeds the seeds) while the server answers
            await _timed(client.call_tool("insights", {"op_type": "softmax"}))
            rows.append((f"start-up, {label}: first answer from the store",
                         [(time.perf_counter() - began) * 1000]))
            if label == "seeded store":
                rows.extend((await _tools(client, calls)).items())
    print(f"# kernelkb mcp over stdio: {platform.node()}, {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, 1-min load {os.getloadavg()[0]:.1f}")
    print("| step | calls | median ms | max ms |\n| --- | ---: | ---: | ---: |")
    for label, values in rows:
        print(f"| {label} | {len(values)} | {statistics.median(values):.0f} | "
              f"{max(values):.0f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5)
    asyncio.run(main(parser.parse_args().calls))
