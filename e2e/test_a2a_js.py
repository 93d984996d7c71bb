"""The official A2A JavaScript client (`@a2a-js/sdk` from npm, run by Node) against the
demo served for real: it resolves the agent's card and streams replies in one
conversation, nothing server-only is in anything it received, and it lists the tasks and
reads a refusal as docs/interop.md says."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import Demo

PROJECT = Path(__file__).resolve().parent / "a2a-js"


@pytest.fixture(scope="module")
def node_client() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js is not installed here")
    if not (PROJECT / "node_modules" / "@a2a-js" / "sdk").is_dir():
        command = ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"]
        subprocess.run(command, cwd=PROJECT, check=True, timeout=300)
    return PROJECT


def node(project: Path, script: str, *args: str) -> tuple[str, Any]:
    """What a script printed, as text and as JSON."""
    done = subprocess.run(
        ["node", script, *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(done.stdout)


def stream(project: Path, url: str, text: str, context_id: str = "") -> tuple[str, Any]:
    return node(project, "stream.mjs", f"{url}/a2a/demo/", text, context_id)


def reply(events: list[dict[str, Any]]) -> str:
    """The reply as the client builds it: the task's artifact, then each update to it."""
    text = ""
    for event in events:
        if "task" in event:
            artifacts = event["task"].get("artifacts", [])
            text = "".join(part["text"] for a in artifacts for part in a["parts"])
        elif "artifactUpdate" in event:
            update = event["artifactUpdate"]
            chunk = "".join(part["text"] for part in update["artifact"]["parts"])
            text = text + chunk if update.get("append") else chunk
    return text


def test_the_js_client_resolves_the_card_and_streams_a_conversation(
    node_client: Path, own_demo: Demo
) -> None:
    first_text, first = stream(node_client, own_demo.url, "hello there")
    card = first["card"]
    assert card["name"] == "demo" and card["capabilities"]["streaming"]
    assert card["supportedInterfaces"][0]["url"] == f"{own_demo.url}/a2a/demo"
    events = first["events"]
    assert events[0]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len([e for e in events if "artifactUpdate" in e]) > 1  # it streamed
    expected = "You said “hello there” — 2 words. This is the start of our conversation."
    assert reply(events) == expected

    context_id = events[0]["task"]["contextId"]
    second_text, second = stream(node_client, own_demo.url, "again", context_id)
    assert second["events"][0]["task"]["contextId"] == context_id
    assert reply(second["events"]).endswith("Earlier you told me “hello there”.")
    for canary in own_demo.canaries.values():
        assert canary not in first_text + second_text


def test_the_js_client_lists_tasks_and_reads_a_refusal(node_client: Path, own_demo: Demo) -> None:
    _, sent = stream(node_client, own_demo.url, "list me")
    task_id = sent["events"][0]["task"]["id"]
    _, read = node(node_client, "tasks.mjs", f"{own_demo.url}/a2a/demo/")
    for listed in read["listed"]:  # with no status, and with a page size
        assert [task["id"] for task in listed["tasks"]] == [task_id]
    missing = read["missing"]
    assert missing["name"] == "TaskNotFoundError" and missing["metadata"] is None
    [info] = missing["data"]  # the response's data as it came
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["metadata"] == {"code": "context_not_found", "retryable": "false"}
