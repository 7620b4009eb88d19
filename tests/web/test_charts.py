"""The interactive charts (Plotly, served from the installed plotly package): their JSON
over plain HTTP, then a real headless Chromium, offline, clicking through them: the
landscape's axes and colour, a point's hover and click, a live run's chart taking each
round as it lands, and the lineage graph's diff beside the clicked node."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

LANDSCAPE = {"op": "softmax", "gpu": "NVIDIA H200", "shape": "rows=4096,cols=32768"}
MULTI_REGIME_RUN = "matmul-20261202T001232-5e44ca"  # a shipped run over three regimes


def test_the_landscape_json_has_every_knob_and_metric(site: dict) -> None:
    base = site["base"]
    data = httpx.get(base + "/ui/landscape.json", params=LANDSCAPE, timeout=60).json()
    assert {"time (ms)", "GB/s", "% of peak", "measured or predicted"} <= set(data["metrics"])
    assert "NUM_WARPS" in data["knobs"] and data["points"]
    best = data["points"][0]
    assert best["exp_id"] == data["best"] and best["kind"] == "measured"
    assert best["time_ms"] == min(p["time_ms"] for p in data["points"]
                                  if p["kind"] == "measured")
    assert best["gbps"] and 0 < best["peak_pct"] <= 100  # the task's bytes, the H200's peak
    bad = httpx.get(base + "/ui/landscape.json", params=dict(LANDSCAPE, op="sofmax"),
                    timeout=60)
    assert bad.status_code == 404 and "softmax" in bad.json()["detail"]


def test_plotly_comes_from_the_installed_package_not_a_cdn(site: dict) -> None:
    from kernelkb.web.chart_routes import plotly_js

    base = site["base"]
    page = httpx.get(base + "/ui/landscape", params=LANDSCAPE, timeout=60).text
    assert 'src="/ui/vendor/plotly.min.js"' in page and "cdn" not in page.lower()
    served = httpx.get(base + "/ui/vendor/plotly.min.js", timeout=60)
    assert served.status_code == 200 and served.content == plotly_js().read_bytes()
    rounds = httpx.get(f"{base}/ui/runs/{MULTI_REGIME_RUN}/rounds.json", timeout=60).json()
    assert rounds["regimes"] == ["skinny", "medium", "large"]
    assert list(rounds["lineage"]) == rounds["regimes"]  # the loop below checks each of them
    for name, nodes in rounds["lineage"].items():
        ids = {n["id"] for n in nodes}
        assert all(n["parent"] in ids for n in nodes if n["parent"]), name
        assert sum(n["best"] for n in nodes) == 1, name
    assert httpx.get(f"{base}/ui/runs/no-such-run/rounds.json", timeout=60).status_code == 404


# -- in the browser ------------------------------------------------------------------------
def _wait(driver, condition, seconds: float = 30):  # type: ignore[no-untyped-def]
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds).until(condition)


def _ready(driver, css: str) -> None:  # type: ignore[no-untyped-def]
    _wait(driver, lambda d: d.execute_script(
        "const e = document.querySelector(arguments[0]); return e && e.dataset.ready;", css))


def _shots() -> Path | None:
    kept = os.environ.get("KERNELKB_SCREENSHOTS")
    return Path(kept) if kept else None


def _shot(driver, name: str) -> None:  # type: ignore[no-untyped-def]
    folder = _shots()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(folder / f"{name}.png"))


def _hover_text(driver, point) -> str:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    ActionChains(driver).move_to_element(point).perform()
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".hoverlayer .hovertext"), 10)
    return driver.find_element(By.CSS_SELECTOR, ".hoverlayer .hovertext").text


def test_landscape_axes_colour_hover_and_click(browser, site) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(site["base"] + "/ui/landscape?" + httpx.QueryParams(LANDSCAPE).__str__())
    _ready(browser, "#landscape-chart")
    assert not browser.find_element(By.ID, "landscape-plot").is_displayed()  # the PNG: no-js
    Select(browser.find_element(By.ID, "axis-x")).select_by_value("NUM_WARPS")
    Select(browser.find_element(By.ID, "axis-y")).select_by_value("GB/s")
    Select(browser.find_element(By.ID, "axis-colour")).select_by_value("% of peak")
    titles = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#landscape-chart .xtitle, "
                                                    "#landscape-chart .ytitle")]
    assert titles == ["NUM_WARPS", "GB/s"]
    assert browser.find_elements(By.CSS_SELECTOR, "#landscape-chart .colorbar")
    browser.execute_script("document.getElementById('landscape-axes').scrollIntoView()")
    _shot(browser, "web_landscape_interactive")
    data = httpx.get(site["base"] + "/ui/landscape.json", params=LANDSCAPE, timeout=60).json()
    points = browser.find_elements(By.CSS_SELECTOR, "#landscape-chart .scatterlayer .point")
    assert len(points) == sum(1 for p in data["points"] if p["gbps"])
    text = _hover_text(browser, points[0])
    assert "NUM_WARPS=" in text and "GB/s" in text
    old = browser.current_url
    ActionChains(browser).move_to_element(points[0]).click().perform()
    _wait(browser, lambda d: d.current_url != old)
    exp_id = browser.current_url.rsplit("/", 1)[-1]
    assert "/ui/experiences/" in browser.current_url
    assert exp_id in {p["exp_id"] for p in data["points"] if p["exp_id"]}


def test_lineage_graph_shows_the_clicked_nodes_diff(browser, site) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    browser.get(f"{site['base']}/ui/runs/{MULTI_REGIME_RUN}")
    _ready(browser, "#rounds-chart")
    data = httpx.get(f"{site['base']}/ui/runs/{MULTI_REGIME_RUN}/rounds.json",
                     timeout=60).json()
    assert browser.find_element(By.ID, "rounds-chart").get_attribute("data-points") == \
        str(len(data["rounds"]))
    graph = browser.find_elements(By.CSS_SELECTOR, ".lineage-graph")[0]
    browser.execute_script("arguments[0].scrollIntoView()", graph)
    nodes = graph.find_elements(By.CSS_SELECTOR, ".scatterlayer .trace:last-child .point")
    expected = data["lineage"]["skinny"]
    assert len(nodes) == len(expected)
    ActionChains(browser).move_to_element(nodes[1]).click().perform()
    panel = browser.find_element(By.ID, "lineage-node")
    _wait(browser, lambda d: panel.get_attribute("data-node"))
    shown = panel.get_attribute("data-node")
    node = next(n for n in expected if n["id"] == shown)
    assert panel.find_element(By.CSS_SELECTOR, ".node-link").text == node["id"]
    assert node["summary"] in panel.text
    diff = panel.find_element(By.CSS_SELECTOR, ".node-diff").text
    assert [ln for ln in node["diff"].splitlines() if ln.startswith("+")][0] in diff
    browser.execute_script("document.querySelector('.lineage-view').scrollIntoView()")
    _shot(browser, "web_run_lineage_graph")
    browser.execute_script("document.getElementById('rounds-chart').scrollIntoView()")
    _shot(browser, "web_run_candidates")


def _round(run: str, iteration: int) -> str:
    from kb_testdata import record_dict

    rec = record_dict(run=run, iteration=iteration, summary=f"candidate {iteration}")
    rec["provenance"]["round_kind"] = "baseline" if iteration == 0 else "exploit"
    rec["edit"].update(parent_hash=None if iteration == 0 else f"k{iteration - 1:07d}",
                       child_hash=f"k{iteration:07d}")
    return json.dumps(rec) + "\n"


@pytest.mark.slow
def test_a_live_runs_chart_takes_each_round_as_it_lands(browser, site) -> None:
    from selenium.webdriver.common.by import By

    run = "live-chart-run"
    folder = site["kb"].settings.runs_dir / run
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "journal.jsonl").write_text(_round(run, 0) + _round(run, 1))
    (folder / "run.json").write_text(json.dumps({"run_id": run, "state": "running"}))
    browser.get(f"{site['base']}/ui/runs/{run}")
    _ready(browser, "#rounds-chart")
    chart = browser.find_element(By.ID, "rounds-chart")
    assert chart.get_attribute("data-points") == "2"
    browser.execute_script("window.__same_page = 1")  # a reload would drop it
    with (folder / "journal.jsonl").open("a") as journal:
        journal.write(_round(run, 2))
    _wait(browser, lambda d: chart.get_attribute("data-points") == "3", 20)
    assert browser.execute_script("return window.__same_page") == 1
    assert "3 rounds so far" in browser.find_element(By.ID, "rounds-chart-status").text
    (folder / "run.json").write_text(json.dumps({"run_id": run, "state": "finished",
                                                 "stop_reason": "max_iters"}))
    _wait(browser, lambda d: d.execute_script("return window.__same_page") is None, 20)
    _wait(browser, lambda d: d.find_elements(By.ID, "stopped"), 20)
