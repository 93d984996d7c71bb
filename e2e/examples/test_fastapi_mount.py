"""examples/fastapi-mount: a FastAPI app of one's own with the agents mounted under /api
and its built page at /, served by the installed `thinwire serve main:app`."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_page import expect_status, last, partial_texts, send, watch_stream
from playwright.sync_api import Page, expect
from userland import npm, prepared, serve_installed

from thinwire.testing import LeakRecorder, ServerProcess


@pytest.fixture(scope="module")
def app() -> Path:
    app = prepared().example("fastapi-mount")
    npm("run", "build", cwd=app / "web")
    return app


@pytest.fixture
def server(app: Path, tmp_path: Path) -> Iterator[ServerProcess]:
    env = {"THINWIRE_DATA_DIR": str(tmp_path / "data")}
    with serve_installed(
        prepared(), "serve", "main:app", cwd=app, health="/api/healthz", env=env, log_dir=tmp_path
    ) as s:
        yield s


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def test_the_apps_own_routes_and_the_agents_side_by_side(server: ServerProcess) -> None:
    assert get_json(f"{server.url}/hello") == {"hello": "world"}
    openapi = get_json(f"{server.url}/api/openapi.json")
    assert isinstance(openapi, dict)
    assert openapi["servers"] == [{"url": "/api"}]  # the agents' paths are under the mount
    assert "/agents/{agent}/runs" in openapi["paths"]


def test_a_page_built_after_the_server_started_is_served_without_a_restart(
    app: Path, tmp_path: Path
) -> None:
    """Built second, or not yet while Vite's dev server is used: `/` says so (503), then
    serves the build as soon as there is one."""
    unbuilt = tmp_path / "app"
    (unbuilt / "web").mkdir(parents=True)
    shutil.copy2(app / "main.py", unbuilt)
    env = {"THINWIRE_DATA_DIR": str(tmp_path / "data")}
    with serve_installed(
        prepared(),
        "serve",
        "main:app",
        cwd=unbuilt,
        health="/api/healthz",
        env=env,
        log_dir=tmp_path,
    ) as server:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(server.url, timeout=5)
        assert refused.value.code == 503
        assert "npm run build" in refused.value.read().decode()
        assert get_json(f"{server.url}/hello") == {"hello": "world"}  # the app's own, as ever

        shutil.copytree(app / "web" / "dist", unbuilt / "web" / "dist")  # `npm run build`
        with urllib.request.urlopen(server.url, timeout=5) as response:
            assert "<title>My app, with an agent</title>" in response.read().decode()


def test_a_conversation_under_api(
    page: Page, leak_recorder: LeakRecorder, server: ServerProcess
) -> None:
    page.goto(server.url)
    expect_status(page, "idle")
    watch_stream(page, "p.assistant")
    with page.expect_request(lambda request: request.method == "POST") as run:
        send(page, "hello from my own app")
    assert run.value.url == f"{server.url}/api/agents/echo/runs"
    reply = "You said: hello from my own app"
    expect(last(page.locator("p.assistant"))).to_have_text(reply)
    expect_status(page, "idle")
    assert len(partial_texts(page, reply)) >= 3, "the reply did not stream"
    page.reload()
    expect(page.locator("p.user")).to_have_text(["hello from my own app"])
    leak_recorder.assert_storage_holds_only_context_ids(page)
