"""The page routes over plain HTTP (no browser needed): what they refuse and what they
serve, on the live server of conftest.py."""

from __future__ import annotations

import httpx
import pytest

RUN = "rope-20261129T144940-8e7697"  # a shipped run folder (benchmarks/runs)


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
                 "/ui/plots/insights.png?op=rope&gpu=NVIDIA+H200&triton=3.6.0"):
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
