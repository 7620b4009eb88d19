"""The MCP server's store while it opens: a ``Knowledge`` that answers once the store is
open, which happens (and warms up) on a thread while the server already answers.

Why: an agent's client gives up on a server slow to start, and the first start embeds the
shipped seeds. A call waits for the store to be open, not for the warm-up (SQL-only tools
such as insights answer at once).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver.exceptions import ToolError

from kernelkb.operations import open_for_runs

if TYPE_CHECKING:
    from kernelkb.kb.ingest import IngestReport
    from kernelkb.kb.queries import Page
    from kernelkb.kb.settings import Settings
    from kernelkb.retrieval.prediction import Space
    from kernelkb.retrieval.protocol import Knowledge
    from kernelkb.retrieval.query import RetrievalQuery
    from kernelkb.retrieval.schemas import BootstrapPlan, InsightReport, RetrievalResult

log = logging.getLogger(__name__)


class OpeningStore:
    """The store as `kernelkb optimize` opens it (``open_for_runs``: seeded when empty;
    the service when KERNELKB_SERVICE_URL is set), opened and warmed up (embedding model,
    vector matrix) on a thread; each ``Knowledge`` method waits for the opening."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._knowledge: Knowledge | None = None
        self._error: str | None = None
        self._write_back = False
        self._done = threading.Event()
        threading.Thread(target=self._open, name="kernelkb-store", daemon=True).start()

    def _open(self) -> None:
        try:
            self._knowledge, self._write_back = open_for_runs(self._settings)
            if self._knowledge is None:
                self._error = "no knowledge store can be opened here (see the server's log)"
        except Exception as err:  # noqa: BLE001 - every call reports it instead
            log.exception("opening the store failed")
            self._error = f"{type(err).__name__}: {err}"
        finally:
            self._done.set()
        try:  # calls go ahead meanwhile: the embedder and the index load under their locks
            if self._knowledge is not None:
                self._knowledge.warm_up()
        except Exception:  # noqa: BLE001 - a call that needs the model meets the fault itself
            log.exception("warming up the store failed")

    def _ready(self) -> Knowledge:
        self._done.wait()
        if self._knowledge is None:
            raise ToolError(f"the KernelKB store could not be opened: {self._error}")
        return self._knowledge

    @property
    def write_back(self) -> bool:
        """Whether evaluations are written to the store (not on a bare GPU host)."""
        self._ready()
        return self._write_back

    # -- Knowledge ----------------------------------------------------------------------
    def ingest(self, records: Sequence[Any]) -> IngestReport:
        return self._ready().ingest(records)

    def retrieve(self, query: RetrievalQuery) -> RetrievalResult:
        return self._ready().retrieve(query)

    def insights(self, *, op_type: str | None = None, gpu_name: str | None = None,
                 arch: str | None = None, triton_version: str | None = None,
                 current_triton: str | None = None,
                 regime: str | None = None) -> InsightReport:
        return self._ready().insights(op_type=op_type, gpu_name=gpu_name, arch=arch,
                                      triton_version=triton_version,
                                      current_triton=current_triton, regime=regime)

    def bootstrap(self, env: dict[str, Any], op_type: str | None = None,
                  include_own: bool = False, space: Space | None = None,
                  limit: int = 10, shapes: Sequence[str] | None = None) -> BootstrapPlan:
        return self._ready().bootstrap(env, op_type=op_type, include_own=include_own,
                                       space=space, limit=limit, shapes=shapes)

    def stats(self) -> dict[str, Any]:
        return self._ready().stats()

    def resolve_names(self, *, op_type: str | None = None, gpu_name: str | None = None,
                      arch: str | None = None, task_id: str | None = None,
                      known_ops: Iterable[str] = (), known_tasks: Iterable[str] = (),
                      ) -> dict[str, str | None]:
        return self._ready().resolve_names(op_type=op_type, gpu_name=gpu_name, arch=arch,
                                           task_id=task_id, known_ops=known_ops,
                                           known_tasks=known_tasks)

    def warm_up(self) -> None:
        """The thread warms the store up once it is open; this waits for the opening."""
        self._ready()

    def list(self, *, offset: int = 0, limit: int = 50, category: str | None = None,
             **filters: Any) -> Page:
        return self._ready().list(offset=offset, limit=limit, category=category, **filters)
