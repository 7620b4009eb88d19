"""``Knowledge``: the seam between the optimizer and a store of experiences.

What the loop, recall and the session call, and what the doors that may stand on a
remote store (the MCP server, ``kernelkb.operations``) call: the in-process store
(``kernelkb.service.LocalKnowledge``) and the HTTP client of a remote one
(``retrieval.remote.RemoteKnowledge``) both are one, and a test or a replay may pass its
own. Typed here, below the optimizer, so the optimizer imports no store to name it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kernelkb.kb.ingest import IngestReport
    from kernelkb.kb.queries import Page
    from kernelkb.retrieval.prediction import Space
    from kernelkb.retrieval.query import RetrievalQuery
    from kernelkb.retrieval.schemas import BootstrapPlan, InsightReport, RetrievalResult


class Knowledge(Protocol):
    def ingest(self, records: Sequence[Any]) -> IngestReport: ...

    def retrieve(self, query: RetrievalQuery) -> RetrievalResult: ...

    def insights(self, *, op_type: str | None = None, gpu_name: str | None = None,
                 arch: str | None = None, triton_version: str | None = None,
                 current_triton: str | None = None,
                 regime: str | None = None) -> InsightReport: ...

    def bootstrap(self, env: dict[str, Any], op_type: str | None = None,
                  include_own: bool = False, space: Space | None = None,
                  limit: int = 10, shapes: Sequence[str] | None = None) -> BootstrapPlan: ...

    def stats(self) -> dict[str, Any]: ...

    def resolve_names(self, *, op_type: str | None = None, gpu_name: str | None = None,
                      arch: str | None = None, task_id: str | None = None,
                      known_ops: Iterable[str] = (), known_tasks: Iterable[str] = (),
                      ) -> dict[str, str | None]:
        """The store's spelling of each typed name; ``known_*``: what the caller's task
        registry adds. Raises retrieval.names.UnknownName for a name nobody knows."""
        ...

    def warm_up(self) -> None:
        """Load now what the first request would otherwise wait for (a model, an index)."""

    def list(self, *, offset: int = 0, limit: int = 50, category: str | None = None,
             **filters: Any) -> Page:
        """One page of the stored records, newest first; ``filters``: the columns of
        kb.queries.FILTER_COLUMNS (task_id, dtype, evidence, run_id, ...). What a
        revalidation or a resumed run reads of the store, whichever store it is."""
        ...
