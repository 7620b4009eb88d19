"""Schema-driven fuzzing of the live service on loopback (schemathesis + hypothesis).

Bounded for CI (a few dozen examples per operation, ~1 min on 2 cores): no request may
get a 5xx, and every record the service accepts must read back and export. The long run
(>= 20,000 requests): `KERNELKB_FUZZ_EXAMPLES=2500 KERNELKB_FUZZ_TALLY=/tmp/fuzz.json
python -m pytest tests/api/test_fuzz.py -s --timeout=0` (prints the tally; the file shows
progress).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kb_testdata import record_dict
from live_server import TOKEN

from kernelkb.kb.queries import iter_records
from kernelkb.service import LocalKnowledge

AUTH = {"Authorization": f"Bearer {TOKEN}"}
# per operation; the long run sets KERNELKB_FUZZ_EXAMPLES=2500 (9 operations: > 20,000)
EXAMPLES = int(os.environ.get("KERNELKB_FUZZ_EXAMPLES", "15"))
accepted: set[str] = set()
tally = {"requests": 0, "server_errors": 0, "accepted": 0}
TALLY_FILE = os.environ.get("KERNELKB_FUZZ_TALLY")  # the long run's progress, every 100


def _count(status: int) -> None:
    tally["requests"] += 1
    tally["server_errors"] += status >= 500
    if TALLY_FILE and tally["requests"] % 100 == 0:
        Path(TALLY_FILE).write_text(json.dumps(tally))


def _operations(url: str) -> list:  # type: ignore[type-arg]
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    ops = [result.ok() for result in schema.get_all_operations()]
    return [op for op in ops if op.path != "/reindex"]  # rebuilds the index: slow, not input


def test_no_server_errors(api_store: tuple[LocalKnowledge, str]) -> None:
    """Every operation in the OpenAPI schema, with generated (valid and invalid) input."""
    url = api_store[1]
    operations = _operations(url)
    assert len(operations) >= 8
    session = requests.Session()  # one connection pool (a client per call reloads CA files)
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        def check(case) -> None:  # type: ignore[no-untyped-def]
            response = case.call(base_url=url, session=session, headers=AUTH, timeout=60)
            _count(response.status_code)
            assert response.status_code < 500, (case.method, case.path, response.text[:500])
            if case.method == "POST" and case.path.startswith("/experiences") \
                    and response.status_code in (200, 201):
                for exp_id in response.json()["accepted"]:
                    accepted.add(exp_id)
                    tally["accepted"] += 1
                    got = session.get(f"{url}/experiences/{exp_id}", timeout=60)
                    assert got.status_code == 200 and got.json()["id"] == exp_id

        check()


LEAVES = ("iteration", "run_id", "created_at", "task.op_type", "task.dtype", "env.gpu_name",
          "env.sm_count", "env.mem_bandwidth_gbps", "edit.summary", "edit.diff", "edit.config",
          "edit.categories", "feedback.time_ms", "feedback.speedup_vs_parent",
          "feedback.registers", "feedback.bias", "feedback.timings", "feedback.mismatch_share",
          "verdict", "provenance.agent", "provenance.round_kind")
ODD_TEXT = st.sampled_from(["\ud800", "a\x00b", "x" * 300, "y" * 5000, "", "\U0001f600",
                            "\u2028## Reminders", "1e999", "NaN"])
VALUES = st.one_of(
    st.floats(), st.integers(min_value=-(2**70), max_value=2**70), st.text(max_size=40),
    ODD_TEXT, st.none(), st.booleans(),
    st.lists(st.one_of(st.integers(), st.text(max_size=8), ODD_TEXT), max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=8), ODD_TEXT),
                    st.one_of(st.floats(), st.integers(min_value=-(2**70), max_value=2**70),
                              st.text(max_size=8), st.booleans()), max_size=4),
)


def _put(data: dict, path: str, value: object) -> None:
    *head, last = path.split(".")
    for part in head:
        data = data[part]
    data[last] = value


def test_mutated_records(api_store: tuple[LocalKnowledge, str]) -> None:
    """Valid records with one to three fields replaced by odd values, next to a valid one:
    never a 5xx, the valid one always kept, every accepted one readable."""
    url = api_store[1]
    serial = iter(range(10**9))
    client = httpx.Client(timeout=60)

    @given(changes=st.lists(st.tuples(st.sampled_from(LEAVES), VALUES), min_size=1,
                            max_size=3))
    @settings(max_examples=EXAMPLES * 3, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def check(changes: list[tuple[str, object]]) -> None:
        n = next(serial)
        mutated = record_dict(summary=f"mutated {n}", config={"B": n})
        for path, value in changes:
            _put(mutated, path, value)
        good = record_dict(summary=f"valid neighbour {n}", config={"B": n})
        raw = json.dumps([mutated, good])  # NaN / Infinity written as JSON allows
        response = client.post(f"{url}/experiences/batch", content=raw,
                               headers={**AUTH, "content-type": "application/json"})
        _count(response.status_code)
        assert response.status_code == 200, response.text[:500]
        body = response.json()
        assert len(body["accepted"]) + len(body["duplicates"]) >= 1  # the neighbour
        for exp_id in body["accepted"]:
            accepted.add(exp_id)
            tally["accepted"] += 1
            got = client.get(f"{url}/experiences/{exp_id}")
            assert got.status_code == 200 and got.json()["id"] == exp_id

    with client:
        check()


def test_every_accepted_record_exports(api_store: tuple[LocalKnowledge, str]) -> None:
    """What the fuzz tests above got accepted, and records of its own with odd but valid
    fields (so the test means something when it runs alone), all export."""
    kb, url = api_store
    own = [record_dict(summary=text, config={"B": n})
           for n, text in enumerate(["\U0001f600 odd but valid", "\u2028## Reminders",
                                     "x" * 300, "a\tb\\n\"c\""])]
    own.append(record_dict(summary="a huge knob value", config={"B": 2**62}))
    response = httpx.post(f"{url}/experiences/batch", json=own, headers=AUTH, timeout=60)
    _count(response.status_code)
    assert response.status_code == 200, response.text[:500]
    mine = set(response.json()["accepted"])
    assert len(mine) == len(own), response.text[:500]
    accepted.update(mine)
    skipped: list[str] = []
    with kb.session() as session:
        exported = {r.id for r in iter_records(session, skipped=skipped)}
    assert skipped == [] and mine <= exported and accepted <= exported
    tally["exported"] = len(exported)
    print("fuzz tally:", json.dumps(tally))  # the long run reads this line (pytest -s)
