"""The demo page against two replicas on one Redis, its requests alternating between them."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, Route, expect

from test_approvals import APPROVED
from test_conversation import send, wait_for_reply
from thinwire.testing import LeakRecorder, ServerProcess, redis_server_binary, serve, serve_redis


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    if redis_server_binary() is None:
        pytest.skip("no redis-server here (make e2e installs Debian's package)")
    env = {"THINWIRE_DEMO_SECRET": "shared-secret-of-the-replicas"}
    with contextlib.ExitStack() as stack:
        store = f"{stack.enter_context(serve_redis())}?prefix=e2e"

        def start(name: str) -> ServerProcess:
            args = ("demo", "--delay", "0.02", "--data-dir", str(tmp_path / name), "--store", store)
            return stack.enter_context(serve(*args, env=env, log_dir=tmp_path))

        yield start("a"), start("b")


def alternate(page: Page, a: ServerProcess, b: ServerProcess) -> list[str]:
    """Send every API request of the page to A and B in turn; returns where each went."""
    sent: list[str] = []

    def to_next_replica(route: Route) -> None:
        target = (a, b)[len(sent) % 2]
        sent.append(target.url)
        route.continue_(url=re.sub(r"^http://[^/]+", target.url, route.request.url))

    page.route(re.compile(r".*/agents/.*"), to_next_replica)
    return sent


def test_the_demo_on_two_replicas(
    page: Page, replicas: tuple[ServerProcess, ServerProcess], recorder: LeakRecorder
) -> None:
    a, b = replicas
    sent = alternate(page, a, b)
    page.goto(f"{a.url}/?user=alice")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    send(page, "my name is Ada")
    wait_for_reply(page, 1)
    page.reload()
    expect(page.get_by_test_id("turn")).to_have_count(2)
    send(page, "who am I?")
    assert "Earlier you told me “my name is Ada”" in wait_for_reply(page, 2)
    send(page, "a refund please")
    page.get_by_test_id("decide-approve").click()
    expect(page.get_by_test_id("turn-text").last).to_have_text(APPROVED)

    assert a.url in sent and b.url in sent  # both replicas served the conversation
    for replica in (a, b):
        assert re.search(r'"(GET|POST) /agents/demo/', replica.log())
    recorder.assert_storage_holds_only_context_ids(page)
