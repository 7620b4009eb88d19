"""A row that no longer loads is skipped, counted and reported by every read; `doctor`
lists it and `--quarantine` moves it aside without losing it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kb_testdata import make_knowledge, record_dict
from servers import backend_env
from sqlalchemy import text

from kernelkb.cli import main as cli
from kernelkb.kb.doctor import bad_rows, quarantine, sql_ids
from kernelkb.kb.models import QuarantinedRow
from kernelkb.kb.queries import UnreadableRow, iter_records
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.service import LocalKnowledge


def _poison(kb: LocalKnowledge, exp_id: str) -> None:
    """Break a stored row the way an old NaN did: timing claimed, time_ms gone."""
    with kb.engine.begin() as conn:
        raw = conn.execute(text("SELECT record_json FROM experience WHERE id = :i"),
                           {"i": exp_id}).scalar()
        data = json.loads(raw)
        data["feedback"]["time_ms"] = None
        conn.execute(text("UPDATE experience SET record_json = :j WHERE id = :i"),
                     {"j": json.dumps(data), "i": exp_id})


@pytest.fixture
def store(knowledge: LocalKnowledge) -> tuple[LocalKnowledge, str]:
    """``knowledge`` (on both backends) with six rows, one of them broken."""
    kb = knowledge
    records = [record_dict(summary=f"tile rows wider, variant {n}", config={"B": 64 * (n + 1)},
                           speedup=1.1 + n / 10) for n in range(6)]
    report = kb.ingest(records)
    assert len(report.accepted) == 6
    bad = report.accepted[2]
    _poison(kb, bad)
    return kb, bad


def test_reads_skip_and_count_the_bad_row(store: tuple[LocalKnowledge, str]) -> None:
    kb, bad = store
    page = kb.list(limit=50)
    assert page.total == 6 and len(page.items) == 5 and page.skipped == [bad]
    skipped: list[str] = []
    with kb.session() as session:
        exported = list(iter_records(session, batch=2, skipped=skipped))
    assert len(exported) == 5 and skipped == [bad]
    with pytest.raises(UnreadableRow, match="kernelkb doctor"):
        kb.get(bad)
    assert kb.reindex() == 5
    result = kb.retrieve(RetrievalQuery(op_type="softmax", gpu_name="NVIDIA H200", k=10))
    assert len(result.hits) == 5 and bad not in {h.id for h in result.hits}
    assert kb.insights(op_type="softmax").total == 6  # aggregates read columns, not JSON
    plan = kb.bootstrap({"gpu_name": "NVIDIA GH200", "arch": "sm_90"}, op_type="softmax")
    assert plan.items and all(bad not in i.example_ids for i in plan.items
                              if i.kind == "config")


def test_doctor_lists_then_quarantines(store: tuple[LocalKnowledge, str],
                                       store_backend: dict[str, Any],
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    kb, bad = store
    found = bad_rows(kb.engine)
    assert [i for i, _ in found] == [bad] and "time_ms" in found[0][1]
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(kb.settings.data_dir))
    monkeypatch.setenv("KERNELKB_SEEDS_DIR", str(kb.settings.seeds_dir))
    for name, value in backend_env(store_backend).items():  # the CLI opens the same store
        monkeypatch.setenv(name, value)
    kb.close()
    assert cli.main(["doctor", "--json"]) == 1
    listed = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in listed["unreadable"]] == [bad]
    assert cli.main(["doctor", "--quarantine", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["quarantined"] == 1 and done["removed"] == 1
    assert done["rows_without_vector"] == 0 and done["vectors_without_row"] == 0
    fresh = make_knowledge(kb.settings.data_dir, **store_backend)
    assert bad not in sql_ids(fresh.engine) and not bad_rows(fresh.engine)
    with fresh.session() as session:
        kept = session.get(QuarantinedRow, bad)
        assert kept is not None and "time_ms" in kept.reason
        assert json.loads(kept.record_json)["id"] == bad
    assert fresh.list().total == 5 and fresh.list().skipped == []
    assert quarantine(fresh.engine, [(bad, "again")]) == 0  # idempotent
