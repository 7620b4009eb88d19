"""/ui/runs lists the user's own runs first, with task, hardware and date from the
journal, and says "crashed" for a folder that stopped without a report; /ui/insights
with an unknown name is a 404 naming the closest, as the CLI, API and MCP do."""

from __future__ import annotations

import json

import httpx


def _journal(run: str, iteration: int, kind: str) -> str:
    from kb_testdata import record_dict

    rec = record_dict(run=run, iteration=iteration, summary=f"step {iteration}")
    rec["provenance"]["round_kind"] = kind
    return json.dumps(rec)


def _own_run(runs_dir, run: str, state: str, report: bool) -> None:  # type: ignore[no-untyped-def]
    folder = runs_dir / run
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "journal.jsonl").write_text(
        "\n".join(_journal(run, i, k) for i, k in enumerate(("baseline", "exploit",
                                                             "exploit"))) + "\n")
    (folder / "run.json").write_text(json.dumps({"run_id": run, "task": "softmax",
                                                 "state": state}))
    if report:
        (folder / "report.md").write_text("# report\n")


def _rows(page: str) -> list[str]:
    table = page[page.index('id="runs"'):page.index("</table>")]
    return table.split("<tr")[2:]


def test_own_runs_come_first_filled_in_and_a_crash_is_not_a_report(site: dict) -> None:
    runs_dir = site["kb"].settings.runs_dir
    _own_run(runs_dir, "zz-own-finished", "finished", report=True)
    _own_run(runs_dir, "zz-own-crashed", "failed", report=False)
    page = httpx.get(site["base"] + "/ui/runs", timeout=60).text
    rows = _rows(page)
    own = [r for r in rows if 'class="own"' in r]
    assert own and rows[:len(own)] == own, "the user's own runs lead the list"
    for run in ("zz-own-finished", "zz-own-crashed"):
        row = next(r for r in rows if f'data-run="{run}"' in r)
        assert '<td class="task">softmax</td>' in row  # from the journal's first record
        assert '<td class="hardware">-</td>' not in row
        assert '<td class="started">-</td>' not in row
    crashed = next(r for r in rows if 'data-run="zz-own-crashed"' in r)
    finished = next(r for r in rows if 'data-run="zz-own-finished"' in r)
    assert "report-crashed" in crashed and "yes" not in crashed
    assert "report-written" in finished


def test_an_unknown_op_on_what_worked_names_the_closest(site: dict) -> None:
    page = httpx.get(site["base"] + "/ui/insights", params={"op": "sofmax", "gpu": "h200"},
                     timeout=60)
    assert page.status_code == 404
    assert "closest" in page.text and 'id="closest"' in page.text
    assert ">softmax on NVIDIA H200</a>" in page.text
    page = httpx.get(site["base"] + "/ui/insights", params={"op": "nosuch"}, timeout=60)
    assert page.status_code == 404 and "unknown op" in page.text
    typed = httpx.get(site["base"] + "/ui/insights", params={"op": "Softmax", "gpu": "h200"},
                      timeout=60)
    assert typed.status_code == 200 and 'id="landscape-link"' in typed.text
