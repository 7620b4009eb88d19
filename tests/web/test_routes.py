"""The page routes over plain HTTP (no browser needed): what they refuse and what they
serve, on the live server of conftest.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from kernelkb.service import LocalKnowledge

RUN = "rope-20261129T144940-8e7697"  # a shipped run folder (benchmarks/runs)
MULTI_REGIME_RUN = "softmax-20261130T195004-f7639e"  # one over three regimes


@pytest.mark.parametrize("path", [
    f"/ui/runs/{RUN}/files/..%2F..%2Fpyproject.toml",
    f"/ui/runs/{RUN}/files/report.md",  # only the folder's PNGs are served
    f"/ui/runs/{RUN}/files/.hidden.png",
    "/ui/runs/..%2F..%2Fkb/files/x.png",
    "/ui/runs/no-such-run",
    "/ui/experiences/" + "f" * 65,
])
def test_paths_outside_the_runs_and_unknown_ids_are_not_found(site: dict, path: str) -> None:
    response = httpx.get(site["base"] + path, timeout=60)
    assert response.status_code == 404, (path, response.status_code)
    assert "pyproject" not in response.text


def test_plots_are_pngs_and_pages_are_not_in_the_api_schema(site: dict) -> None:
    base = site["base"]
    for path in (f"/ui/runs/{RUN}/best.png", f"/ui/runs/{RUN}/files/shape_speedup.png",
                 "/ui/plots/insights.png?op=rope&gpu=NVIDIA+H200&triton=3.6.0",
                 f"/ui/runs/{MULTI_REGIME_RUN}/best.png",
                 "/ui/plots/measurements.png?op=convolution&gpu=NVIDIA+RTX+A6000",
                 "/ui/plots/measurements.png?op=no-such-op"):
        response = httpx.get(base + path, timeout=60)
        assert response.status_code == 200, path
        assert response.headers["content-type"] == "image/png"
        assert response.content.startswith(b"\x89PNG\r\n\x1a\n")
    paths = httpx.get(base + "/openapi.json", timeout=60).json()["paths"]
    assert paths and not [p for p in paths if p == "/" or p.startswith("/ui")]


def test_docs_assets_are_served_here(site: dict) -> None:
    base = site["base"]
    page = httpx.get(base + "/docs", timeout=60).text
    assert "cdn" not in page.lower()
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        assert f"/docs-assets/{asset}" in page
        response = httpx.get(f"{base}/docs-assets/{asset}", timeout=60)
        assert response.status_code == 200 and len(response.content) > 10_000


@pytest.fixture
def backend(tmp_path: Path) -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) without vectors (the pages read SQL), its run
    folders under tmp_path/runs."""
    return {"vectors": False, "runs_dir": tmp_path / "runs"}


def test_stored_names_and_run_folders_that_once_failed_a_page(
        knowledge: LocalKnowledge, tmp_path: Path) -> None:
    """A run id with "/" (importers build them from kernel names) is shown without a link
    (no route can match it) instead of failing every page that lists it; "$...$" in a
    name is text in a chart's title, not mathtext; a journal cut mid-character and a
    symlinked "PNG" in a run folder do not fail or leak through the run page."""
    from kb_testdata import record_dict
    from live_server import live_server

    kb = knowledge
    record = record_dict(op="$\\bogus$", run="run/with/slash", summary="odd names")
    record["env"]["gpu_name"] = "GPU $^^$"
    exp_id = kb.ingest([record]).accepted[0]
    folder = tmp_path / "runs" / "cut-journal"
    folder.mkdir(parents=True)
    (folder / "journal.jsonl").write_bytes(b"not json\n\xff\xfe bad\n")
    (tmp_path / "secret.txt").write_text("outside the runs folder")
    (folder / "leak.png").symlink_to(tmp_path / "secret.txt")
    with live_server(kb) as port:
        base = f"http://127.0.0.1:{port}"
        for path in ("/", "/ui/runs", f"/ui/experiences/{exp_id}"):
            page = httpx.get(base + path, timeout=60)
            assert page.status_code == 200, (path, page.text[-300:])
            assert "run/with/slash" in page.text
        chart = httpx.get(base + "/ui/plots/insights.png",
                          params={"op": "$\\bogus$", "gpu": "GPU $^^$"}, timeout=60)
        assert chart.status_code == 200 and chart.content.startswith(b"\x89PNG")
        assert httpx.get(f"{base}/ui/runs/cut-journal", timeout=60).status_code == 200
        leak = httpx.get(f"{base}/ui/runs/cut-journal/files/leak.png", timeout=60)
        assert leak.status_code == 404 and "outside" not in leak.text


def test_links_do_not_follow_the_host_header(site: dict) -> None:
    """Pages link by path: a client's Host header (cache poisoning, links to elsewhere)
    never ends up in them."""
    for path in ("/", "/ui/insights?op=softmax&gpu=NVIDIA+H200", "/ui/experiences",
                 "/ui/runs", f"/ui/runs/{RUN}", "/ui/compare?op=convolution",
                 "/ui/insights?op=convolution&gpu=NVIDIA+RTX+A6000"):
        # (a foreign name is refused on a server without a token: kernelkb/api/same_machine.py)
        response = httpx.get(site["base"] + path, headers={"Host": "127.0.0.2:9"},
                             timeout=60)
        assert response.status_code == 200, path
        assert "127.0.0.2" not in response.text, path
        assert 'href="/ui/experiences"' in response.text, path


def test_the_comparison_page_without_an_op_or_with_an_unknown_one(site: dict) -> None:
    base = site["base"]
    page = httpx.get(base + "/ui/compare", timeout=60)
    assert page.status_code == 200 and 'id="filter-op"' in page.text
    assert '<option value="convolution"' in page.text  # measured ops are the choices
    assert '<option value="cpu-interpreter"' not in page.text
    page = httpx.get(base + "/ui/compare", params={"op": "no-such-op"}, timeout=60)
    assert page.status_code == 200 and 'id="no-gpus"' in page.text
    long = httpx.get(base + "/ui/compare", params={"op": "x" * 5000}, timeout=60)
    assert long.status_code == 422  # filter values are bounded, as on every page


def _journal_line(iteration: int, parent: str | None, child: str) -> str:
    """A journal line as the loop writes it, less the id (a reader fills it in)."""
    from kb_testdata import record_dict

    rec = record_dict(run="lineage-run", iteration=iteration, summary=f"step {iteration}",
                      config={"STEP": iteration})
    rec["edit"].update(parent_hash=parent, child_hash=child)
    rec["task"]["regime"] = "short_rows"
    if parent is None:
        rec["provenance"]["round_kind"] = "baseline"
    return json.dumps(rec)


def test_a_deep_lineage_and_a_hash_loop_render_as_a_tree(site: dict) -> None:
    """A chain of rounds nests as deep as it is long (no recursion to overflow), and
    hashes that loop (a round's parent kernel made only by a later round) cannot make
    a cycle: only an earlier round is a parent."""
    folder = site["kb"].settings.runs_dir / "lineage-run"
    folder.mkdir(parents=True, exist_ok=True)
    depth = 1200
    lines = [_journal_line(0, None, "h00000000")]
    lines += [_journal_line(i, f"h{i - 1:08d}", f"h{i:08d}") for i in range(1, depth)]
    lines.append(_journal_line(depth, "h99999999", "hloop0000"))  # made by no earlier round
    lines.append(_journal_line(depth + 1, "hloop0000", "h99999999"))
    (folder / "journal.jsonl").write_text("\n".join(lines) + "\n")
    page = httpx.get(site["base"] + "/ui/runs/lineage-run", timeout=60)
    assert page.status_code == 200
    lineage = page.text[page.text.index('id="lineage"'):]
    assert lineage.count('<li class="node') == depth + 2
    # a list for the forest, one under each round of the chain but its last, one under
    # the loop's first round (whose child is the loop's second): all closed
    assert lineage.count("<ul") == lineage.count("</ul>") == 1 + (depth - 1) + 1
    assert lineage.count("from no earlier round") == 1  # the loop's first round


def test_the_importers_of_one_problem_size_per_file_are_the_ones_named() -> None:
    """The measurements view skips reading the JSON of these agents' rows."""
    from kernelkb.kb.importers import kernel_tuner, t4
    from kernelkb.retrieval.views import ONE_SHAPE_PER_FILE

    assert ONE_SHAPE_PER_FILE == (kernel_tuner.AGENT, t4.AGENT)


def test_the_landscape_page_its_plot_and_unknown_names(site: dict) -> None:
    base = site["base"]
    params = {"op": "softmax", "gpu": "NVIDIA H200", "shape": "rows=4096,cols=32768"}
    page = httpx.get(base + "/ui/landscape", params=params, timeout=60)
    assert page.status_code == 200 and 'id="landscape-plot"' in page.text
    assert '<option value="rows=1,cols=32000"' in page.text  # the shape picker
    plot = httpx.get(base + "/ui/plots/landscape.png", params=params, timeout=60)
    assert plot.status_code == 200 and plot.content.startswith(b"\x89PNG")
    for bad, closest in ((dict(params, op="sofmax"), "softmax"),
                         (dict(params, gpu="H200"), "NVIDIA H200"),
                         (dict(params, shape="rows=4096,cols=32767"), "rows=4096,cols=32768")):
        page = httpx.get(base + "/ui/landscape", params=bad, timeout=60)
        assert page.status_code == 404 and 'id="unknown"' in page.text, bad
        assert f">{closest}</a>" in page.text, bad
        assert httpx.get(base + "/ui/plots/landscape.png", params=bad,
                         timeout=60).status_code == 404
    links = httpx.get(base + "/ui/compare", params={"op": "softmax"}, timeout=60).text
    assert 'class="landscape-link"' in links
    worked = httpx.get(base + "/ui/insights", params={"op": "softmax", "gpu": "NVIDIA H200"},
                       timeout=60).text
    assert 'id="landscape-link"' in worked


def test_a_live_run_shows_its_rounds_and_refreshes_until_it_ends(site: dict) -> None:
    """A run folder as `optimize` leaves it mid-run: a journal of two rounds and the
    loop's run.json (running, the candidate under evaluation): the page shows the rounds,
    the best so far and the candidate, and reloads itself; once run.json says the run
    finished, it stops reloading and names what stopped it."""
    run = "live-run-1"
    folder = site["kb"].settings.runs_dir / run
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.loads(_journal_line(0, None, "h0000000")),
             json.loads(_journal_line(1, "h0000000", "h1111111"))]
    for rec in lines:
        rec["run_id"] = run
    (folder / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (folder / "run.json").write_text(json.dumps({
        "run_id": run, "state": "running", "candidate": {
            "iteration": 2, "kind": "explore", "summary": "try NUM_WARPS 8",
            "regime": "short_rows"}}))
    url = f"{site['base']}/ui/runs/{run}"
    page = httpx.get(url, timeout=60).text
    assert '<meta http-equiv="refresh" content="3">' in page
    assert 'id="live"' in page and "2 rounds so far" in page
    assert "try NUM_WARPS 8" in page[page.index('id="candidate"'):]
    rounds = page[page.index('id="rounds"'):page.index("</table>", page.index('id="rounds"'))]
    assert "step 0" in rounds and "step 1" in rounds
    assert "Best so far" in page and 'id="regime-best"' in page
    listed = httpx.get(f"{site['base']}/ui/runs", timeout=60).text
    row = listed[listed.index(f">{run}<"):]
    assert 'live-run">under way' in row[:row.index("</tr>")]  # the list marks it
    (folder / "run.json").write_text(json.dumps({  # the loop ends: run_file.finish
        "run_id": run, "state": "finished", "candidate": None, "stop_reason": "max_iters",
        "sections": ""}))
    page = httpx.get(url, timeout=60).text
    assert "http-equiv" not in page and 'id="live"' not in page
    assert 'id="stopped"' in page
    listed = httpx.get(f"{site['base']}/ui/runs", timeout=60).text
    row = listed[listed.index(f">{run}<"):]
    assert "under way" not in row[:row.index("</tr>")] and "max_iters" in row[:row.index("</tr>")]


def test_a_round_on_several_gpus_shows_each_gpus_candidate(site: dict) -> None:
    """run.json of a round measured on several GPUs (RunFile.evaluating with slots): the
    live page lists where each candidate runs, its round and what it tries."""
    run = "live-gpus-run"
    folder = site["kb"].settings.runs_dir / run
    folder.mkdir(parents=True, exist_ok=True)
    rec = json.loads(_journal_line(0, None, "h0000000"))
    rec["run_id"] = run
    (folder / "journal.jsonl").write_text(json.dumps(rec) + "\n")
    slots = [{"iteration": 1 + i, "summary": f"try NUM_WARPS {2 ** i}", "where": f"GPU {i}"}
             for i in range(3)]
    (folder / "run.json").write_text(json.dumps({
        "run_id": run, "state": "running", "candidate": {
            "iteration": 1, "kind": "exploit", "summary": "3 candidates", "regime": None,
            "slots": slots}}))
    page = httpx.get(f"{site['base']}/ui/runs/{run}", timeout=60).text
    table = page[page.index('id="workers"'):page.index("</table>", page.index('id="workers"'))]
    rows = table.split("<tr>")[2:]
    assert len(rows) == 3
    for slot, row in zip(slots, rows, strict=True):
        assert f'<td class="where">{slot["where"]}</td>' in row
        assert slot["summary"] in row and f'>{slot["iteration"]}<' in row
