"""/docs with Swagger UI served from this app, so it works with no internet.

Why: FastAPI's default /docs loads Swagger UI's script and stylesheet from a CDN, and the
page is blank on an offline machine. The assets come from the ``swagger-ui-bundle-v2``
wheel (Swagger UI 5: version 4 cannot read the OpenAPI 3.1 that FastAPI writes), served
as FastAPI's self-hosting recipe does it: docs_url=None, a route of our own, static files.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

ASSETS = "/docs-assets"


def install_docs(app: FastAPI) -> None:
    """Serve Swagger UI at /docs from local assets (create the app with docs_url=None)."""
    app.mount(ASSETS, StaticFiles(directory=swagger_ui_path), name="docs-assets")
    redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} API",
            oauth2_redirect_url=redirect,
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png")

    @app.get(redirect, include_in_schema=False)
    def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
