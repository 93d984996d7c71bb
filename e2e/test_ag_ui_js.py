"""AG-UI's own client (`HttpAgent` of `@ag-ui/client` 1.0.0 from npm, run by Node) against
the demo served for real: it streams replies in one thread that the agent remembers,
answers an interrupt, opens the thread again as a reloaded page would (each question
still on the reply that asked it, with how it ended), and nothing server-only is in
anything it received. The docs' `ThinwireAgent` and `stop()` (which `run.mjs` mirrors)
stop a run as the caller the agent's headers name, reconnect after `abortRun()`, and
leave the agent usable after a question is stopped.

The client checks every event against the protocol's schema (a field it does not
describe is stripped with a warning, a malformed one fails the run) and every run's order
(messages opened and closed, one RUN_STARTED, nothing after RUN_FINISHED): a run with no
error and no warning is one the real client reads as the protocol defines it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import Demo

PROJECT = Path(__file__).resolve().parent / "ag-ui-js"


@pytest.fixture(scope="module")
def node_client() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js is not installed here")
    if not (PROJECT / "node_modules" / "@ag-ui" / "client").is_dir():
        command = ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"]
        subprocess.run(command, cwd=PROJECT, check=True, timeout=300)
    return PROJECT


def run(project: Path, url: str, steps: list[dict[str, Any]]) -> tuple[str, Any]:
    """What `run.mjs` printed, as text and as JSON."""
    done = subprocess.run(
        ["node", "run.mjs", f"{url}/ag-ui/demo", json.dumps(steps)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(done.stdout)


def kinds(events: list[dict[str, Any]]) -> list[str]:
    """Event types, a stretch of the same delta as one."""
    seen: list[str] = []
    for event in events:
        kind = event["type"]
        if not (kind.endswith("_CONTENT") and seen and seen[-1] == kind):
            seen.append(kind)
    return seen


def shown(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The conversation as a page shows it: who said what."""
    return [(m["role"], m.get("content") or "") for m in messages]


def test_the_ag_ui_client_streams_a_thread_answers_an_interrupt_and_reconnects(
    node_client: Path, own_demo: Demo
) -> None:
    steps: list[dict[str, Any]] = [
        {"say": "hello there"},
        {"say": "again"},
        {"say": "please refund"},
        {"answer": "approve"},
        {"say": "a refund, once more"},
        {"cancel": True},
        {"say": "explode"},
        {"connect": True},
    ]
    text, printed = run(node_client, own_demo.url, steps)
    assert printed["warnings"] == []
    hello, again, refund, approved, asked_again, cancelled, failed, reloaded = printed["steps"]
    assert [step["error"] for step in printed["steps"]] == [None] * len(steps)

    assert kinds(hello["events"]) == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert len([e for e in hello["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]) > 1
    assert shown(hello["messages"])[1:] == [
        ("reasoning", "Reading the message, counting its words, recalling what came before."),
        ("assistant", "You said “hello there” — 2 words. This is the start of our conversation."),
        ("tool", ""),  # its output stays on the server
    ]
    call = hello["messages"][2]["toolCalls"][0]["function"]
    assert call == {"name": "count_words", "arguments": "{}"}

    # The same thread: the server remembers it (the history HttpAgent sends is not read).
    assert shown(again["messages"])[6][1].endswith("Earlier you told me “hello there”.")

    [interrupt] = refund["pendingInterrupts"]
    assert refund["events"][-1]["outcome"]["type"] == "interrupt"
    assert interrupt["message"] == "Refund $40 on order 1234?"
    assert interrupt["responseSchema"] == {"enum": ["approve", "reject"]}
    assert approved["pendingInterrupts"] == []
    assert shown(approved["messages"])[-2:] == [
        ("assistant", "Done — $40 is on its way back for order 1234."),
        ("tool", ""),
    ]

    # Abandoned, the question ends the run it asked in; a failure is RUN_ERROR.
    assert cancelled["events"][-1]["outcome"] == {"type": "cancelled"}
    assert cancelled["pendingInterrupts"] == []
    assert failed["events"][-1]["type"] == "RUN_ERROR"
    assert failed["events"][-1]["code"] == "agent_error"

    # A new agent on the thread gets the conversation as the live one built it...
    assert kinds(reloaded["events"]) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert shown(reloaded["messages"]) == shown(failed["messages"])
    # ...each question on the reply that asked it, with the resume entry that ended it.
    [abandoned] = asked_again["pendingInterrupts"]
    assert [
        m["metadata"]["thinwire"]
        for m in reloaded["messages"]
        if "interrupt" in m.get("metadata", {}).get("thinwire", {})
    ] == [
        {
            "stopReason": "interrupted",
            "interrupt": interrupt,
            "resume": {"interruptId": interrupt["id"], "status": "resolved", "payload": "approve"},
        },
        {
            "stopReason": "stopped",
            "interrupt": abandoned,
            "resume": {"interruptId": abandoned["id"], "status": "cancelled"},
        },
    ]
    for canary in own_demo.canaries.values():
        assert canary not in text


def reply_to(messages: list[dict[str, Any]], text: str) -> dict[str, Any]:
    """The assistant message that answers the user's message `text`."""
    asked = next(n for n, m in enumerate(messages) if m["role"] == "user" and m["content"] == text)
    return next(m for m in messages[asked:] if m["role"] == "assistant")


def test_the_docs_agent_stops_with_its_headers_reconnects_after_an_abort_and_stops_a_question(
    node_client: Path, own_demo: Demo
) -> None:
    long = " ".join(f"w{n}" for n in range(60))  # a reply of seconds, to act in
    steps: list[dict[str, Any]] = [
        {"signIn": "alice"},  # the demo's identify reads the cookie header from here on
        {"say": "hello there"},
        {"say": long, "then": "stop"},
        {"say": f"again {long}", "then": "abort"},
        {"connect": "again"},
        {"say": "please refund"},
        {"stop": True},
        {"say": "and now?"},
        {"say": "please refund"},
        {"stopOnServer": True},  # another tab stops the question this agent holds
        {"cancel": True},
        {"say": "still there?"},
        {"connect": True},
    ]
    _, printed = run(node_client, own_demo.url, steps)
    assert printed["warnings"] == []
    assert [step["error"] for step in printed["steps"]] == [None] * len(steps)
    _, _, stopped, aborted, reconnected, asked, *rest = printed["steps"]
    unasked, after_stop, asked_again, _, cancelled, after_cancel, reloaded = rest
    final = reloaded["messages"]

    # stop() sends the agent's headers: the server stops the run, and says so.
    assert stopped["events"][-1]["outcome"] == {"type": "cancelled"}
    assert stopped["events"][-1]["metadata"] == {"thinwire": {"stopReason": "stopped"}}
    assert reply_to(final, long)["metadata"] == {"thinwire": {"stopReason": "stopped"}}

    # After abortRun(), connect on the same agent picks the run up, each message once (the
    # user's come after the replies: the agent had them under its own ids, not the
    # snapshot's).
    assert "RUN_FINISHED" not in kinds(aborted["events"])
    assert kinds(reconnected["events"])[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert reconnected["events"][-1]["outcome"] == {"type": "success"}
    held = shown(reconnected["messages"])
    assert sorted(held) == sorted(shown(final)[: len(held)])
    assert reply_to(final, f"again {long}")["metadata"] == {"thinwire": {"stopReason": "end"}}

    # stop() of a question cancels it, so the agent takes a new message; so does a cancel of
    # a question stopped elsewhere.
    assert len(asked["pendingInterrupts"]) == 1
    assert unasked["pendingInterrupts"] == []
    assert unasked["events"][-1]["outcome"] == {"type": "cancelled"}
    assert len(asked_again["pendingInterrupts"]) == 1
    assert cancelled["pendingInterrupts"] == []
    assert cancelled["events"][-1]["outcome"] == {"type": "cancelled"}
    for said in (after_stop, after_cancel):
        assert said["events"][-1]["outcome"] == {"type": "success"}
    assert reply_to(final, "still there?")["content"].startswith("You said “still there?”")
