"""``RemoteKnowledge``: the ``Knowledge`` protocol over HTTP (httpx), for workers that
share one service. A service that cannot be reached raises ``ServiceUnavailable`` (the
optimizer then falls back to its journal); a 4xx answer raises ``ServiceError`` with the
server's detail.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import httpx

from kernelkb.kb.ingest import IngestReport
from kernelkb.kb.limits import BATCH_ITEMS
from kernelkb.kb.queries import Page
from kernelkb.kb.record import ExperienceRecord
from kernelkb.retrieval.names import UnknownName
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.retrieval.schemas import BootstrapPlan, InsightReport, RetrievalResult

# the names every door documents (the service still takes the older ones)
DOOR_NAMES = {"op_type": "op", "k": "limit", "task_id": "task"}


class ServiceUnavailable(RuntimeError):
    """The knowledge service did not answer (down, unreachable, timed out, 5xx)."""


class ServiceError(RuntimeError):
    """The service answered with an error (bad input, missing token, ...)."""

    def __init__(self, message: str, status: int = 0, detail: str = "") -> None:
        super().__init__(message)
        self.status, self.detail = status, detail


class RemoteKnowledge:
    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self._client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._client.close()

    def warm_up(self) -> None:
        """Nothing to load on this side: the service warmed its own store at start-up."""

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ServiceUnavailable(f"knowledge service at {self.url} unreachable: {exc}") from exc
        if response.status_code >= 500:
            raise ServiceUnavailable(f"{method} {path}: {response.status_code} {response.text}")
        if response.status_code >= 400:
            raise ServiceError(f"{method} {path}: {response.status_code} {response.text}",
                               response.status_code, _detail(response))
        try:
            return response.json()
        except ValueError as exc:  # a proxy's HTML page, a different server on the port
            raise ServiceUnavailable(f"{method} {path}: the answer is not JSON "
                                     f"({response.headers.get('content-type')}): "
                                     f"{response.text[:200]!r}") from exc

    def resolve_names(self, *, op_type: str | None = None, gpu_name: str | None = None,
                      arch: str | None = None, task_id: str | None = None,
                      known_ops: Iterable[str] = (), known_tasks: Iterable[str] = (),
                      ) -> dict[str, str | None]:
        """The service's spelling of each typed name (its store and task registry: the
        ``known_*`` of this side are not needed there). UnknownName, with the service's
        sentence naming the closest, for a name it does not know."""
        typed = {"op_type": op_type, "gpu_name": gpu_name, "arch": arch, "task_id": task_id}
        try:
            found = self._call("GET", "/names", params={
                DOOR_NAMES.get(k, k): v for k, v in typed.items() if v is not None})
        except ServiceError as exc:
            if exc.status == 422 and exc.detail:
                raise UnknownName(exc.detail) from None
            raise
        return {k: found.get(k) for k in typed}

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def ingest(self, records: Sequence[Any]) -> IngestReport:
        items = [r.model_dump(mode="json") if isinstance(r, ExperienceRecord) else r
                 for r in records]
        report = IngestReport()
        for start in range(0, len(items), BATCH_ITEMS):  # the service takes batches this big
            chunk = items[start:start + BATCH_ITEMS]
            answer = self._call("POST", "/experiences/batch", json=chunk)
            report.merge(_accounted(answer, chunk), offset=start)
        return report

    def retrieve(self, query: RetrievalQuery) -> RetrievalResult:
        # names as given, as LocalKnowledge takes them: matching typed names is for people
        body = query.model_copy(update={"check_names": False}).model_dump(mode="json")
        body = {DOOR_NAMES.get(k, k): v for k, v in body.items()}
        data = self._call("POST", "/retrieve", json=body)
        return RetrievalResult.model_validate(data)

    def insights(self, *, op_type: str | None = None, gpu_name: str | None = None,
                 arch: str | None = None, triton_version: str | None = None,
                 current_triton: str | None = None,
                 regime: str | None = None) -> InsightReport:
        params = {k: v for k, v in {"op": op_type, "gpu_name": gpu_name, "arch": arch,
                                    "triton_version": triton_version,
                                    "current_triton": current_triton,
                                    "check_names": False, "regime": regime}.items()
                       if v is not None}
        return InsightReport.model_validate(self._call("GET", "/insights", params=params))

    def bootstrap(self, env: dict[str, Any], op_type: str | None = None,
                  include_own: bool = False, space: Any = None,
                  limit: int = 10, shapes: Sequence[str] | None = None) -> BootstrapPlan:
        """``space`` stays here (functions do not travel): the service ranks the space of
        its own registered task of ``op_type``, or the configurations in its store."""
        body = {"env": env, "op": op_type, "include_own": include_own, "limit": limit,
                "check_names": False, **({"shapes": list(shapes)} if shapes else {})}
        return BootstrapPlan.model_validate(self._call("POST", "/bootstrap", json=body))

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/stats")

    def get(self, exp_id: str) -> ExperienceRecord | None:
        try:
            return ExperienceRecord.model_validate(self._call("GET", f"/experiences/{exp_id}"))
        except ServiceError as exc:
            if " 404 " in str(exc):
                return None
            raise

    def list(self, *, offset: int = 0, limit: int = 50, category: str | None = None,
             **filters: Any) -> Page:
        """One page of the service's records (GET /experiences; at most 500 a page)."""
        params = {DOOR_NAMES.get(k, k): v for k, v in
                  {**filters, "category": category, "offset": offset, "limit": limit}.items()
                  if v is not None}
        return Page.model_validate(self._call("GET", "/experiences", params=params))


def _accounted(answer: Any, sent: list[Any]) -> IngestReport:
    """The service's report, when it accounts for every record sent (each stored, already
    there or rejected); else ServiceUnavailable: an answer of another shape (another
    server on the port, a proxy) must not let a caller count records as stored."""
    try:
        report = IngestReport.model_validate(answer)
    except ValueError as exc:
        raise ServiceUnavailable(f"the ingest answer is not a report: {exc}") from exc
    sent_ids = {item.get("id") for item in sent if isinstance(item, dict)} - {None}
    told = report.accepted + report.duplicates
    if len(told) + len(report.rejected) != len(sent) or \
            (sent_ids and not set(told) <= sent_ids) or \
            any(not 0 <= r.index < len(sent) for r in report.rejected):
        raise ServiceUnavailable(
            f"the ingest answer does not account for the {len(sent)} records sent "
            f"({len(report.accepted)} stored, {len(report.duplicates)} already there, "
            f"{len(report.rejected)} rejected)")
    return report


def _detail(response: httpx.Response) -> str:
    """A 4xx answer's one-sentence ``detail`` (the service's Problem body), else ''."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        return ""
    return detail if isinstance(detail, str) else ""
