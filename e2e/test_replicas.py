"""The demo page against two replicas on one Redis, its requests alternating between them."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from proxy import proxy_to
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


def test_the_demo_on_two_replicas(
    page: Page, replicas: tuple[ServerProcess, ServerProcess], recorder: LeakRecorder
) -> None:
    """Behind a balancer that sends each connection to the next replica: one origin for
    the page, any replica for any request. Connections are cut between the steps, so the
    steps land on either replica."""
    a, b = replicas
    with proxy_to(a.port, b.port) as balancer:
        page.goto(f"{balancer.url}/?user=alice")
        converse(page, between=balancer.cut)
    for replica in (a, b):  # both replicas served the conversation
        assert re.search(r'"(GET|POST) /agents/demo/', replica.log())
    recorder.assert_storage_holds_only_context_ids(page)


def converse(page: Page, between: Callable[[], None]) -> None:
    expect(page.get_by_test_id("status")).to_have_text("idle")
    send(page, "my name is Ada")
    wait_for_reply(page, 1)
    between()
    page.reload()
    expect(page.get_by_test_id("turn")).to_have_count(2)
    between()
    send(page, "who am I?")
    assert "Earlier you told me “my name is Ada”" in wait_for_reply(page, 2)
    between()
    send(page, "a refund please")
    expect(page.get_by_test_id("decide-approve")).to_be_visible()
    between()
    page.get_by_test_id("decide-approve").click()
    expect(page.get_by_test_id("turn-text").last).to_have_text(APPROVED)
