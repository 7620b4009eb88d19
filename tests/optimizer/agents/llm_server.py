"""An OpenAI-compatible server on loopback for the LLM agent's tests.

It answers POST .../chat/completions from a script of (status, content) pairs, one per
request, and keeps every request body. A ``Raw`` entry sends its body as it is (a
proxy's HTML page, cut-off JSON); ``HANG`` never answers (until the server stops);
``DROP`` closes the connection without an answer. GET .../models lists ``models`` when set and
answers 501 otherwise (as a server without the listing does); ``models_status`` makes the
listing fail instead (401, 429, ...; HANG: never answer). ``headers`` go on every error
response (Retry-After).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Raw:
    """A response body sent as is, with status 200 unless told."""

    body: str
    content_type: str = "application/json"
    status: int = 200


HANG = "hang"
DROP = "drop"
_released = threading.Event()  # set when the server stops: a hanging answer ends


class ScriptedLLM(BaseHTTPRequestHandler):
    script: list = []
    requests: list[dict] = []
    gets: list[str] = []
    models: list[str] | None = None
    models_status: int | str | None = None  # or HANG
    headers_out: dict[str, str] = {}

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        entry = type(self).script.pop(0)
        if entry == HANG:
            _released.wait(60)
            return
        if entry == DROP:
            self.close_connection = True
            return
        if isinstance(entry, Raw):
            self._send_bytes(entry.status, entry.body.encode(), entry.content_type)
            return
        status, content = entry
        payload = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                   "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": content}}]}
        self._send(status, payload if status == 200 else {"error": {"message": content}})

    def do_GET(self) -> None:  # noqa: N802
        cls = type(self)
        cls.gets.append(self.path)
        if cls.models_status == HANG:
            _released.wait(60)
        elif cls.models_status is not None:
            self._send(cls.models_status, {"error": {"message": "listing refused"}})
        elif cls.models is None:
            self._send(501, {"error": {"message": "Unsupported method ('GET')"}})
        else:
            self._send(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "test"}
                for m in cls.models]})

    def _send(self, status: int, payload: dict) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), "application/json")

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if status != 200:
            for name, value in type(self).headers_out.items():
                self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def llm_server(script: list, *, models: list[str] | None = None,
               models_status: int | str | None = None,
               headers: dict[str, str] | None = None) -> Iterator[str]:
    """The server's base URL (…/v1) while the block runs."""
    ScriptedLLM.script, ScriptedLLM.requests, ScriptedLLM.gets = list(script), [], []
    ScriptedLLM.models, ScriptedLLM.models_status = models, models_status
    ScriptedLLM.headers_out = dict(headers or {})
    _released.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedLLM)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        _released.set()
        server.shutdown()
        server.server_close()
