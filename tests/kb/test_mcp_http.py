"""`kernelkb mcp --http`: the streamable-HTTP transport behind the API's token rule, served
by a real uvicorn on loopback and driven by the MCP SDK's own client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
from kb_testdata import make_knowledge, record
from live_server import serving  # noqa: E402
from mcp.client.streamable_http import streamable_http_client
from mcp_sync import SyncClient

from kernelkb.cli import main as cli
from kernelkb.mcp.http import http_app
from kernelkb.mcp.server import build_server

TOKEN = "s3cret-token"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}}
HEADERS = {"Accept": "application/json, text/event-stream"}


@contextmanager
def _serving(app: object) -> Iterator[str]:
    with serving(app) as port:
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("mcp-http")
    kb = make_knowledge(root)
    kb.ingest([record(), record(summary="split rows over two programs", verdict="regressed",
                             speedup=0.8, config={"ROWS_PER_PROGRAM": 2})])
    yield build_server(kb, journal_dir=root / "journals")
    kb.close()


async def _post_from(host: str, app: object) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, client=(host, 40000))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://10.0.0.1") as other:
        return await other.post("/mcp", json=INIT, headers=HEADERS)


def _insights_total(client: SyncClient) -> int:
    result = client.tool("insights", {"op_type": "softmax"})
    assert not result.is_error, result.content[0].text
    return result.structured_content["total"]


def test_with_a_token_only_the_bearer_gets_in(mcp_server) -> None:  # type: ignore[no-untyped-def]
    with _serving(http_app(mcp_server, host="127.0.0.1", token=TOKEN)) as url:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            response = httpx.post(url, json=INIT, headers={**HEADERS, **headers})
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json() == {"detail": "missing or wrong bearer token"}
        with pytest.raises(Exception):  # noqa: B017 - the SDK's own client is refused too
            SyncClient(url, timeout_s=60)
        authorised = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"},
                                        timeout=60)
        client = SyncClient(streamable_http_client(url, http_client=authorised))
        try:
            assert {t.name for t in client.list_tools().tools} >= {"evaluate_kernel",
                                                                   "record_experience"}
            assert _insights_total(client) == 2
        finally:
            client.close()


def test_without_a_token_loopback_gets_in_and_others_do_not(mcp_server) -> None:  # type: ignore[no-untyped-def]
    app = http_app(mcp_server, host="127.0.0.1", token=None)
    with _serving(app) as url:
        client = SyncClient(url)
        try:
            assert _insights_total(client) == 2
        finally:
            client.close()
    # the same app seen from another host (the gate reads the ASGI client address)
    response = asyncio.run(_post_from("10.1.2.3", app))
    assert response.status_code == 403
    assert "loopback only" in response.json()["detail"]


def test_a_non_loopback_bind_without_a_token_is_refused_at_start(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    monkeypatch.delenv("KERNELKB_API_TOKEN", raising=False)
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(tmp_path))
    assert cli.main(["mcp", "--http", "--host", "0.0.0.0"]) == 2
    assert "refusing to serve on 0.0.0.0 without a token" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before any store was opened
