"""Regimes in the store: an older database gains the column and derives it from each
record's shapes; retrieval and insights filter the op's own experiences by it, locally and
over HTTP; related ops are not filtered (their regimes are their own)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from kb_testdata import record_dict
from live_server import live_server  # noqa: E402
from sqlalchemy import text
from sqlmodel import select

from kernelkb.kb.models import Experience
from kernelkb.kb.record import parse_record
from kernelkb.kb.settings import Settings
from kernelkb.kernels.records import RecordRegimes
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.service import LocalKnowledge


def _with_shapes(shapes: list[str], regime: str | None = None, **kwargs) -> dict:
    data = record_dict(**kwargs)
    data["task"].update(shape_set=";".join(shapes), regime=regime)
    data["feedback"]["timings"] = [{"shape": s, "median_ms": 0.4} for s in shapes]
    return data


RECORDS = [
    _with_shapes(["rows=1024,cols=128256"], summary="long: online pass", config={"B": 1}),
    _with_shapes(["rows=32768,cols=1024"], summary="short: rows per program", config={"B": 2}),
    _with_shapes(["rows=4,cols=128", "rows=4096,cols=32768"], summary="both", config={"B": 3}),
    _with_shapes(["rows=4,cols=128"], regime="long_rows", summary="recorded", config={"B": 4}),
    _with_shapes(["rows=4096,hidden=4096"], op="rmsnorm", summary="related", config={"B": 5}),
    _with_shapes([], verdict="failed", speedup=None, evidence="claimed", error_kind="compile",
                 summary="failed before timing", config={"B": 6}),
]


def _store(root: Path, regimes: RecordRegimes | None) -> LocalKnowledge:
    return LocalKnowledge(Settings(data_dir=root, seeds_dir=root / "none", vectors=False),
                          regimes=regimes)


def _regimes(kb: LocalKnowledge) -> dict[str, str | None]:
    with kb.session() as session:
        return {row.summary: row.regime for row in session.exec(select(Experience)).all()}


DERIVED = {"long: online pass": "long_rows", "short: rows per program": "short_rows",
           "both": "short_rows+long_rows", "recorded": "long_rows", "related": "many_rows",
           "failed before timing": ""}


def _older_store(root: Path) -> Settings:
    """A store as an older version wrote it: no regime column, so none derived."""
    old = _store(root, None)
    old.ingest(RECORDS)
    with old.engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_experience_regime"))
        conn.execute(text("ALTER TABLE experience DROP COLUMN regime"))
    old.close()
    return old.settings


def _open_by_cli(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelkb.cli.main import main

    for name, value in (("DATA_DIR", settings.data_dir), ("SEEDS_DIR", settings.seeds_dir),
                        ("VECTORS", "false")):
        monkeypatch.setenv(f"KERNELKB_{name}", str(value))
    assert main(["stats"]) == 0


def _open_by_api(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from kernelkb.api.app import create_app

    app = create_app(settings)
    with TestClient(app):  # its lifespan opens the store, as `kernelkb serve` starts
        assert app.state.knowledge.count() == len(RECORDS)


def _open_by_mcp(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelkb.mcp.opening import OpeningStore

    assert OpeningStore(settings).stats()["experiences"] == len(RECORDS)


@pytest.mark.parametrize("door", [_open_by_cli, _open_by_api, _open_by_mcp],
                         ids=["cli", "api", "mcp"])
def test_an_older_store_opened_by_a_door_gains_the_column_and_derives_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, door) -> None:  # type: ignore[no-untyped-def]
    """Each door opens the store through kernelkb.operations.open_store, whose explicit
    ``migrate`` step derives the regimes (the constructor no longer does)."""
    settings = _older_store(tmp_path)
    door(settings, monkeypatch)
    kb = _store(tmp_path, None)
    assert _regimes(kb) == DERIVED
    ids = {r.id for r in kb.list(limit=10).items}  # records (and ids) are unchanged
    assert ids == {parse_record(r).id for r in RECORDS}


def test_opening_a_store_rewrites_no_row_until_it_is_migrated(tmp_path: Path) -> None:
    _older_store(tmp_path)
    kb = _store(tmp_path, RecordRegimes())
    assert set(_regimes(kb).values()) == {None}  # the column is back, nothing derived
    assert kb.migrate() == len(RECORDS)
    assert _regimes(kb) == DERIVED
    assert kb.migrate() == 0  # once derived, a second pass finds nothing


def test_retrieval_and_insights_filter_by_regime(tmp_path: Path) -> None:
    kb = _store(tmp_path, RecordRegimes())
    kb.ingest(RECORDS)
    query = {"op_type": "softmax", "task_id": "softmax", "gpu_name": "NVIDIA H200",
             "related_ops": ["rmsnorm"], "k": 10}

    def summaries(regime: str | None) -> set[str]:
        hits = kb.retrieve(RetrievalQuery(**query, regime=regime)).hits
        return {h.record.edit.summary for h in hits}

    everything = {"long: online pass", "short: rows per program", "both", "recorded"}
    assert summaries(None) >= everything
    assert summaries("long_rows") == {"long: online pass", "both", "recorded", "related"}
    assert summaries("short_rows") == {"short: rows per program", "both", "related"}
    assert summaries("medium_rows") <= {"related"}
    # a row of unknown regime (no shape it could be derived from) is kept as a warning
    failed = {h.record.edit.summary for h in
              kb.retrieve(RetrievalQuery(**query, regime="medium_rows")).warnings}
    assert failed == {"failed before timing"}
    assert kb.insights(op_type="softmax", regime="long_rows").total == 4
    assert kb.insights(op_type="softmax", regime="short_rows").total == 3
    assert kb.insights(op_type="softmax", regime="medium_rows").total == 1
    assert kb.insights(op_type="softmax").total == 5
    with pytest.raises(ValueError, match="regime"):
        RetrievalQuery(**query, regime="long rows; drop table")
    with pytest.raises(ValueError, match="regime"):
        kb.insights(op_type="softmax", regime="Long")


def test_the_http_api_filters_insights_by_regime(tmp_path: Path) -> None:
    kb = _store(tmp_path, RecordRegimes())
    kb.ingest(RECORDS)
    with live_server(kb) as port:
        url = f"http://127.0.0.1:{port}/insights"
        long = httpx.get(url, params={"op_type": "softmax", "regime": "long_rows"})
        assert long.status_code == 200 and long.json()["total"] == 4
        assert long.json()["regime"] == "long_rows"
        bad = httpx.get(url, params={"op_type": "softmax", "regime": "x%' OR 1=1"})
        assert bad.status_code == 422
