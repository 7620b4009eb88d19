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
from kernelkb.kb.service import LocalKnowledge
from kernelkb.kb.settings import Settings
from kernelkb.kernels.base import RecordRegimes
from kernelkb.retrieval.query import RetrievalQuery


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


def test_an_older_store_gains_the_column_and_derives_it(tmp_path: Path) -> None:
    old = _store(tmp_path, None)  # written without regimes, as before the column
    old.ingest(RECORDS)
    with old.engine.begin() as conn:  # the table as an older version made it
        conn.execute(text("DROP INDEX ix_experience_regime"))
        conn.execute(text("ALTER TABLE experience DROP COLUMN regime"))
    old.close()
    kb = _store(tmp_path, RecordRegimes())
    assert _regimes(kb) == {"long: online pass": "long_rows",
                            "short: rows per program": "short_rows",
                            "both": "short_rows+long_rows", "recorded": "long_rows",
                            "related": "many_rows", "failed before timing": ""}
    ids = {r.id for r in kb.list(limit=10).items}  # records (and ids) are unchanged
    assert ids == {parse_record(r).id for r in RECORDS}


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
