from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from thinwire.demo import CANARIES, create_demo_app


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Frames of an SSE body, each with the SSE `id` under the key `_id`."""
    frames = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        if "data" in fields:
            frame = json.loads(fields["data"])
            frame["_id"] = fields.get("id")
            frames.append(frame)
    return frames


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_demo_app(delay=0)) as test_client:
        yield test_client


def send(client: TestClient, text: str, context_id: str | None = None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"message": {"text": text}}
    if context_id is not None:
        body["contextId"] = context_id
    response = client.post("/agents/demo/runs", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.text)


def assert_no_canary(text: str) -> None:
    for where, canary in CANARIES.items():
        assert canary not in text, f"the {where} canary leaked"
