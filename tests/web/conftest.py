"""A real server on a temp store seeded with the shipped seeds, and a headless Chromium.

The browser is Debian's ``chromium`` + ``chromium-driver`` (``.ci/run`` and
``scripts/setup.sh`` install them). Without them a local run skips these tests and says
why; where KERNELKB_REQUIRE_BROWSER or CI is set, a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from kb_testdata import make_knowledge  # noqa: E402
from live_server import live_server  # noqa: E402
from web_testdata import import_hub, interpreter_record, planted_record, write_hub  # noqa: E402

SEEDS = ROOT / "seeds"


@pytest.fixture(scope="package")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The live server's base URL on a store holding the seeds, the H200 run folders, the
    planted record, an imported hub folder (web_testdata.write_hub) and a CPU-interpreter round."""
    root = tmp_path_factory.mktemp("web-store")
    # the H200 run folders the README quotes, as `optimize` leaves them under a home
    shutil.copytree(ROOT / "benchmarks" / "runs", root / "runs")
    # vectors off: the pages read SQL only, and this keeps seeding at seconds
    kb = make_knowledge(root, seeds_dir=SEEDS, vectors=False, runs_dir=root / "runs")
    kb.seed_if_empty()
    report = kb.ingest([planted_record()])
    assert report.accepted, report
    assert import_hub(kb, write_hub(root)) == 24
    assert kb.ingest([interpreter_record()]).accepted
    with live_server(kb) as port:
        yield {"base": f"http://127.0.0.1:{port}", "kb": kb, "planted": report.accepted[0]}
    kb.close()


def _browser_missing() -> str | None:
    for name in ("chromium", "chromedriver"):
        if shutil.which(name) is None:
            return f"{name} is not installed (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e .[dev])"
    return None


@pytest.fixture(scope="package")
def browser() -> Iterator[object]:
    missing = _browser_missing()
    if missing:
        if os.environ.get("KERNELKB_REQUIRE_BROWSER") or os.environ.get("CI"):
            pytest.fail(f"browser tests are required here but {missing}")
        pytest.skip(f"no headless browser: {missing}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--no-proxy-server",
                # offline: every host but loopback fails to resolve, as on a machine
                # without internet (a CDN asset would leave /docs blank)
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="package")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go (KERNELKB_SCREENSHOTS to keep them)."""
    kept = os.environ.get("KERNELKB_SCREENSHOTS")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        return Path(kept)
    return tmp_path_factory.mktemp("screenshots")
