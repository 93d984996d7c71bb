"""Serving a built page — a Vite build, or any directory with an index.html — beside the
agents: its files as they are, and its own index.html (title and all) for `/` and for any
page route the client handles itself. A dotfile, or anything under a dot-directory
(`.env`, `.git/config`), is no file of the page: a build directory may hold one, a site
never means to serve it. Only what is under `.well-known/` is served (ACME challenges,
security.txt).

Nothing about the build is assumed but that: no manifest, no fixed title. Under a mount
prefix the page works when it refers to its assets relatively (Vite's `base: "./"`) or
under that prefix (`base: "/app/"`).
"""

from __future__ import annotations

import os
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Match, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from thinwire.browser import PAGE_HEADERS

__all__ = ["BuiltPage", "page_route"]

#: Paths of the API and of its other protocols' faces, never the page's: a wrong method
#: there is a 405, not the page.
API_PREFIXES = ("/agents/", "/admin/", "/a2a/", "/ai-sdk/", "/ag-ui/")
#: …and the prefixes themselves, without their slash.
API_ROOTS = frozenset(prefix.rstrip("/") for prefix in API_PREFIXES)
#: The one dot-directory a site serves.
WELL_KNOWN = ".well-known"

NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Not built</title></head>
<body><p>The page is not built. In a checkout of thinwire, <code>make run</code> builds it;
otherwise build your app and point <code>web_dir</code> at its output.</p></body></html>
"""


class BuiltPage(StaticFiles):
    """The files of `directory`, each with the page's security headers (an SVG opened
    directly would run its script on this origin without them); its index.html for a
    browser asking for a path that names no file."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory=directory, html=True, check_dir=False)
        self.root = directory
        self.index = directory / "index.html"

    async def check_config(self) -> None:
        if self.root.is_dir():  # a page not built yet is answered, not an error
            await super().check_config()

    async def get_response(self, path: str, scope: Scope) -> Response:
        try:
            if not self.root.is_dir():  # not built (yet): no files, only the notice
                raise HTTPException(404)
            response = await super().get_response(path, scope)
        except HTTPException as exc:
            if exc.status_code != 404 or not (wants_page(scope, path) or path in ("", ".")):
                raise
            return self.page()
        response.headers.update(PAGE_HEADERS)
        if response.media_type == "text/html":
            response.headers["Cache-Control"] = "no-cache"
        return response

    def lookup_path(self, path: str) -> tuple[str, os.stat_result | None]:
        if hidden(path):  # answered as a file that is not there is, 404 or the page
            return "", None
        return super().lookup_path(path)

    def page(self) -> Response:
        if not self.index.is_file():
            return HTMLResponse(NOT_BUILT, status_code=503, headers=PAGE_HEADERS)
        headers = {**PAGE_HEADERS, "Cache-Control": "no-cache"}
        return FileResponse(self.index, media_type="text/html", headers=headers)


def wants_page(scope: Scope, path: str) -> bool:
    """A browser navigating to a client-side route (no file extension, HTML accepted);
    an API client or a missing asset still gets its 404."""
    accept = dict(scope.get("headers", [])).get(b"accept", b"")
    return b"text/html" in accept and "." not in path.rsplit("/", 1)[-1]


def hidden(path: str) -> bool:
    """Whether a segment of `path` (relative to the page's directory) starts with a dot,
    but for a first `.well-known`."""
    segments = os.path.normpath(path).split(os.sep)
    if segments[0] == WELL_KNOWN:
        segments = segments[1:]
    return any(segment.startswith(".") for segment in segments if segment != ".")


class PageMount(Mount):
    """The page at `/`, leaving the API's paths to the API."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path = scope.get("path", "").removeprefix(scope.get("root_path", ""))
        if scope["type"] == "http" and (path.startswith(API_PREFIXES) or path in API_ROOTS):
            return Match.NONE, {}
        return super().matches(scope)


def page_route(directory: Path) -> Mount:
    return PageMount("/", app=BuiltPage(directory))
