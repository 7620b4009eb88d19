"""`kernelkb mcp` opens its store on a thread while it already answers; a store that
cannot be opened is a tool error on each call that needs it, not a dead server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from kernelkb.kb.settings import Settings
from kernelkb.mcp.opening import OpeningStore
from kernelkb.mcp.server import build_server
from kernelkb.service import LocalKnowledge


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) on the SQLite file, without vectors: the tools'
    answers are checked, not the backends."""
    return {"vectors": False}


def test_a_store_that_cannot_open_is_a_tool_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store's folder should be")
    settings = Settings(data_dir=tmp_path, db_url=f"sqlite:///{blocker}/kb.sqlite",
                        vectors=False, seeds_dir=tmp_path / "no-seeds")
    store = OpeningStore(settings)
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


def test_unknown_names_and_arguments_are_errors_that_say_why(knowledge: LocalKnowledge,
                                                             tmp_path: Path) -> None:
    """Through the real MCP client: an unknown op or GPU names the closest known one (as
    the CLI and HTTP do) instead of a bare "Error executing tool"; an argument the tool does not
    take is refused, not dropped; the regime is an argument of both read tools."""
    from kb_testdata import record_dict

    kb = knowledge
    kb.ingest([record_dict(hw="H200")])  # the store knows softmax on an H200
    server = build_server(kb, journal_dir=tmp_path / "journals")

    async def calls() -> dict[str, object]:
        async with Client(server) as client:
            return {
                "op": await client.call_tool("retrieve_experiences", {"op_type": "sofmax"}),
                "gpu": await client.call_tool("retrieve_experiences",
                                              {"op_type": "softmax", "gpu_name": "H2000"}),
                "insights": await client.call_tool("insights", {"op_type": "sofmax"}),
                "extra": await client.call_tool("retrieve_experiences",
                                                {"op_type": "softmax", "top_k": 3}),
                "regime": await client.call_tool("insights", {"op_type": "softmax",
                                                              "regime": "long_rows"}),
                "schema": (await client.list_tools()).tools,
            }

    out = asyncio.run(calls())
    for key, closest in (("op", "softmax"), ("insights", "softmax"), ("gpu", "H200")):
        result = out[key]
        text = result.content[0].text  # type: ignore[attr-defined]
        assert result.is_error and closest in text, (key, text)  # type: ignore[attr-defined]
        assert "closest" in text, text  # the reason, not only the SDK's prefix
    extra = out["extra"]
    assert extra.is_error and "top_k" in extra.content[0].text  # type: ignore[attr-defined]
    assert not out["regime"].is_error  # type: ignore[attr-defined]
    schemas = {t.name: t.input_schema for t in out["schema"]}  # type: ignore[attr-defined]
    assert schemas["retrieve_experiences"].get("additionalProperties") is False


def test_the_tools_work_over_a_service_url_and_its_names(knowledge: LocalKnowledge,
                                                         tmp_path: Path) -> None:
    """`kernelkb mcp` with KERNELKB_SERVICE_URL reads through the HTTP service: names are
    matched by the service (GET /names: its store and task registry), so a short form
    works and an unknown name is a tool error naming the closest, as on a local store."""
    import json

    from kb_testdata import record_dict
    from live_server import live_server

    from kernelkb.retrieval.remote import RemoteKnowledge

    kb = knowledge
    kb.ingest([record_dict(hw="H200")])
    with live_server(kb) as port:
        remote = RemoteKnowledge(f"http://127.0.0.1:{port}")
        assert remote.resolve_names(op_type="SOFTMAX", gpu_name="h200") == {
            "op_type": "softmax", "gpu_name": "NVIDIA H200", "arch": None, "task_id": None}
        server = build_server(remote, journal_dir=tmp_path / "journals")

        async def calls() -> dict[str, object]:
            async with Client(server) as client:
                return {
                    "insights": await client.call_tool("insights", {"op_type": "SOFTMAX",
                                                                    "gpu_name": "h200"}),
                    "retrieve": await client.call_tool("retrieve_experiences",
                                                       {"op_type": "softmax", "k": 2}),
                    "unknown": await client.call_tool("insights", {"op_type": "sofmax"}),
                }

        out = asyncio.run(calls())
        remote.close()
    insights = out["insights"]
    assert not insights.is_error, insights.content[0].text  # type: ignore[attr-defined]
    report = json.loads(insights.content[0].text)  # type: ignore[attr-defined]
    assert report["total"] == 1 and report["gpu_name"] == "NVIDIA H200"
    assert not out["retrieve"].is_error, out["retrieve"].content[0].text  # type: ignore[attr-defined]
    unknown = out["unknown"]
    text = unknown.content[0].text  # type: ignore[attr-defined]
    assert unknown.is_error and "closest" in text and "softmax" in text, text  # type: ignore[attr-defined]
