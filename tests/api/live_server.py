"""A real uvicorn server on a free port in a thread, for tests that need live HTTP."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from kb.api.app import create_app
from retrieval.service import LocalKnowledge


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextmanager
def live_server(kb: LocalKnowledge, host: str = "127.0.0.1") -> Iterator[int]:
    """Serve ``kb`` on ``host``; yields the port."""
    port = free_port(host)
    server = uvicorn.Server(uvicorn.Config(create_app(knowledge_=kb), host=host, port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
