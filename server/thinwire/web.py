"""Serving a Vite-built page: jinja2 renders the HTML shell from the build manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from thinwire.browser import PAGE_HEADERS

__all__ = ["web_routes"]

templates = Environment(
    loader=PackageLoader("thinwire", "templates"), autoescape=select_autoescape()
)


def entry_assets(web_dir: Path) -> dict[str, Any] | None:
    """Script and stylesheets of the build's entry, or None when there is no build."""
    manifest_path = web_dir / ".vite" / "manifest.json"
    if not manifest_path.is_file():
        return None
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    entry = next((chunk for chunk in manifest.values() if chunk.get("isEntry")), None)
    if entry is None:
        return None
    return {"script": "/" + entry["file"], "styles": ["/" + css for css in entry.get("css", [])]}


def web_routes(web_dir: Path, title: str = "thinwire demo") -> list[BaseRoute]:
    async def page(request: Request) -> Response:
        # Read per request so a rebuilt page is served without a restart.
        assets = entry_assets(web_dir)
        html = templates.get_template("index.html").render(title=title, assets=assets)
        return HTMLResponse(html, status_code=200 if assets else 503, headers=PAGE_HEADERS)

    routes: list[BaseRoute] = [Route("/", page, methods=["GET"])]
    if (web_dir / "assets").is_dir():
        routes.append(Mount("/assets", StaticFiles(directory=web_dir / "assets"), name="assets"))
    return routes
