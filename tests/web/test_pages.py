"""The web pages in a real headless Chromium against a live server: each page loads, shows
the figures the store holds (computed here from the same store, never typed in), its
plots load, filters work, untrusted text stays text, and /docs renders offline.

Screenshots go to a temp folder, or to KERNELKB_SCREENSHOTS; the README's
(docs/img/web_what_worked.png) is that folder's insights_softmax_h200.png."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from sqlmodel import select
from web_testdata import HUB_GPUS, HUB_OP, PLANT, PLANTED_RUN, hub_fastest

from kernelkb.kb.models import Hardware
from kernelkb.kb.queries import list_runs
from kernelkb.retrieval.hardware import gpu_similarity
from kernelkb.retrieval.ranker import default_facts
from kernelkb.web import runs as run_folders

# a real browser and server; skipped with the reason where no chromium is installed
# (CI installs it and sets KERNELKB_REQUIRE_BROWSER, which turns the skip into a failure)
pytestmark = pytest.mark.usefixtures("browser")


def _by(driver, css: str):  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, css)


def _one(driver, css: str):  # type: ignore[no-untyped-def]
    found = _by(driver, css)
    assert found, f"no {css} on {driver.current_url}"
    return found[0]


def _loaded_image(driver, css: str) -> int:  # type: ignore[no-untyped-def]
    """The image's natural width (0: it did not load)."""
    return int(driver.execute_script(
        "const i = document.querySelector(arguments[0]);"
        "return i && i.complete ? i.naturalWidth : 0;", css))


def _no_planted_code(driver) -> None:  # type: ignore[no-untyped-def]
    assert driver.execute_script("return window.__planted === undefined"), driver.current_url
    # the only scripts are the server's own files (Plotly's bundle, the charts): no inline one
    sources = driver.execute_script(
        "return Array.from(document.scripts).map(s => s.getAttribute('src') || '')")
    assert set(sources) <= {"/ui/vendor/plotly.min.js", "/ui/static/charts.js"}, sources


def _shot(driver, shots: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    path = shots / f"{name}.png"
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 0


def _follow(driver, element) -> None:  # type: ignore[no-untyped-def]
    """Click a link or submit button and wait for the next page: a click returns before the
    navigation, so reading current_url right after it can still see the old page.
    The old page is marked on its window object, which a new document does not have; a
    question asked while the page is swapped may fail (Chrome: "Node with given id does
    not belong to the document"), and is asked again."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_script("window.kernelkbOldPage = true")
    element.click()
    wait = WebDriverWait(driver, 15, ignored_exceptions=(WebDriverException,))
    wait.until(lambda d: d.execute_script("return window.kernelkbOldPage === undefined"))
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")


def _select(driver, name: str, value: str) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.support.ui import Select

    Select(_one(driver, f"#filter-{name}")).select_by_value(value)


def test_index_counts_and_grid(browser, site, shots) -> None:
    stats = site["kb"].stats()
    browser.get(site["base"] + "/")
    assert browser.title.startswith("Overview")
    assert _one(browser, "#stat-experiences").text == str(stats["experiences"])
    assert _one(browser, "#stat-runs").text == str(stats["runs"])
    grid = _one(browser, "#grid").text
    assert stats["by_gpu"] and stats["by_op"]  # the seeded store: the loops check something
    for gpu in stats["by_gpu"]:
        assert gpu in grid
    for op in stats["by_op"]:
        assert op in grid
    # the CPU interpreter's rows are in the grid, marked, but it is not counted as a GPU
    assert "cpu-interpreter" in stats["by_gpu"]
    assert _one(browser, "#stat-gpus").text == str(len(stats["by_gpu"]) - 1)
    assert "cpu-interpreter" in _one(browser, "#grid tr.interpreter").text
    assert "cpu-interpreter" in _one(browser, "#interpreter-note").text
    _shot(browser, shots, "index")
    # a grid cell leads to what worked for that op on that GPU
    link = _one(browser, "#grid td a")
    _follow(browser, link)
    query = parse_qs(urlparse(browser.current_url).query)
    assert query["op"] and query["gpu"] and "/ui/insights" in browser.current_url


def test_what_worked_per_gpu_and_op_with_the_triton_filter(browser, site, shots) -> None:
    kb = site["kb"]
    browser.get(site["base"] + "/ui/insights?op=softmax&gpu=NVIDIA+H200")
    expected = kb.insights(op_type="softmax", gpu_name="NVIDIA H200")
    assert _one(browser, "#total").text == str(expected.total)
    rows = _by(browser, "#categories tr")[1:]
    assert [r.find_elements("css selector", "td")[0].text for r in rows] == \
        [c.category for c in expected.categories]
    first = expected.categories[0]
    cells = [td.text for td in rows[0].find_elements("css selector", "td")]
    assert cells[1:4] == [str(first.count), str(first.wins), str(first.significant_wins)]
    assert first.significant_wins > 0  # the shipped softmax sweep: every verdict an interval
    if first.median_speedup:
        assert cells[5] == f"{first.median_speedup:.2f}x"
    assert _loaded_image(browser, "#insights-plot") > 0
    _shot(browser, shots, "insights_softmax_h200")

    # the Triton version filter: choose a version in the form, the counts follow
    version = sorted(kb.stats()["by_triton"])[-1]
    _select(browser, "triton", version)
    _follow(browser, _one(browser, "form.filters button"))
    assert parse_qs(urlparse(browser.current_url).query)["triton"] == [version]
    filtered = kb.insights(op_type="softmax", gpu_name="NVIDIA H200", triton_version=version)
    assert _one(browser, "#total").text == str(filtered.total)
    assert _loaded_image(browser, "#insights-plot") > 0
    browser.get(site["base"] + "/ui/insights?op=softmax&gpu=NVIDIA+H200&triton=0.0.0-none")
    assert _one(browser, "#total").text == "0"
    assert "no experiences match" in _one(browser, "#categories").text


def test_experience_browser_filters_and_links_by_full_id(browser, site, shots) -> None:
    kb = site["kb"]
    browser.get(site["base"] + "/ui/experiences")
    _select(browser, "op", "rope")
    _select(browser, "verdict", "improved")
    _follow(browser, _one(browser, "form.filters button"))
    page = kb.list(op_type="rope", verdict="improved", limit=50)
    assert page.total > 0
    assert _one(browser, "#total").text == str(page.total)
    links = _by(browser, "#experiences td.mono a")
    assert [a.text for a in links] == [r.id for r in page.items]
    _shot(browser, shots, "experiences_rope_improved")

    target = page.items[0]
    _follow(browser, links[0])
    assert browser.current_url.endswith(f"/ui/experiences/{target.id}")
    assert re.fullmatch(r"[0-9a-f]{32}", _one(browser, "#exp-id").text) and \
        _one(browser, "#exp-id").text == target.id
    assert target.edit.summary in _one(browser, "#summary").text
    assert _by(browser, "#diff .hl .gi") or _by(browser, "#diff .hl .gd")  # highlighted +/-
    assert _one(browser, "#evidence").text.startswith(target.evidence)
    assert target.feedback.text.splitlines()[0] in _one(browser, "#feedback-text").text
    assert len(_by(browser, "#timings tr")) == len(target.feedback.timings) + 1
    _shot(browser, shots, "experience")

    browser.get(site["base"] + "/ui/experiences/" + "0" * 32)
    assert "No experience" in _one(browser, "p.note").text


def test_untrusted_text_is_shown_as_text(browser, site, shots) -> None:
    exp_id = site["planted"]
    browser.get(site["base"] + f"/ui/experiences/{exp_id}")
    _no_planted_code(browser)
    assert PLANT in _one(browser, "#summary").text
    assert PLANT in _one(browser, "#rationale").text
    assert PLANT in _one(browser, "#feedback-text").text
    assert PLANT in _one(browser, "#diff").text
    _shot(browser, shots, "planted")
    for path in ("/ui/experiences?op=softmax", f"/ui/runs/{PLANTED_RUN}", "/ui/runs",
                 "/ui/insights?op=softmax", "/ui/compare?op=softmax"):
        browser.get(site["base"] + path)
        _no_planted_code(browser)
    browser.get(site["base"] + f"/ui/runs/{PLANTED_RUN}")
    assert PLANT[:30] in _one(browser, "#rounds").text


def test_runs_show_rounds_best_so_far_and_the_sweep_against_peers(browser, site, shots) -> None:
    kb = site["kb"]
    with kb.session() as session:
        stored = [r.run_id for r in list_runs(session)]
    folders = {f.run_id for f in run_folders.all_folders(kb.settings)}
    browser.get(site["base"] + "/ui/runs")
    table = _one(browser, "#runs").text
    for run_id in stored:
        assert run_id in table

    run_id = MULTI_REGIME_RUN  # a shipped run whose rounds carry their comparisons
    assert run_id in stored and run_id in folders
    browser.get(site["base"] + f"/ui/runs/{run_id}")
    records = kb.list(run_id=run_id, limit=1000).items
    rounds = run_folders.rounds_of(records)
    rows = _by(browser, "#rounds tr")[1:]
    assert len(rows) == len(rounds)
    assert [r.find_elements("css selector", "td")[-1].text for r in rows] == \
        [r.id for r in rounds]
    assert run_folders.best_so_far(rounds), "a GPU run has timed rounds"
    figures = run_folders.regime_figures(records)
    assert figures and all(f.ratio for f in figures)  # a figure per regime
    assert [e.text for e in _by(browser, "#regime-best .ratio")] == \
        [f"{f.ratio:.2f}x" for f in figures]
    assert _loaded_image(browser, "#best-plot") > 0
    folder = run_folders.find_folder(kb.settings, run_id)
    assert folder is not None and folder.stop_reason()
    assert _one(browser, "#stopped").text == folder.stop_reason()
    report = _one(browser, "#report").text
    assert "Against the peers" in report and "vs best peer" in report
    assert _loaded_image(browser, "img.report-plot") > 0
    _shot(browser, shots, "run")
    browser.get(site["base"] + "/ui/runs/no-such-run")
    assert "No run no-such-run" in _one(browser, "p.note").text


def test_api_docs_render_with_no_internet(browser, site, shots) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(site["base"] + "/docs")
    WebDriverWait(browser, 30).until(
        lambda d: d.find_elements("css selector", ".swagger-ui .info .title"))
    assert "KernelKB" in _one(browser, ".swagger-ui .info .title").text
    WebDriverWait(browser, 30).until(lambda d: d.find_elements("css selector", ".opblock"))
    assert any("/retrieve" in op.text for op in _by(browser, ".opblock"))
    sources = browser.execute_script(
        "return [...document.querySelectorAll('script[src],link[href]')]"
        ".map(e => e.src || e.href)")
    assert sources and all(s.startswith(site["base"]) for s in sources), sources
    _shot(browser, shots, "docs")


# a shipped run over three regimes whose rounds and final sweeps carry comparisons (the
# older runs' rounds ship untimed: their figures had no interval)
MULTI_REGIME_RUN = "matmul-20261202T001232-5e44ca"


def _report_vs_start(folder) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """The "vs start" column of the run report's per-regime table (optimizer/report.py)."""
    out = {}
    text = folder.report.read_text()
    table = text[text.index("## Per regime"):text.index("# Regime ")]
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 8 and cells[6].endswith("x"):
            out[cells[0]] = cells[6]
    return out


def test_a_multi_regime_run_is_shown_per_regime_with_its_lineage(browser, site, shots) -> None:
    """The header once said 4.27x (one regime's best over another's start): each regime
    now has its own figure, the one the run's report gives where its final sweep was
    timed; the rounds say their regime, and the lineage links parent to child."""
    kb = site["kb"]
    records = kb.list(run_id=MULTI_REGIME_RUN, limit=1000).items
    folder = run_folders.find_folder(kb.settings, MULTI_REGIME_RUN)
    assert folder is not None and records
    browser.get(site["base"] + f"/ui/runs/{MULTI_REGIME_RUN}")
    _no_planted_code(browser)  # no script on the page: the tree is plain nested lists
    rows = _by(browser, "#regime-best tr[data-regime]")
    regimes = [r.get_attribute("data-regime") for r in rows]
    assert regimes == ["skinny", "medium", "large"]
    report = _report_vs_start(folder)
    figures = {f.regime: f for f in run_folders.regime_figures(records)}
    for row in rows:
        regime = row.get_attribute("data-regime")
        shown = row.find_element("css selector", ".ratio").text
        assert shown == f"{figures[regime].ratio:.2f}x"
        if figures[regime].basis == "final sweep":  # the report's figure, on the same shapes
            # within the noise floor: the report divides its own rounded milliseconds
            # (0.1926 / 0.0838 = 2.30x), the record holds the final sweep's interleaved
            # comparison (2.24x)
            assert abs(float(shown[:-1]) / float(report[regime][:-1]) - 1) <= 0.03, \
                (regime, shown, report)
    assert {r for r, f in figures.items() if f.basis == "final sweep"} == set(regimes)

    rounds = run_folders.rounds_of(records)
    cells = [td.text for td in _by(browser, "#rounds td.regime")]
    assert cells == [r.task.regime for r in rounds]
    assert cells.index("medium") > cells.index("skinny")  # a regime at a time
    assert _loaded_image(browser, "#best-plot") > 0

    # the lineage: every round once, under the round that made its parent kernel
    by_id = {r.id: r for r in records}
    for regime in regimes:
        nodes = _by(browser, f'#lineage section[data-regime="{regime}"] li.node')
        assert sorted(n.get_attribute("data-exp") for n in nodes) == \
            sorted(r.id for r in rounds if r.task.regime == regime)
        parents = browser.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map(li => "
            "[li.dataset.exp, li.parentElement.closest('li.node')?.dataset.exp || null])",
            f'#lineage section[data-regime="{regime}"] li.node')
        roots = [child for child, parent in parents if parent is None]
        assert [by_id[r].provenance.round_kind for r in roots] == ["baseline"]
        for child, parent in parents:
            if parent is not None:
                assert by_id[parent].edit.child_hash == by_id[child].edit.parent_hash
                assert by_id[parent].iteration < by_id[child].iteration
        best = _by(browser, f'#lineage section[data-regime="{regime}"] li.node.best')
        assert len(best) == 1
        sweep = run_folders.sweeps_of(records).get(regime)
        if sweep is not None:  # the best node made the kernel the final sweep timed
            assert by_id[best[0].get_attribute("data-exp")].edit.child_hash == \
                sweep.edit.child_hash
    _shot(browser, shots, "run_regimes_lineage")

    target = _one(browser, '#lineage section[data-regime="large"] li.node.best > a')
    exp_id = target.find_element("xpath", "..").get_attribute("data-exp")
    _follow(browser, target)
    assert browser.current_url.endswith(f"/ui/experiences/{exp_id}")
    assert _one(browser, "#regime").text == "large"

    browser.get(site["base"] + "/ui/runs")
    listed = [tr.get_attribute("data-run") for tr in _by(browser, "#runs tr[data-run]")]
    assert MULTI_REGIME_RUN in listed, (browser.current_url, browser.title, listed)
    row = _one(browser, f'#runs tr[data-run="{MULTI_REGIME_RUN}"]')
    spans = [s.text for s in row.find_elements("css selector", ".best-speedup .per-regime")]
    assert [s.split()[0] for s in spans] == regimes


def test_gpus_compared_for_one_op(browser, site, shots) -> None:
    """From the index's op header: per GPU the fastest configuration (the fabricated
    hub's, by construction), how the bests differ and the ranker's similarity."""
    browser.get(site["base"] + "/")
    _follow(browser, next(a for a in _by(browser, "#grid a.compare-link") if a.text == HUB_OP))
    assert parse_qs(urlparse(browser.current_url).query)["op"] == [HUB_OP]
    gpus = [tr.get_attribute("data-gpu") for tr in _by(browser, "#gpus tr[data-gpu]")]
    assert sorted(gpus) == sorted(HUB_GPUS.values())
    cells = _by(browser, "#fastest tr[data-shape] td.cell")
    assert len(cells) == 2
    for gpu, cell in zip(gpus, cells, strict=True):
        config, ms = hub_fastest(gpu)
        assert cell.find_element("css selector", ".time").text == f"{ms:.4f}"
        assert ", ".join(f"{k}={v}" for k, v in config.items()) in cell.text
    (a_config, _), (b_config, _) = (hub_fastest(g) for g in gpus)
    differ = _one(browser, "#differences").text
    changed = [knob for knob in a_config if a_config[knob] != b_config[knob]]
    assert changed and all(knob in differ for knob in changed), (changed, differ)
    with site["kb"].session() as session:
        facts = {h.gpu_name: default_facts(h) for h in session.exec(select(Hardware)).all()}
    pair = f"{gpus[0]}|{gpus[1]}"
    assert _one(browser, f'#similarity td[data-pair="{pair}"]').text == \
        f"{gpu_similarity(facts[gpus[0]], facts[gpus[1]]):.2f}"
    _shot(browser, shots, "compare_convolution")

    # the CPU interpreter's softmax round is no GPU here either
    browser.get(site["base"] + "/ui/compare?op=softmax")
    assert [tr.get_attribute("data-gpu") for tr in _by(browser, "#gpus tr[data-gpu]")] == \
        ["NVIDIA H200"]
    assert _by(browser, "#fastest tr[data-shape]") and _by(browser, "#no-shared")


def test_imported_tuning_data_reads_as_measurements(browser, site, shots) -> None:
    """Kernel Tuner configurations are not edits: no win rate, but the fastest
    configurations and the spread of the times; edits keep their win rates."""
    gpu = HUB_GPUS["A100.json"]
    browser.get(site["base"] + "/ui/insights?" + f"op={HUB_OP}&gpu={gpu}")
    page = _one(browser, "main").text
    assert "win rate" not in page and not _by(browser, "#categories")
    assert _by(browser, "#no-edits")
    source = _one(browser, "section.source")
    configs, timed, failed = (td.text for td in source.find_elements(
        "css selector", "table.spread td")[:3])
    assert (configs, timed, failed) == ("12", "11", "1")  # one fails to compile
    config, ms = hub_fastest(gpu)
    first = source.find_elements("css selector", "table.fastest tr")[1].text
    assert ", ".join(f"{k}={v}" for k, v in config.items()) in first and f"{ms:.4f}" in first
    assert _loaded_image(browser, "#measured-plot") > 0
    _shot(browser, shots, "insights_imported_convolution")

    browser.get(site["base"] + "/ui/insights?op=softmax&gpu=NVIDIA+H200")
    assert "win rate" in _one(browser, "#categories").text  # edits: still win rates
    assert _by(browser, "section.source")  # and the space measurement's fastest


def test_landscape_page_plots_measured_and_predicted(browser, site, shots) -> None:
    """From the comparison page to the landscape of the A100: its plot loads, the
    predicted configurations are listed apart from the measured, the shape picker works."""
    browser.get(site["base"] + f"/ui/compare?op={HUB_OP}")
    _follow(browser, _one(browser, f'tr[data-gpu="{HUB_GPUS["A100.json"]}"] a.landscape-link'))
    assert "/ui/landscape" in browser.current_url
    assert _loaded_image(browser, "#landscape-plot") > 0
    _, fastest = hub_fastest(HUB_GPUS["A100.json"])
    first = _one(browser, "#landscape-fastest tr.measured").text
    assert f"{fastest:.4f}" in first
    assert _by(browser, "#landscape-predicted tr.predicted")
    _select(browser, "shape", "problem_size=4096x4096")
    _follow(browser, _one(browser, "form.filters button"))
    assert "shape=problem_size" in browser.current_url
    _shot(browser, shots, "landscape_convolution_a100")


def test_live_run_page_updates_itself_until_the_run_ends(browser, site, shots) -> None:
    import json
    import time

    from kb_testdata import record_dict

    run = "live-browser-run"
    folder = site["kb"].settings.runs_dir / run
    folder.mkdir(parents=True, exist_ok=True)
    rec = record_dict(run=run, iteration=0, summary="starting kernel")
    rec["provenance"]["round_kind"] = "baseline"
    (folder / "journal.jsonl").write_text(json.dumps(rec) + "\n")
    (folder / "run.json").write_text(json.dumps({"state": "running", "candidate": {
        "iteration": 1, "kind": "explore", "summary": "widen BLOCK_SIZE"}}))
    browser.get(f"{site['base']}/ui/runs/{run}")
    deadline = time.time() + 10  # a loaded host: the page may swap its parts in first
    while time.time() < deadline and not _by(browser, "#candidate"):
        time.sleep(0.5)
    assert "widen BLOCK_SIZE" in _one(browser, "#candidate").text
    _shot(browser, shots, "run_live")
    (folder / "journal.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps(
        record_dict(run=run, iteration=1, summary="widened BLOCK_SIZE")) + "\n")
    deadline = time.time() + 12  # the page asks every 3 s and swaps its tables in
    while time.time() < deadline and "widened BLOCK_SIZE" not in \
            _one(browser, "#rounds").text:
        time.sleep(0.5)
    assert "widened BLOCK_SIZE" in _one(browser, "#rounds").text
    (folder / "run.json").write_text(json.dumps({"state": "finished", "candidate": None,
                                                 "stop_reason": "patience"}))
    time.sleep(4)
    assert not _by(browser, "#live")
    assert not _by(browser, 'meta[http-equiv="refresh"]')
