"""Mount the pages, their stylesheet and script, and the charts' data on the service's app."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from kernelkb.web.chart_routes import router as chart_router
from kernelkb.web.pages import router
from kernelkb.web.render import HERE


def install_pages(app: FastAPI) -> None:
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="web_static")
    app.include_router(router)
    app.include_router(chart_router)
