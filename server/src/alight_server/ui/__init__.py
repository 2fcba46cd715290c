"""The dashboard at /ui: a static page (static/) over read-only JSON routes under /api/ui, admin key only."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

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


def run_link(server_url: str, run_id: str, key_file: Path | None) -> str:
    """The line `alight train` prints at start: where the run's page is live, and where the admin key is."""
    key = f'"admin_key" in {key_file} (mode 0600)' if key_file else "the server's admin key (ALIGHT_ADMIN_KEY)"
    return f"dashboard, live while this run trains: {server_url}/ui/#/run/{quote(run_id, safe='')} · admin key: {key}"
