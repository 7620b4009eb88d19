"""The FastAPI app. Heavy parts (store, index, embedder) are built once, in the lifespan;
an empty store loads seeds/*.jsonl on start. OpenAPI docs at /docs (assets served here,
no CDN), web pages for people at / (kb/web)."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI

from kernelkb.api.access import write_policy
from kernelkb.api.body_limit import BodyLimit
from kernelkb.api.docs import install_docs
from kernelkb.api.errors import install_error_handlers
from kernelkb.api.routes import experiences, knowledge, system
from kernelkb.api.same_machine import SameMachineOnly
from kernelkb.kb.settings import Settings
from kernelkb.kernels.discovery import add_tasks_dirs, split_dirs
from kernelkb.operations import open_store
from kernelkb.service import LocalKnowledge
from kernelkb.web.app import install_pages

log = logging.getLogger(__name__)

EMBED_WAITERS = 64  # requests that may wait for a query embedding at once (threads, idle)


def create_app(
    settings: Settings | None = None, knowledge_: LocalKnowledge | None = None
) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # a line for each step that can take seconds on a fresh machine (the first serve
        # was silent for 52 s): the store, the seeds file by file, the model
        log.info("opening the store")
        kb = knowledge_ or open_store(settings or Settings())
        add_tasks_dirs(split_dirs(kb.settings.tasks_dir))  # their related ops, for queries
        kb.seed_if_empty()
        note = kb.empty_note()
        if note:
            log.warning(note)
        log.info("warming up: the embedding model and the vector matrix, so the first "
                 "request does not wait for them")
        kb.warm_up()  # first request should not pay for the model and the matrix
        # the pool that runs the sync endpoints: a few threads, the rest queue in order
        anyio.to_thread.current_default_thread_limiter().total_tokens = \
            kb.settings.serve_threads
        # threads that only wait for the query-embedding batcher (kernelkb/api/routes/knowledge.py)
        app.state.embed_waiters = anyio.CapacityLimiter(EMBED_WAITERS)
        # what start-up built (model, matrix, caches) lives as long as the server: out of
        # the collector's full passes, which would otherwise walk it again and again
        gc.collect()
        gc.freeze()
        try:
            log.warning(write_policy(kb.settings.host, kb.settings.api_token))
        except ValueError as exc:  # `serve` refuses earlier; an embedding app is told here
            log.warning(str(exc))
        app.state.knowledge = kb
        yield

    app = FastAPI(title="KernelKB", version="0.1.0", lifespan=lifespan,
                  description="Experience base for agent-driven Triton kernel optimization",
                  docs_url=None, redoc_url=None)  # /docs from local assets: install_docs
    app.add_middleware(BodyLimit)
    app.add_middleware(SameMachineOnly)  # outermost: refused before the body is read
    install_error_handlers(app)
    app.include_router(system.router)
    app.include_router(experiences.router)
    app.include_router(knowledge.router)
    install_docs(app)
    install_pages(app)
    return app
