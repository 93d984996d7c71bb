"""The leak matrix with a model-backed agent: the demo's ChatAgent, its model an
OpenAI-compatible stub. The system prompt, tool arguments and outputs, the model's tool
messages and the names of tools it makes up go to the model — on the server — and never
to the browser."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from conftest import Demo, fresh_canaries
from test_conversation import send, wait_for_reply
from thinwire.testing import LeakRecorder
from thinwire.testing.openai_stub import OpenAIStub, Stream, finish, reasoning, text, tool_calls


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as running:
        yield running


@pytest.fixture
def model_demo(tmp_path: Path, stub: OpenAIStub) -> Iterator[Demo]:
    env = {"OPENAI_BASE_URL": stub.url, "OPENAI_API_KEY": "test-key"}
    with Demo(tmp_path, fresh_canaries(), args=("--model", "stub-model"), env=env) as running:
        yield running


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_a_model_backed_agent_leaks_nothing(
    page: Page, model_demo: Demo, stub: OpenAIStub, recorder: LeakRecorder, transport: str
) -> None:
    # A tool the model makes up is told to it, and shown to nobody: its name is a canary.
    canaries = {**model_demo.canaries, "invented_tool": f"tw_e2e_tool_{secrets.token_hex(6)}"}
    counted = {"text": f"hello {canaries['tool_arguments']}"}
    invented = ("call_0", canaries["invented_tool"], {})
    stub.push(
        Stream(
            [
                *reasoning("Counting first. ", pieces=3),
                *tool_calls([invented, ("call_1", "count_words", counted)], pieces=4),
                finish("tool_calls"),
            ]
        ),
        Stream(text("You said hello, two words.", pieces=6)),
        Stream(tool_calls([("call_2", "lookup_order", {"order_id": "1234"})])),
        Stream(
            [
                *text("Order 1234 was $40. "),
                *tool_calls([("call_3", "issue_refund", {"order_id": "1234", "amount": 40})]),
            ]
        ),
        Stream(text("Refunded $40.")),
    )
    page.goto(f"{model_demo.url}/?user=alice&transport={transport}")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    send(page, "hello")
    assert wait_for_reply(page, 1) == "You said hello, two words."
    expect(page.get_by_test_id("turn-thinking").first).to_contain_text("Counting first.")
    send(page, "a refund please")
    page.get_by_test_id("decide-approve").click()
    expect(page.get_by_test_id("turn-text").last).to_have_text("Refunded $40.")

    # The model was called five times: the resumed run replayed the first two answers.
    assert len(stub.requests) == 5
    sent = json.dumps(stub.requests)
    for place in ("system_prompt", "tool_arguments", "tool_output", "invented_tool"):  # server…
        assert canaries[place] in sent, place
    recorder.assert_no_leak(page, canaries)  # …and nowhere in the browser


def test_the_page_says_which_agent_answers(page: Page, model_demo: Demo, demo: Demo) -> None:
    page.goto(f"{model_demo.url}/?user=alice")
    expect(page.get_by_test_id("agent-kind")).to_have_text("Answering: the model stub-model")
    page.goto(f"{demo.url}/?user=alice")
    expect(page.get_by_test_id("agent-kind")).to_contain_text("the scripted demo agent")
