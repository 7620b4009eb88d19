"""A blocking face for the MCP SDK's async ``Client``, so one server (a subprocess over
stdio, or an HTTP endpoint) serves every test of a module: the client lives in an event
loop on its own thread and each call waits for its answer."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

from mcp import Client


class SyncClient:
    def __init__(self, server: Any, timeout_s: float = 600.0) -> None:
        self.timeout_s = timeout_s
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._stop: asyncio.Event | None = None
        self.client: Client | None = None
        ready: Future[None] = Future()
        self._held = asyncio.run_coroutine_threadsafe(self._hold(server, ready), self.loop)
        wait([ready, self._held], timeout_s, return_when=FIRST_COMPLETED)
        if not ready.done():
            self._stop_loop()
            self._held.result(0)  # the connection failed: its error is raised here
            raise TimeoutError(f"no MCP session within {timeout_s} s")

    async def _hold(self, server: Any, ready: Future[None]) -> None:
        self._stop = asyncio.Event()
        async with Client(server) as client:
            self.client = client
            ready.set_result(None)
            await self._stop.wait()

    def __getattr__(self, name: str) -> Any:
        """client.<method>(...) run to completion on the client's loop."""
        method = getattr(self.client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            future = asyncio.run_coroutine_threadsafe(method(*args, **kwargs), self.loop)
            return future.result(self.timeout_s)

        return call

    def tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """A tool's result (``is_error`` and ``content`` as the SDK gives them)."""
        return self.call_tool(name, arguments)

    def json_resource(self, uri: str) -> Any:
        return json.loads(self.read_resource(uri).contents[0].text)

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._held.result(60)
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def error_text(result: Any) -> str:
    assert result.is_error, f"expected a tool error, got {result.content}"
    return result.content[0].text
