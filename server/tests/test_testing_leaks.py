"""The leak recorder's matching: a canary is found however a channel wrote it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from thinwire.testing import LeakRecorder


class Recorded(LeakRecorder):
    """A recorder whose channels are given, without a browser."""

    def __init__(self, channels: dict[str, str]) -> None:
        super().__init__()
        self.given = channels

    def channels(self, page: Any) -> dict[str, str]:
        return self.given


@pytest.mark.parametrize(
    "canary",
    [
        "plain-canary-1f",
        'canary-quote-"x-2e',
        "canary-backslash-\\x-3d",
        "canary-tab-\t-4c",
        "kanári-ő-5b",
    ],
)
def test_a_canary_is_found_as_json_and_python_write_it(canary: str) -> None:
    frame = json.dumps({"type": "thinking", "delta": canary})  # as an SSE frame carries it
    assert Recorded({"response body": frame}).leaks(None, {"it": canary}) == [
        "the it canary leaked in response body"
    ]
    stored = str({"thinwire:demo:ada:contextId": canary})  # as the storage channel is written
    assert Recorded({"localStorage": stored}).leaks(None, {"it": canary})
    assert Recorded({"DOM": "nothing private here"}).leaks(None, {"it": canary}) == []
