"""The A2A face, driven by the official `a2a-sdk` client over real HTTP to a real server
process: the card, sends, streams, follow-ups, cancel, resubscribe, interrupts, failures
(a server stopped or killed mid-run too), who may see what, and that nothing server-only
reaches any response."""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, aclosing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError
from a2a.helpers import new_data_part, new_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
)
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from a2a_helpers import (
    Recorder,
    a2a_client,
    as_json,
    collect,
    http_client,
    reply_of,
    states,
    streamed_reply,
    user_message,
)
from conftest import assert_no_canary
from thinwire.testing import ServerProcess, serve

HERE = Path(__file__).resolve().parent
COUNTED = "a0 a1 a2 a3 a4 b0 b1 b2 b3 b4 "
BEFORE_THE_GATE = "a0 a1 a2 a3 a4 "
ABSENT_CONTEXT = "ctx-" + "0" * 36


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    with serve("serve", "a2a_helpers:app", env=env) as process:
        yield process


@pytest.fixture
def durable(tmp_path: Path) -> Callable[[], AbstractContextManager[ServerProcess]]:
    """Starts a server that keeps its conversations in SQLite under `tmp_path`: the same
    ones every time, for a test that stops or kills it and starts it again."""
    env = {
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "THINWIRE_DATA_DIR": str(tmp_path / "data"),
        "THINWIRE_OPERATOR_TOKEN": "a2a-operator-token",
    }

    def start() -> AbstractContextManager[ServerProcess]:
        args = ("serve", "--factory", "apps:durable", "--shutdown-timeout", "0.5")
        return serve(*args, env=env, log_dir=tmp_path)

    return start


async def release(server: ServerProcess) -> int:
    """Open the gate of the paced and pondering agents: how many runs were waiting at it."""
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{server.url}/test/release")
    released: int = response.json()["released"]
    return released


async def effects(server: ServerProcess) -> list[str]:
    async with httpx.AsyncClient() as http:
        found: list[str] = (await http.get(f"{server.url}/test/effects")).json()["effects"]
    return found


async def until_said(events: AsyncIterator[StreamResponse], said: str) -> list[dict[str, Any]]:
    """Events from the stream until the reply reads `said`."""
    seen = []
    with anyio.fail_after(10):
        async for event in events:
            seen.append(as_json(event))
            if streamed_reply(seen) == said:
                return seen
    raise AssertionError(f"the stream ended before saying {said!r}: {seen}")


async def until_tool_call(events: AsyncIterator[StreamResponse]) -> list[dict[str, Any]]:
    """Events from the stream until one says a tool was called."""
    seen = []
    with anyio.fail_after(10):
        async for event in events:
            seen.append(as_json(event))
            if "metadata" in seen[-1].get("statusUpdate", {}):
                return seen
    raise AssertionError(f"the stream ended before a tool call: {seen}")


def activity(events: list[dict[str, Any]]) -> list[str]:
    """The thinking and the tool calls a stream showed, in order."""
    shown = []
    for event in events:
        update = event.get("statusUpdate", {})
        message = update.get("status", {}).get("message", {})
        if message.get("metadata", {}).get("thinwire", {}).get("kind") == "thinking":
            shown.append("thinking: " + message["parts"][0]["text"])
        if "thinwire" in update.get("metadata", {}):
            shown.append("tool: " + update["metadata"]["thinwire"]["tool"])
    return shown


@pytest.mark.anyio
async def test_the_card_names_the_agent_its_endpoint_and_its_security(
    server: ServerProcess,
) -> None:
    async with http_client(None) as http:
        card = await A2ACardResolver(http, f"{server.url}/a2a/paced").get_agent_card()
    assert card.name == "paced"
    assert card.description == "Counts to five, waits for the test's gate, then counts on."
    assert [(s.id, s.name, list(s.tags), list(s.examples)) for s in card.skills] == [
        ("count", "Count", ["test"], ["go"])
    ]
    assert card.capabilities.streaming
    [interface] = card.supported_interfaces
    assert interface.url == f"{server.url}/a2a/paced"
    assert (interface.protocol_binding, interface.protocol_version) == ("JSONRPC", "1.0")
    scheme = card.security_schemes["thinwire"].http_auth_security_scheme
    assert (scheme.scheme, scheme.bearer_format) == ("Bearer", "user name")
    assert list(card.security_requirements[0].schemes) == ["thinwire"]


@pytest.mark.anyio
async def test_the_card_follows_the_host_so_a_cache_keeps_one_per_host(
    server: ServerProcess,
) -> None:
    async with httpx.AsyncClient() as http:
        cards = [
            await http.get(
                f"{server.url}/a2a/paced/.well-known/agent-card.json", headers={"Host": host}
            )
            for host in ("one.example", "two.example:8443")
        ]
    urls = [card.json()["supportedInterfaces"][0]["url"] for card in cards]
    assert urls == ["http://one.example/a2a/paced", "http://two.example:8443/a2a/paced"]
    for card in cards:
        assert card.headers["cache-control"] == "max-age=300"
        assert "host" in card.headers["vary"].lower().replace(" ", "").split(",")


@pytest.mark.anyio
async def test_a_send_answers_with_the_finished_task_and_a_follow_up_remembers(
    server: ServerProcess,
) -> None:
    async with http_client("alice") as http:
        client = await a2a_client(server.url, "demo", http, streaming=False)
        [first] = await collect(client.send_message(user_message("hello there")))
        task = first["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert re.fullmatch(r"ctx-[0-9a-f]{36}", task["contextId"])  # minted by the server
        assert reply_of(task).startswith("You said “hello there” — 2 words.")
        [second] = await collect(
            client.send_message(user_message("again", context_id=task["contextId"]))
        )
    again = second["task"]
    assert again["contextId"] == task["contextId"] and again["id"] != task["id"]
    assert reply_of(again).endswith("Earlier you told me “hello there”.")


@pytest.mark.anyio
async def test_a_streaming_send_streams_the_reply_and_ends_with_all_of_it(
    server: ServerProcess,
) -> None:
    async with http_client("alice") as http:
        client = await a2a_client(server.url, "paced", http)
        async with aclosing(client.send_message(user_message("go"))) as events:
            seen = await until_said(events, BEFORE_THE_GATE)
            assert await release(server) == 1
            seen += await collect(events)
    assert "task" in seen[0] and seen[0]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert states(seen)[-1] == "TASK_STATE_COMPLETED"
    chunks = [e["artifactUpdate"] for e in seen if "artifactUpdate" in e]
    assert len(chunks) >= 5  # the reply came a piece at a time...
    assert chunks[-1]["lastChunk"] and not chunks[-1].get("append")  # ...and then whole
    assert reply_of({"artifacts": [chunks[-1]["artifact"]]}) == COUNTED
    assert streamed_reply(seen) == COUNTED
    tools = [e["statusUpdate"]["metadata"] for e in seen if "metadata" in e.get("statusUpdate", {})]
    assert tools == [{"thinwire": {"tool": "tally"}}]  # its name, never its input or output
    assert "counted" not in str(seen)


@pytest.mark.anyio
async def test_an_events_sse_id_is_its_frames_seq_shared_by_the_events_of_one_frame(
    server: ServerProcess,
) -> None:
    message = {"messageId": "m-sse-ids", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
    call = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
    headers = {"A2A-Version": "1.0", "authorization": "Bearer alice"}
    async with httpx.AsyncClient(timeout=10) as http:
        url = f"{server.url}/a2a/demo"
        response = await http.post(
            url, json={**call, "params": {"message": message}}, headers=headers
        )
    events = []  # (id, result) of each event, heartbeats (comments) left out
    for block in response.text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line[:1] != ":")
        if fields:
            events.append((int(fields["id"]), json.loads(fields["data"])["result"]))
    ids = [seq for seq, _ in events]
    assert ids == sorted(ids) and ids[0] > 0  # in the order of the frames...
    *_, (reply_id, reply), (end_id, end) = events
    assert reply["artifactUpdate"]["lastChunk"]  # ...the whole reply and the end, both
    assert end["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"  # of `done`
    assert reply_id == end_id


@pytest.mark.anyio
async def test_subscribing_again_after_a_dropped_stream_loses_and_repeats_nothing(
    server: ServerProcess,
) -> None:
    async with http_client("alice") as http:
        client = await a2a_client(server.url, "paced", http)
        async with aclosing(client.send_message(user_message("three parts"))) as events:
            before = await until_said(events, BEFORE_THE_GATE)
        task_id = before[0]["task"]["id"]  # the stream is gone; the run goes on...
        assert await release(server) == 1  # ...and says the b words to nobody
        subscription = client.subscribe(SubscribeToTaskRequest(id=task_id))
        async with aclosing(subscription) as events:
            after = await until_said(events, COUNTED)
            assert "task" in after[0]  # first, the task as it stands: the reply so far
            assert await release(server) == 1
            after += await collect(events)
        with pytest.raises(UnsupportedOperationError):  # nothing more to follow
            await collect(client.subscribe(SubscribeToTaskRequest(id=task_id)))
    # Every word once: none lost, none twice; and each tool call, the one made while
    # nobody watched too.
    assert streamed_reply(after) == COUNTED + "c0 c1 c2 c3 c4 "
    assert activity(after) == ["tool: tally", "tool: tally"]
    assert states(after)[-1] == "TASK_STATE_COMPLETED"


@pytest.mark.anyio
async def test_thinking_and_a_tool_call_made_before_a_stream_attached_reach_it_once(
    server: ServerProcess,
) -> None:
    async with http_client("alice") as http:
        client = await a2a_client(server.url, "pondering", http)
        message = user_message("ponder")
        async with aclosing(client.send_message(message)) as events:
            sent = await until_tool_call(events)
        # The run waits at the gate, its thinking and its tool call long at hand when
        # the same message is sent again (its run, streamed from the start)...
        async with aclosing(client.send_message(message)) as events:
            repeated = await until_tool_call(events)
        # ...and when a subscription attaches.
        subscription = client.subscribe(SubscribeToTaskRequest(id=sent[0]["task"]["id"]))
        async with aclosing(subscription) as events:
            subscribed = await until_tool_call(events)
            assert await release(server) == 1
            subscribed += await collect(events)
    for seen in (sent, repeated, subscribed):
        assert "task" in seen[0]
        assert activity(seen) == ["thinking: Thinking first. ", "tool: look_up"]  # once each
    assert streamed_reply(subscribed) == "Then a few words."
    assert states(subscribed)[-1] == "TASK_STATE_COMPLETED"


@pytest.mark.anyio
async def test_cancel_stops_the_server_work_and_keeps_the_partial_reply(
    server: ServerProcess,
) -> None:
    async with http_client("alice") as http:
        client = await a2a_client(server.url, "paced", http)
        async with aclosing(client.send_message(user_message("cancel me"))) as events:
            seen = await until_said(events, BEFORE_THE_GATE)
            task_id = seen[0]["task"]["id"]
            canceled = as_json(await client.cancel_task(CancelTaskRequest(id=task_id)))
            seen += await collect(events)
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        assert reply_of(canceled) == BEFORE_THE_GATE
        assert states(seen)[-1] == "TASK_STATE_CANCELED"
        assert streamed_reply(seen) == BEFORE_THE_GATE
        assert await release(server) == 0  # no run was left at the gate...
        assert "cancel me: b" not in await effects(server)  # ...to do what comes after it
        kept = as_json(await client.get_task(GetTaskRequest(id=task_id)))
        assert (kept["status"]["state"], reply_of(kept)) == ("TASK_STATE_CANCELED", BEFORE_THE_GATE)
        with pytest.raises(TaskNotCancelableError) as again:
            await client.cancel_task(CancelTaskRequest(id=task_id))
    assert again.value.data == {"code": "no_run", "retryable": "false"}


@pytest.mark.anyio
async def test_an_interrupt_asks_for_input_and_the_next_message_answers_it(
    server: ServerProcess,
) -> None:
    async with http_client("alice") as http:
        client = await a2a_client(server.url, "demo", http, streaming=False)
        [asked] = await collect(client.send_message(user_message("a refund, please")))
        task = asked["task"]
        status = task["status"]
        assert status["state"] == "TASK_STATE_INPUT_REQUIRED"
        prompt, request = status["message"]["parts"]
        assert prompt == {"text": "Refund $40 on order 1234?"}
        assert request["data"]["options"] == ["approve", "reject"]
        assert request["data"]["payload"] == {"order": "1234", "amount": "$40"}
        assert reply_of(task) == "Order 1234 was $40. "
        with pytest.raises(UnsupportedOperationError) as pending:  # answer it first
            await collect(client.send_message(user_message("hi", context_id=task["contextId"])))
        assert pending.value.data == {"code": "decision_pending", "retryable": "false"}
        with pytest.raises(InvalidParamsError) as refused:  # validated as decisions are
            await collect(client.send_message(user_message("maybe", task_id=task["id"])))
        assert refused.value.data == {"code": "invalid_decision", "retryable": "false"}
        still = as_json(await client.get_task(GetTaskRequest(id=task["id"])))
        assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        answer = user_message("approve", task_id=task["id"], context_id=task["contextId"])
        [done] = await collect(client.send_message(answer))
        with pytest.raises(UnsupportedOperationError):  # the task is over
            await collect(client.send_message(user_message("approve", task_id=task["id"])))
        [again] = await collect(client.send_message(user_message("another refund")))
        canceled = as_json(await client.cancel_task(CancelTaskRequest(id=again["task"]["id"])))
    finished = done["task"]
    assert (finished["id"], finished["status"]["state"]) == (task["id"], "TASK_STATE_COMPLETED")
    assert reply_of(finished) == "Order 1234 was $40. Done — $40 is on its way back for order 1234."
    # A task that waits for a person can be canceled too: it ends with what it said.
    assert (canceled["status"]["state"], reply_of(canceled)) == (
        "TASK_STATE_CANCELED",
        "Order 1234 was $40. ",
    )


def answer_of(task: dict[str, Any], *parts: dict[str, Any]) -> dict[str, Any]:
    """The person's answer to the question `task` asked, as the task's history shows it."""
    interrupt_id = task["status"]["message"]["parts"][1]["data"]["interruptId"]
    return {
        "messageId": f"{task['id']}.{interrupt_id}.answer",
        "contextId": task["contextId"],
        "taskId": task["id"],
        "role": "ROLE_USER",
        "parts": list(parts),
    }


@pytest.mark.anyio
async def test_a_task_read_later_shows_the_question_it_asked_and_the_answer(
    server: ServerProcess,
) -> None:
    async with http_client("alice") as http:
        client = await a2a_client(server.url, "demo", http, streaming=False)
        [asked] = await collect(client.send_message(user_message("a refund, please")))
        task = asked["task"]
        get = GetTaskRequest(id=task["id"])
        waiting = as_json(await client.get_task(get))
        answer = user_message("approve", task_id=task["id"], context_id=task["contextId"])
        [done] = await collect(client.send_message(answer))
        read = as_json(await client.get_task(get))
        listing = ListTasksRequest(context_id=task["contextId"])
        [listed] = as_json(await client.list_tasks(listing))["tasks"]
        newest = as_json(await client.get_task(GetTaskRequest(id=task["id"], history_length=1)))
        none = as_json(await client.get_task(GetTaskRequest(id=task["id"], history_length=0)))
    # While it waits, the question is the task's status, as the stream showed it...
    assert "history" not in task and "history" not in waiting
    assert waiting["status"]["message"] == task["status"]["message"]
    # ...and once answered, the history keeps it, then the answer, however the task is read.
    history = [task["status"]["message"], answer_of(task, {"text": "approve"})]
    assert read["status"]["state"] == "TASK_STATE_COMPLETED"
    assert read["history"] == done["task"]["history"] == listed["history"] == history
    assert newest["history"] == history[1:]  # historyLength: the newest messages
    assert "history" not in none


@pytest.mark.anyio
async def test_an_answer_given_as_data_is_kept_as_data(server: ServerProcess) -> None:
    async with http_client("alice") as http:
        streaming = await a2a_client(server.url, "counting", http)
        blocking = await a2a_client(server.url, "counting", http, streaming=False)
        [asked] = await collect(blocking.send_message(user_message("some")))
        task = asked["task"]
        data = [new_data_part({"amount": 3})]
        message = new_message(
            data, context_id=task["contextId"], task_id=task["id"], role=Role.ROLE_USER
        )
        events = await collect(streaming.send_message(SendMessageRequest(message=message)))
        read = as_json(await blocking.get_task(GetTaskRequest(id=task["id"])))
    history = [
        task["status"]["message"],
        answer_of(task, {"data": {"amount": 3.0}, "mediaType": "application/json"}),
    ]
    assert events[0]["task"]["history"] == history  # the stream of the answer starts with it
    assert (read["status"]["state"], read["history"]) == ("TASK_STATE_COMPLETED", history)
    assert reply_of(read) == "3 it is."


@pytest.mark.anyio
async def test_a_task_canceled_while_it_asked_keeps_the_question_unanswered(
    server: ServerProcess,
) -> None:
    async with http_client("alice") as http:
        client = await a2a_client(server.url, "demo", http, streaming=False)
        [asked] = await collect(client.send_message(user_message("a refund, please")))
        task = asked["task"]
        canceled = as_json(await client.cancel_task(CancelTaskRequest(id=task["id"])))
        read = as_json(await client.get_task(GetTaskRequest(id=task["id"])))
    for seen in (canceled, read):
        assert seen["status"]["state"] == "TASK_STATE_CANCELED"
        assert "message" not in seen["status"]
        assert seen["history"] == [task["status"]["message"]]


@pytest.mark.anyio
async def test_a_failed_task_reads_as_its_stream_ended(server: ServerProcess) -> None:
    async with http_client("alice") as http:
        streaming = await a2a_client(server.url, "demo", http)
        blocking = await a2a_client(server.url, "demo", http, streaming=False)
        events = await collect(streaming.send_message(user_message("explode")))
        task_id, context_id = events[0]["task"]["id"], events[0]["task"]["contextId"]
        read = as_json(await blocking.get_task(GetTaskRequest(id=task_id)))
        await collect(blocking.send_message(user_message("and now?", context_id=context_id)))
        listed = as_json(await blocking.list_tasks(ListTasksRequest(context_id=context_id)))
    ended = events[-1]["statusUpdate"]["status"]
    assert ended["state"] == "TASK_STATE_FAILED"
    assert ended["message"]["metadata"] == {"thinwire": {"code": "agent_error", "retryable": False}}
    assert "Reference: err-" in ended["message"]["parts"][0]["text"]
    [failed] = [task for task in listed["tasks"] if task["id"] == task_id]
    for task in (read, failed):  # what the stream said last, a later task or not
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert task["status"]["message"] == ended["message"]


@pytest.mark.anyio
async def test_a_task_cut_short_by_its_server_stopping_fails_saying_so(
    durable: Callable[[], AbstractContextManager[ServerProcess]],
) -> None:
    with durable() as server:
        async with http_client(None) as http:
            client = await a2a_client(server.url, "gated", http)
            async with aclosing(client.send_message(user_message("hi"))) as events:
                seen = await until_said(events, "before the gate. ")
                # SIGTERM while the run waits at its gate: it is given up, its end recorded
                assert await anyio.to_thread.run_sync(server.stop) in (0, -15)
                seen += await collect(events)
    ended = seen[-1]["statusUpdate"]["status"]
    assert ended["state"] == "TASK_STATE_FAILED"
    assert ended["message"]["metadata"] == {
        "thinwire": {"code": "run_interrupted", "retryable": True}
    }
    assert ended["message"]["parts"][0]["text"].startswith("The run was interrupted")
    with durable() as server:
        async with http_client(None) as http:
            client = await a2a_client(server.url, "gated", http, streaming=False)
            read = as_json(await client.get_task(GetTaskRequest(id=seen[0]["task"]["id"])))
    assert read["status"]["state"] == "TASK_STATE_FAILED"
    assert read["status"]["message"] == ended["message"]
    assert reply_of(read) == "before the gate. "


@pytest.mark.anyio
async def test_a_task_whose_server_was_killed_keeps_the_time_it_was_found_so(
    durable: Callable[[], AbstractContextManager[ServerProcess]],
) -> None:
    with durable() as server:
        async with http_client(None) as http:
            client = await a2a_client(server.url, "gated", http)
            async with aclosing(client.send_message(user_message("hi"))) as events:
                [task, *_] = await until_said(events, "before the gate. ")
                server.kill()
                killed = datetime.now(UTC)
    with durable() as server:
        async with http_client(None) as http:
            client = await a2a_client(server.url, "gated", http, streaming=False)
            request = GetTaskRequest(id=task["task"]["id"])
            first = as_json(await client.get_task(request))  # finds the run dead, records it
            found = datetime.fromisoformat(first["status"]["timestamp"])
            later = ListTasksRequest(page_size=100)
            later.status_timestamp_after.FromDatetime(found + timedelta(milliseconds=1))
            listed = as_json(await client.list_tasks(later))
            again = as_json(await client.get_task(request))
    status = first["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["metadata"]["thinwire"]["code"] == "run_interrupted"
    assert found > killed  # when the run was found dead: the task failed then...
    assert again["status"] == status  # ...however often it is read...
    assert listed.get("tasks", []) == []  # ...so it has not changed since


@pytest.mark.anyio
async def test_what_a_task_asked_and_the_answer_survive_restarts(
    durable: Callable[[], AbstractContextManager[ServerProcess]],
) -> None:
    with durable() as server:
        async with http_client(None) as http:
            client = await a2a_client(server.url, "demo", http, streaming=False)
            [asked] = await collect(client.send_message(user_message("a refund, please")))
    task = asked["task"]
    get = GetTaskRequest(id=task["id"])
    with durable() as server:
        async with http_client(None) as http:
            client = await a2a_client(server.url, "demo", http, streaming=False)
            waiting = as_json(await client.get_task(get))
            answer = user_message("reject", task_id=task["id"], context_id=task["contextId"])
            await collect(client.send_message(answer))
    with durable() as server:
        async with http_client(None) as http:
            client = await a2a_client(server.url, "demo", http, streaming=False)
            read = as_json(await client.get_task(get))
    assert waiting["status"]["message"] == task["status"]["message"]
    assert "history" not in waiting
    assert read["history"] == [task["status"]["message"], answer_of(task, {"text": "reject"})]


def stamp_of(read: dict[str, Any]) -> str:
    """The status timestamp of a task, or of a stream event that has a status."""
    status = (read.get("task") or read.get("statusUpdate") or read)["status"]
    stamp: str = status["timestamp"]
    return stamp


def when(read: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(stamp_of(read))


def to_the_millisecond(moment: datetime) -> datetime:
    """A moment as a status timestamp can say it (they are cut to the millisecond)."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


@pytest.mark.anyio
async def test_a_status_says_when_it_was_set_however_and_whenever_it_is_read(
    server: ServerProcess,
) -> None:
    async with http_client("alice") as http:
        blocking = await a2a_client(server.url, "paced", http, streaming=False)
        streaming = await a2a_client(server.url, "paced", http)
        request = user_message("go")
        request.configuration.return_immediately = True
        before = datetime.now(UTC)
        [sent] = await collect(blocking.send_message(request))
        after = datetime.now(UTC)
        task = sent["task"]
        get, listing = GetTaskRequest(id=task["id"]), ListTasksRequest(context_id=task["contextId"])
        working = [as_json(await blocking.get_task(get)) for _ in range(3)]
        [listed_working] = as_json(await blocking.list_tasks(listing))["tasks"]
        async with aclosing(streaming.subscribe(SubscribeToTaskRequest(id=task["id"]))) as events:
            seen = await until_said(events, BEFORE_THE_GATE)
            assert await release(server) == 1
            seen += await collect(events)
        done = as_json(await blocking.get_task(get))
        [listed] = as_json(await blocking.list_tasks(listing))["tasks"]
        [again] = await collect(blocking.send_message(request))  # the same messageId: its task
    # Working since its run started, however often and however it is read...
    assert to_the_millisecond(before) <= when(task) <= after
    assert {stamp_of(read) for read in [*working, listed_working]} == {stamp_of(task)}
    statuses = [event for event in seen if "task" in event or "statusUpdate" in event]
    assert len(statuses) == 3  # the task, the tool call, the end
    assert {stamp_of(event) for event in statuses[:-1]} == {stamp_of(task)}
    # ...then completed when the run ended, said alike by its stream, GetTask, ListTasks
    # and the same message sent again.
    ended = statuses[-1]
    assert states(seen)[-1] == "TASK_STATE_COMPLETED" and when(ended) > when(task)
    assert again["task"]["id"] == task["id"]
    assert stamp_of(done) == stamp_of(listed) == stamp_of(again) == stamp_of(ended)


@pytest.mark.anyio
async def test_a_task_that_asks_says_when_it_asked_and_then_when_it_was_answered(
    server: ServerProcess,
) -> None:
    async with http_client("alice") as http:
        blocking = await a2a_client(server.url, "asking", http, streaming=False)
        streaming = await a2a_client(server.url, "asking", http)
        [sent] = await collect(blocking.send_message(user_message("go on")))
        task = sent["task"]
        get, listing = GetTaskRequest(id=task["id"]), ListTasksRequest(context_id=task["contextId"])
        asked = as_json(await blocking.get_task(get))
        answer = user_message("yes", task_id=task["id"], context_id=task["contextId"])
        before = datetime.now(UTC)
        async with aclosing(streaming.send_message(answer)) as events:
            seen = await until_said(events, "Asking. Waiting. ")
            after = datetime.now(UTC)
            working = [as_json(await blocking.get_task(get)) for _ in range(2)]
            [listed] = as_json(await blocking.list_tasks(listing))["tasks"]
            assert await release(server) == 1
            seen += await collect(events)
        done = as_json(await blocking.get_task(get))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert stamp_of(asked) == stamp_of(task)  # when it asked, as the send said
    # Working again since the answer started its next run, however it is read...
    resumed = seen[0]
    assert when(asked) <= to_the_millisecond(before) <= when(resumed) <= after
    assert {stamp_of(read) for read in [*working, listed]} == {stamp_of(resumed)}
    # ...and completed when that run ended.
    assert states(seen)[-1] == "TASK_STATE_COMPLETED"
    assert stamp_of(seen[-1]) == stamp_of(done) and when(done) > when(resumed)


@pytest.mark.anyio
async def test_another_principal_is_answered_as_for_a_task_that_does_not_exist(
    server: ServerProcess,
) -> None:
    async with http_client("alice") as alice_http, http_client("bob") as bob_http:
        alice = await a2a_client(server.url, "demo", alice_http, streaming=False)
        bob = await a2a_client(server.url, "demo", bob_http, streaming=False)
        [sent] = await collect(alice.send_message(user_message("mine")))
        task_id, context_id = sent["task"]["id"], sent["task"]["contextId"]
        absent_id = task_id.replace(context_id, ABSENT_CONTEXT)

        async def refusal(call: Any, *ids: str) -> tuple[type, str, Any]:
            with pytest.raises(Exception) as caught:
                await call
            error = caught.value
            message = str(error)
            for given in ids:
                message = message.replace(given, "<id>")
            return type(error), message, getattr(error, "data", None)

        for make in (
            lambda c, t, x: c.get_task(GetTaskRequest(id=t)),
            lambda c, t, x: c.cancel_task(CancelTaskRequest(id=t)),
            lambda c, t, x: collect(c.send_message(user_message("hi", context_id=x))),
            lambda c, t, x: collect(c.send_message(user_message("approve", task_id=t))),
        ):
            theirs = await refusal(make(bob, task_id, context_id), task_id, context_id)
            nobodys = await refusal(make(bob, absent_id, ABSENT_CONTEXT), absent_id, ABSENT_CONTEXT)
            assert theirs == nobodys
            assert theirs[0] is TaskNotFoundError
            assert theirs[2] == {"code": "context_not_found", "retryable": "false"}
        streaming_bob = await a2a_client(server.url, "demo", bob_http)
        with pytest.raises(TaskNotFoundError):
            await collect(streaming_bob.subscribe(SubscribeToTaskRequest(id=task_id)))
        # Alice's conversation is untouched.
        kept = as_json(await alice.get_task(GetTaskRequest(id=task_id)))
        assert kept["status"]["state"] == "TASK_STATE_COMPLETED"
    async with http_client(None) as anonymous_http:
        nobody = await a2a_client(server.url, "demo", anonymous_http, streaming=False)
        with pytest.raises(A2AClientError, match="401"):
            await nobody.get_task(GetTaskRequest(id=task_id))
        raw = await anonymous_http.post(
            f"{server.url}/a2a/demo",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}},
        )
    assert raw.status_code == 401 and raw.headers["www-authenticate"] == "Bearer"
    assert raw.json()["error"]["data"][0]["metadata"]["code"] == "unauthenticated"


@pytest.mark.anyio
async def test_list_tasks_lists_the_callers_own_tasks_only(server: ServerProcess) -> None:
    async with http_client("alice") as alice_http, http_client("bob") as bob_http:
        alice = await a2a_client(server.url, "demo", alice_http, streaming=False)
        bob = await a2a_client(server.url, "demo", bob_http, streaming=False)
        [one] = await collect(alice.send_message(user_message("one")))
        context_id = one["task"]["contextId"]
        [two] = await collect(alice.send_message(user_message("two", context_id=context_id)))
        [theirs] = await collect(bob.send_message(user_message("bob's")))

        listed = as_json(await alice.list_tasks(ListTasksRequest(page_size=100)))
        ids = [task["id"] for task in listed["tasks"]]
        assert two["task"]["id"] in ids and theirs["task"]["id"] not in ids
        assert all("artifacts" not in task for task in listed["tasks"])

        request = ListTasksRequest(context_id=context_id, include_artifacts=True, page_size=1)
        first_page = as_json(await alice.list_tasks(request))
        assert [t["id"] for t in first_page["tasks"]] == [two["task"]["id"]]  # newest first
        assert reply_of(first_page["tasks"][0]) == reply_of(two["task"])
        request.page_token = first_page["nextPageToken"]
        second_page = as_json(await alice.list_tasks(request))
        assert [t["id"] for t in second_page["tasks"]] == [one["task"]["id"]]
        assert second_page.get("nextPageToken", "") == ""

        bobs = as_json(await bob.list_tasks(ListTasksRequest(page_size=100)))
        assert [task["id"] for task in bobs["tasks"]] == [theirs["task"]["id"]]
        with pytest.raises(TaskNotFoundError):
            await bob.list_tasks(ListTasksRequest(context_id=context_id))


@pytest.mark.anyio
async def test_list_tasks_reads_an_unset_status_as_no_filter(server: ServerProcess) -> None:
    """`@a2a-js/sdk` 1.3.0 writes a `status` its caller left out as "UNRECOGNIZED" (its
    name for an enum value it does not know): these are the bodies its `listTasks({})` and
    `listTasks({pageSize: 5})` send, byte for byte."""
    url = f"{server.url}/a2a/demo"
    headers = {"A2A-Version": "1.0", "content-type": "application/json"}
    unfiltered = [b"{}", b'{"status":"TASK_STATE_UNSPECIFIED"}', b'{"status":"UNRECOGNIZED"}']
    async with http_client("alice") as http:
        alice = await a2a_client(server.url, "demo", http, streaming=False)
        [sent] = await collect(alice.send_message(user_message("list me")))
        for params in [*unfiltered, b'{"status":"UNRECOGNIZED","pageSize":5}']:
            body = b'{"jsonrpc":"2.0","method":"ListTasks","params":' + params + b',"id":1}'
            response = await http.post(url, content=body, headers=headers)
            listed = response.json()["result"]["tasks"]
            assert listed[0]["id"] == sent["task"]["id"], params  # the most recent first
        working = b'{"status":"TASK_STATE_WORKING"}'
        body = b'{"jsonrpc":"2.0","method":"ListTasks","params":' + working + b',"id":1}'
        filtered = (await http.post(url, content=body, headers=headers)).json()["result"]
        assert sent["task"]["id"] not in [task["id"] for task in filtered["tasks"]]
        misspelt = b'{"status":"TASK_STATE_DONE"}'  # not a state: still refused
        body = b'{"jsonrpc":"2.0","method":"ListTasks","params":' + misspelt + b',"id":1}'
        refused = (await http.post(url, content=body, headers=headers)).json()["error"]
        assert refused["code"] == -32602 and refused["message"].startswith("status: ")


@pytest.mark.anyio
async def test_no_canary_reaches_any_a2a_response(server: ServerProcess) -> None:
    recorder = Recorder()
    async with http_client("alice", recorder) as http:
        streaming = await a2a_client(server.url, "demo", http)
        blocking = await a2a_client(server.url, "demo", http, streaming=False)
        events = await collect(streaming.send_message(user_message("count these words")))
        context_id = events[0]["task"]["contextId"]
        assert states(events)[-1] == "TASK_STATE_COMPLETED"
        await collect(blocking.send_message(user_message("again", context_id=context_id)))
        [asked] = await collect(
            blocking.send_message(user_message("refund", context_id=context_id))
        )
        task_id = asked["task"]["id"]
        await streaming.get_task(GetTaskRequest(id=task_id))
        await collect(streaming.subscribe(SubscribeToTaskRequest(id=task_id)))
        await collect(streaming.send_message(user_message("approve", task_id=task_id)))
        failed = await collect(
            streaming.send_message(user_message("explode", context_id=context_id))
        )
        assert states(failed)[-1] == "TASK_STATE_FAILED"
        await blocking.list_tasks(ListTasksRequest(context_id=context_id, include_artifacts=True))
        await blocking.list_tasks(ListTasksRequest(include_artifacts=True))
    seen = recorder.text()
    assert "“count these words” — 3 words" in seen and "Reference: err-" in seen  # all public
    assert_no_canary(seen)


@pytest.mark.anyio
async def test_bad_input_gets_a_typed_json_rpc_error_never_a_500(server: ServerProcess) -> None:
    url = f"{server.url}/a2a/demo"
    alice = {"authorization": "Bearer alice"}
    headers = {"A2A-Version": "1.0", **alice}

    def call(method: str, params: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": "x", "method": method, "params": params}

    def send(**fields: Any) -> dict[str, Any]:
        message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}], **fields}
        return call("SendMessage", {"message": message})

    json_rpc = headers | {"content-type": "application/json"}
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"content": b"{", "headers": json_rpc}, -32700, "invalid_json"),
        ({"content": b"{}", "headers": headers}, -32600, "unsupported_media_type"),
        ({"json": [call("GetTask", {})]}, -32600, "invalid_request"),
        ({"json": {**call("GetTask", {}), "id": True}}, -32600, "invalid_request"),
        (  # an id the answer could not carry: a lone surrogate
            {"content": b'{"jsonrpc":"2.0","id":"\\ud800","method":"ListTasks","params":{}}'}
            | {"headers": json_rpc},
            -32600,
            "invalid_request",
        ),
        ({"json": call("message/send", {})}, -32601, "invalid_request"),
        ({"json": call("GetTask", "x")}, -32600, "invalid_request"),
        ({"json": call("GetTask", ["x"])}, -32602, "invalid_request"),  # by position
        ({"json": call("GetTask", {"id": 7})}, -32602, "invalid_request"),
        ({"json": call("GetTask", {"id": "ctx-1.turn-2"})}, -32602, "invalid_request"),
        ({"json": call("ListTasks", {"historyLength": -1})}, -32602, "invalid_request"),
        ({"json": send(parts=[])}, -32602, "invalid_request"),
        ({"json": send(parts=[{"url": "http://x/y"}])}, -32005, "invalid_request"),
        ({"json": send(parts=[{"text": " "}])}, -32602, "invalid_request"),
        ({"json": send(contextId="../etc")}, -32602, "invalid_context_id"),
        ({"json": send(), "headers": alice}, -32009, "protocol_mismatch"),
        ({"json": call("CreateTaskPushNotificationConfig", {})}, -32003, "invalid_request"),
    ]
    async with httpx.AsyncClient(timeout=10) as http:
        for request, code, thinwire_code in cases:
            response = await http.post(url, **{"headers": headers, **request})
            assert response.status_code == 200, (request, response.text)
            error = response.json()["error"]
            assert error["code"] == code, request
            assert error["data"][0]["metadata"]["code"] == thinwire_code, request
        unknown_agent = await http.post(f"{server.url}/a2a/nobody", json=call("GetTask", {}))
        assert unknown_agent.status_code == 404
        data_only = await http.post(url, json=send(parts=[{"data": {"n": 3}}]), headers=headers)
    assert data_only.json()["error"]["message"] == (
        "the message says nothing: it has no text part (data goes with text)"
    )
    assert server.process.poll() is None


@pytest.mark.anyio
async def test_a_notification_gets_no_response_and_does_nothing(server: ServerProcess) -> None:
    url = f"{server.url}/a2a/paced"
    alice = {"authorization": "Bearer alice"}
    headers = {"A2A-Version": "1.0", **alice}
    message = {"messageId": "m-notified", "role": "ROLE_USER", "parts": [{"text": "go"}]}
    notifications: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({"method": "GetTask", "params": {"id": "x"}}, headers),
        ({"method": "SendMessage", "params": {"message": message}}, headers),
        ({"method": "SendStreamingMessage", "params": {"message": message}}, headers),
        ({"method": "message/send", "params": {}}, headers),  # no such method: still none
        ({"method": "GetTask", "params": ["x"]}, headers),
        ({"method": "SendMessage", "params": {"message": message}}, alice),  # no version
    ]
    async with httpx.AsyncClient(timeout=10) as http:
        for notification, sent_with in notifications:
            response = await http.post(
                url, json={"jsonrpc": "2.0", **notification}, headers=sent_with
            )
            assert (response.status_code, response.content) == (204, b""), notification
        # An id of null is a request all the same; a request object that is not one is
        # answered as JSON-RPC has it, with an id of null.
        null_id = {"jsonrpc": "2.0", "id": None, "method": "GetTask", "params": {"id": "x"}}
        answered = (await http.post(url, json=null_id, headers=headers)).json()
        malformed = {"jsonrpc": "2.0", "method": 7}
        refused = (await http.post(url, json=malformed, headers=headers)).json()
    assert answered["id"] is None and answered["error"]["code"] == -32602
    assert refused["id"] is None and refused["error"]["code"] == -32600
    assert await release(server) == 0  # no run started, to wait at the paced agent's gate


@pytest.mark.anyio
async def test_a_refusal_that_passes_says_when_to_try_again(server: ServerProcess) -> None:
    async with http_client("bob") as http:
        client = await a2a_client(server.url, "pondering", http)
        admitted = 0
        with pytest.raises(InternalError) as refused:
            while admitted < 100:  # runs waiting at the gate, until one too many
                async with aclosing(client.send_message(user_message("ponder"))) as events:
                    await until_tool_call(events)
                admitted += 1
        assert await release(server) == admitted
    assert refused.value.data == {"code": "too_many_runs", "retryable": "true", "retryAfter": "1"}
