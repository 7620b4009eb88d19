"""`kernelkb mcp` opens its store on a thread while it already answers; a store that
cannot be opened is a tool error on each call that needs it, not a dead server."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcp import Client

from kb.mcp.command import WarmingUp
from kb.mcp.server import build_server
from kb.settings import Settings


def test_a_store_that_cannot_open_is_a_tool_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store's folder should be")
    settings = Settings(data_dir=tmp_path, db_url=f"sqlite:///{blocker}/kb.sqlite",
                        vectors=False, seeds_dir=tmp_path / "no-seeds")
    store = WarmingUp(settings)
    server = build_server(store, write_back=lambda: store.write_back,
                          journal_dir=tmp_path / "journals")

    async def calls() -> tuple[object, object, list[str]]:
        async with Client(server) as client:
            insights = await client.call_tool("insights", {"op_type": "softmax"})
            plan = await client.call_tool("bootstrap_plan", {"gpu_name": "NVIDIA H200"})
            tools = [t.name for t in (await client.list_tools()).tools]
            return insights, plan, tools

    insights, plan, tools = asyncio.run(calls())
    for result in (insights, plan):
        assert result.is_error  # type: ignore[attr-defined]
        text = result.content[0].text  # type: ignore[attr-defined]
        assert "the KernelKB store could not be opened" in text and "not-a-folder" in text
    assert "evaluate_kernel" in tools  # the server itself still serves
