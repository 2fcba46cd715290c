"""The dashboard at /ui: a static page (static/) over read-only JSON routes under /api/ui, admin key only."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"


def install(app: FastAPI) -> None:
    """Mount the page and its JSON routes. The page itself holds no data: every read needs the admin key."""
    from alight_server.ui.routes import router

    app.include_router(router, prefix="/api/ui")
    app.add_api_route("/ui", lambda: RedirectResponse("/ui/"), include_in_schema=False)
    app.mount("/ui/", StaticFiles(directory=STATIC, html=True), name="ui")
