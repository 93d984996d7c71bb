from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from starlette.testclient import TestClient

from conftest import app_for, decide, parse_sse, send, server_context, tool_frames
from thinwire import Agent, MemoryStore, Run, SQLiteStore, ToolFailed
from thinwire.interrupts import Suspend

SECRET = "tw-canary-exception-0c41"


class Failing(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say("partial ")
        raise RuntimeError(f"database password is {SECRET}")


class ToolFails(Agent):
    async def run(self, run: Run, text: str) -> None:
        async def explode() -> None:
            raise ValueError(SECRET)

        try:
            await run.tool("explode", explode)
        except ToolFailed as failed:
            assert isinstance(failed.__cause__, ValueError)
            await run.say("the tool failed")


class Gate(Agent):
    """Holds its run open until the test releases it."""

    opened = asyncio.Event()

    async def run(self, run: Run, text: str) -> None:
        await run.say("waiting ")
        await type(self).opened.wait()
        await run.say("released")


class Scratch(Agent):
    async def run(self, run: Run, text: str) -> None:
        async def remember(**arguments: Any) -> None:
            run.invocation_state["seen"] = arguments

        await run.tool("remember", remember, value=text)
        await run.say(f"invocation state has {sorted(run.invocation_state)}")
        run.state["invocation_keys"] = sorted(run.invocation_state)


def test_agent_exception_becomes_a_generic_typed_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, "thinwire")
    with TestClient(app_for({"demo": Failing})) as client:
        response = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
    frames = parse_sse(response.text)
    error, done = frames[-2], frames[-1]
    assert error["type"] == "error" and error["code"] == "agent_error"
    assert error["retryable"] is False
    assert done["type"] == "done" and done["stopReason"] == "error"
    assert done["text"] == "partial "
    assert SECRET not in response.text
    # The server log keeps the detail under the id the client was given.
    reference = error["message"].rsplit(" ", 1)[-1].rstrip(".")
    assert reference.startswith("err-")
    logged = "\n".join(r.getMessage() + str(r.exc_info) for r in caplog.records)
    assert reference in logged and SECRET in logged


class SaysNotText(Agent):
    """Streams a piece of text, then passes a value that is not text where text goes."""

    value: ClassVar[Any] = None
    method: ClassVar[str] = "say"

    async def run(self, run: Run, text: str) -> None:
        await run.say("before ")
        method, value = type(self).method, type(self).value
        await (tool_named(run, value) if method == "tool" else getattr(run, method)(value))


async def tool_named(run: Run, name: Any) -> None:
    async def noop() -> None:
        return None

    await run.tool(name, noop)


@pytest.mark.parametrize(
    ("method", "value", "complaint"),
    [
        ("say", 123, "run.say() takes a str, not int"),
        ("say", b"bytes", "run.say() takes a str, not bytes"),
        ("think", 5, "run.think() takes a str, not int"),
        ("replace_text", 9, "run.replace_text() takes a str, not int"),
        ("set_title", 42, "run.set_title() takes a str, not int"),
        ("say", None, "run.say() takes a str, not NoneType"),
        ("tool", 7, "a tool's name is a str, not int"),
    ],
)
def test_a_value_that_is_not_text_fails_the_run_and_frees_the_conversation(
    method: str, value: Any, complaint: str, caplog: pytest.LogCaptureFixture
) -> None:
    SaysNotText.method, SaysNotText.value = method, value
    caplog.set_level(logging.ERROR, "thinwire")
    with TestClient(app_for({"demo": SaysNotText})) as client:
        frames = send(client, "hi")
        assert [f["type"] for f in frames] == ["run_start", "token", "error", "done"]
        assert [f["seq"] for f in frames] == [1, 2, 3, 4]  # nothing sent of the bad value
        assert frames[-1]["stopReason"] == "error" and frames[-1]["text"] == "before "
        context_id = frames[0]["contextId"]
        # The conversation takes the next message, and kept what the run said.
        assert send(client, "again", context_id)[-1]["stopReason"] == "error"
        turns = client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]
    assert [t["text"] for t in turns if t["role"] == "assistant"] == ["before ", "before "]
    logged = "\n".join(str(r.exc_info) for r in caplog.records)
    assert complaint in logged


class Redrafts(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say("DRAFT ")
        await run.say("reply.")
        run.replace_text("Final reply.")


def test_a_replaced_reply_is_the_one_done_and_the_transcript_keep() -> None:
    with TestClient(app_for({"demo": Redrafts})) as client:
        frames = send(client, "hi")
        context_id = frames[0]["contextId"]
        turns = client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]
        history = server_context(client, context_id).history
    assert [f["delta"] for f in frames if f["type"] == "token"] == ["DRAFT ", "reply."]
    assert frames[-1]["text"] == "Final reply." and frames[-1]["stopReason"] == "end"
    assert [t["text"] for t in turns if t["role"] == "assistant"] == ["Final reply."]
    assert [m["content"] for m in history if m["role"] == "assistant"] == ["Final reply."]


class Titled(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say("partial ")
        run.set_title("A title")


def test_a_run_whose_end_cannot_be_recorded_still_ends_and_frees_the_conversation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from thinwire.records import ContextRecord

    def broken(self: ContextRecord, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a fault while recording the end")

    with TestClient(app_for({"demo": Titled})) as client:
        context_id = send(client, "first")[0]["contextId"]
        with monkeypatch.context() as patched:
            patched.setattr(ContextRecord, "name", broken)
            frames = send(client, "second", context_id)
        error, done = frames[-2], frames[-1]
        assert error["code"] == "agent_error" and "could not be recorded" in error["message"]
        assert done["stopReason"] == "error" and done["text"] == ""
        assert "fault" not in str(frames)
        # Not left busy: the next message runs, on the conversation as the store has it.
        third = send(client, "third", context_id)
        assert third[-1]["stopReason"] == "end" and third[-1]["text"] == "partial "
        turns = client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]
    assert [(t["text"], t["stopReason"]) for t in turns if t["role"] == "assistant"] == [
        ("partial ", "end"),
        ("", "interrupted"),
        ("partial ", "end"),
    ]


def test_a_run_that_cannot_be_set_up_still_ends_and_frees_the_conversation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import thinwire.agent

    def broken(value: Any) -> Any:
        raise RecursionError("a fault while copying the page's data")

    with TestClient(app_for({"demo": Titled})) as client:
        context_id = send(client, "first")[0]["contextId"]
        with monkeypatch.context() as patched:
            patched.setattr(thinwire.agent.copy, "deepcopy", broken)
            frames = send(client, "second", context_id)
        assert [f["type"] for f in frames] == ["run_start", "error", "done"]
        assert frames[1]["code"] == "agent_error" and "could not start" in frames[1]["message"]
        assert frames[-1]["stopReason"] == "error" and "fault" not in str(frames)
        third = send(client, "third", context_id)
        assert third[-1]["stopReason"] == "end"
        turns = client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]
    assert [t["stopReason"] for t in turns if t["role"] == "assistant"] == [
        "end",
        "interrupted",
        "end",
    ]


def test_failed_tool_is_public_as_not_ok_only() -> None:
    with TestClient(app_for({"demo": ToolFails})) as client:
        frames = send(client, "hi")
    result = next(f for f in frames if f["type"] == "tool_result")
    assert result["name"] == "explode" and result["ok"] is False
    assert frames[-1]["text"] == "the tool failed"
    assert SECRET not in str(frames)


def test_second_send_while_running_is_context_busy() -> None:
    Gate.opened = asyncio.Event()
    with TestClient(app_for({"demo": Gate})) as client:
        with client.stream("POST", "/agents/demo/runs", json={"message": {"text": "a"}}) as first:
            lines = first.iter_lines()
            head = "\n".join(iter(lambda: next(lines), ""))
            context_id = parse_sse(head)[0]["contextId"]
            busy = client.post(
                "/agents/demo/runs", json={"contextId": context_id, "message": {"text": "b"}}
            )
            assert busy.status_code == 409
            assert busy.json()["error"]["code"] == "context_busy"
            # Pages show the message as it is: it names nothing internal.
            assert context_id not in busy.text and "(run)" not in busy.text
            client.portal.call(Gate.opened.set)  # type: ignore[union-attr]
            rest = "\n".join(lines)
        assert '"released"' in rest
        # Once the run is over the context takes sends again.
        assert send(client, "c", context_id)[-1]["stopReason"] == "end"


def test_invocation_state_is_per_run_and_not_persisted() -> None:
    with TestClient(app_for({"demo": Scratch})) as client:
        first = send(client, "one")
        context = server_context(client, first[0]["contextId"])
        assert context.state["invocation_keys"] == ["seen"]
        second = send(client, "two", first[0]["contextId"])
    # Each run starts with empty invocation state: the tool's write is the only key.
    assert second[-1]["text"] == "invocation state has ['seen']"
    tool_messages = [m for m in context.history if m["role"] == "tool"]
    assert [m["arguments"] for m in tool_messages] == [{"value": "one"}, {"value": "two"}]


SHARED_CANARY = "tw-canary-shared-77ab"
OPERATOR = "test-operator-token"


class Triage(Agent):
    async def run(self, run: Run, text: str) -> None:
        run.shared_state["ticket"] = {"id": 42, "note": SHARED_CANARY}
        run.invocation_state["triage_only"] = True
        run.state["routed"] = True
        await run.say("Passing you to billing. ")
        await run.handoff("billing", text)
        run.state["closed"] = True
        await run.say(f" (billing saw {sorted(run.shared_state['seen_by'])})")


class Billing(Agent):
    async def run(self, run: Run, text: str) -> None:
        ticket = run.shared_state["ticket"]
        run.shared_state["seen_by"] = ["billing"]
        run.state["refunded"] = ticket["id"]
        await run.tool("refund_lookup", self.lookup, ticket=ticket["id"])
        await run.say(
            f"Billing has ticket {ticket['id']}; own scratch: {sorted(run.invocation_state)}"
        )

    async def lookup(self, ticket: int) -> str:
        return f"ticket {ticket}"


def test_handoff_shares_shared_state_within_the_run_only() -> None:
    app = app_for({"triage": Triage, "billing": Billing}, operator_token=OPERATOR)
    with TestClient(app) as client:
        response = client.post("/agents/triage/runs", json={"message": {"text": "refund"}})
        frames = parse_sse(response.text)
        done = frames[-1]
        assert done["text"] == (
            "Passing you to billing. Billing has ticket 42; own scratch: [] (billing saw ['billing'])"
        )
        assert done["toolCalls"] == ["refund_lookup"]
        assert SHARED_CANARY not in response.text
        context = server_context(client, done["contextId"], agent="triage")
        stored = str(context.record.rest_json()) + str(list(context.history))
        assert SHARED_CANARY not in stored  # never persisted either
        transcript = client.get(f"/agents/triage/contexts/{done['contextId']}")
        assert SHARED_CANARY not in transcript.text
        # Each agent's writes to the conversation's AgentState are audited as its own.
        audit = client.get(
            f"/admin/agents/triage/contexts/{done['contextId']}/audit",
            headers={"authorization": f"Bearer {OPERATOR}"},
        ).json()["entries"]
    assert [(e["key"], e["source"]) for e in audit] == [
        ("routed", "agent:triage"),
        ("refunded", "agent:billing"),
        ("closed", "agent:triage"),
    ]


class Overreach(Agent):
    writable_keys = frozenset({"allowed"})
    initial_state: ClassVar[dict[str, Any]] = {"locked": "original"}

    async def run(self, run: Run, text: str) -> None:
        run.state["allowed"] = 1
        run.state["locked"] = "changed"


def test_agent_writes_outside_writable_keys_are_refused() -> None:
    with TestClient(app_for({"demo": Overreach})) as client:
        frames = send(client, "hi")
        assert frames[-1]["stopReason"] == "error"
        context = server_context(client, frames[0]["contextId"])
        assert context.state["locked"] == "original"


class Burst(Agent):
    """Says a burst without awaiting anything else, noting what the stream had by then."""

    streamed_after_first: ClassVar[list[str]] = []
    streamed: ClassVar[list[str]] = []

    async def run(self, run: Run, text: str) -> None:
        await run.say("first ")
        type(self).streamed_after_first = list(type(self).streamed)
        for index in range(50):
            await run.say(f"w{index} ")


@pytest.mark.anyio
async def test_the_first_delta_is_streamed_before_the_rest_of_a_burst() -> None:
    server = app_for({"burst": Burst}).state.thinwire
    log = await server.start("burst", "anonymous", None, "go")

    async def follow() -> None:
        async for batch in log.follow(0).batches():
            Burst.streamed.extend(data for _, data in batch or ())

    follower = asyncio.create_task(follow())
    await asyncio.wait_for(follower, timeout=5)
    assert [frame for frame in Burst.streamed_after_first if '"token"' in frame] == [
        f'{{"contextId":"{log.context.id}","runId":"{log.run_id}","seq":2,'
        '"type":"token","delta":"first "}'
    ]
    assert len(Burst.streamed) == 53  # run_start, 51 tokens, done


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class KeepsNotJson(Agent):
    """Says something, then keeps a value JSON cannot hold as `how` says; asked to recall,
    says how many notes its history holds."""

    how: ClassVar[str] = "append"

    async def run(self, run: Run, text: str) -> None:
        if text == "recall":
            notes = [m for m in run.history if m["role"] == "note"]
            await run.say(f"{len(notes)} notes")
            return
        await run.say("bad noted")
        how = type(self).how
        if how == "append":
            run.history.append({"role": "note", "content": {1, 2}})
            return
        if how == "result in place, then asks":
            found = await run.step("look", self.look)
            found["found"].append({1, 2})  # JSON when recorded; not once changed in place
            await run.interrupt("Go on?", options=["yes"])
        note: dict[str, Any] = {"role": "note", "content": []}
        run.history.append(note)  # JSON when added; not once changed in place
        note["content"].append({1, 2})
        if how == "in place, then raises":
            raise RuntimeError("and then the agent failed")
        if how == "in place, then asks":
            await run.interrupt("Go on?", options=["yes"])

    async def look(self) -> dict[str, Any]:
        return {"found": []}


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize(
    ("how", "complaint"),
    [
        ("append", "run.history[1]['content'] is a set; run.history holds JSON values only"),
        ("in place", "run.history[1]['content'][0] is a set; run.history holds JSON values"),
        ("in place, then raises", "and then the agent failed"),
        ("in place, then asks", "run.history[1]['content'][0] is a set"),
        ("result in place, then asks", "a step's or tool's result was changed, once recorded"),
    ],
)
def test_a_history_message_that_is_not_json_fails_the_run_and_keeps_its_reply(
    how: str, complaint: str, store: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Refused where it is added, or — changed in place after — left out of the history
    saved; either way the run fails as on the agent's own exception (not as a store
    failure to retry), its reply saved and the conversation's numbering unbroken."""
    KeepsNotJson.how = how
    caplog.set_level(logging.ERROR, "thinwire")
    stored = MemoryStore() if store == "memory" else SQLiteStore(tmp_path / "db")
    with TestClient(app_for({"demo": KeepsNotJson}, store=stored)) as client:
        frames = send(client, "note this")
        errors = [f for f in frames if f["type"] == "error"]
        assert [(e["code"], e["retryable"]) for e in errors] == [("agent_error", False)]
        assert frames[-1]["type"] == "done" and frames[-1]["stopReason"] == "error"
        assert frames[-1]["text"] == "bad noted"
        context_id = frames[0]["contextId"]
        recalled = send(client, "recall", context_id)
        assert recalled[0]["seq"] == frames[-1]["seq"] + 1  # not as after a crash
        assert recalled[-1]["text"] == "0 notes"
        transcript = client.get(f"/agents/demo/contexts/{context_id}").json()
    assert transcript["pendingInterrupt"] is None
    replies = [(t["text"], t["stopReason"]) for t in transcript["turns"] if t["role"] != "user"]
    assert replies == [("bad noted", "error"), ("0 notes", "end")]
    logged = "\n".join(r.getMessage() + str(r.exc_info) for r in caplog.records)
    assert complaint in logged and "could not be saved" not in logged


class KeepsUsage(Agent):
    tokens: ClassVar[Any] = 1

    async def run(self, run: Run, text: str) -> None:
        await run.say("counted ")
        run.record_usage("m-1", type(self).tokens, 0)


@pytest.mark.parametrize(
    ("tokens", "complaint"),
    [
        (1.5, "counts tokens as an int, not float"),
        (math.nan, "counts tokens as an int, not float"),
        ("7", "counts tokens as an int, not str"),
        (True, "counts tokens as an int, not bool"),
        (-1, "counts tokens from 0, not -1"),
    ],
)
def test_usage_that_is_not_a_count_fails_the_run_where_it_is_recorded(
    tokens: Any, complaint: str, caplog: pytest.LogCaptureFixture
) -> None:
    KeepsUsage.tokens = tokens
    caplog.set_level(logging.ERROR, "thinwire")
    with TestClient(app_for({"demo": KeepsUsage})) as client:
        frames = send(client, "hi")
        again = send(client, "hi", frames[0]["contextId"])
    assert [f["type"] for f in frames][-2:] == ["error", "done"]
    assert frames[-2]["code"] == "agent_error" and frames[-2]["retryable"] is False
    assert frames[-1]["text"] == "counted " and again[0]["seq"] == frames[-1]["seq"] + 1
    assert complaint in "\n".join(str(r.exc_info) for r in caplog.records)


class KeepsOtherValues(Agent):
    """Hands the run a value JSON cannot hold where `what` says."""

    what: ClassVar[str] = "payload"

    async def run(self, run: Run, text: str) -> None:
        async def make(value: Any = None) -> Any:
            return {1, 2}

        async def result() -> Any:
            return {"found": {1, 2}}

        what = type(self).what
        if what == "payload":
            await run.interrupt("Go on?", options=["yes"], payload={"ids": {1, 2}})
        elif what == "arguments":
            await run.tool("make", make, value={1, 2})
        elif what == "output":
            await run.tool("make", make)
        else:
            await run.step("look", result)


@pytest.mark.parametrize(
    ("what", "complaint"),
    [
        (
            "payload",
            "the interrupt payload['ids'] is a set; an interrupt's payload is sent to the user "
            "as JSON, so JSON values only",
        ),
        (
            "arguments",
            "the arguments of tool 'make'['value'] is a set; a tool's arguments are recorded "
            "in run.history, so JSON values only",
        ),
        (
            "output",
            "the output of tool 'make' is a set; a tool's output is recorded in run.history, "
            "so JSON values only",
        ),
        (
            "step",
            "the result of step 'look'['found'] is a set; a step's result is recorded for a "
            "resume to return, so JSON values only",
        ),
    ],
)
def test_a_value_that_is_not_json_is_refused_naming_what_it_is_for(
    what: str, complaint: str, caplog: pytest.LogCaptureFixture
) -> None:
    KeepsOtherValues.what = what
    caplog.set_level(logging.ERROR, "thinwire")
    with TestClient(app_for({"demo": KeepsOtherValues})) as client:
        frames = send(client, "hi")
    assert frames[-2]["code"] == "agent_error" and frames[-1]["stopReason"] == "error"
    logged = "\n".join(str(r.exc_info) for r in caplog.records)
    assert complaint in logged and "AgentState" not in logged


class Hanging(Agent):
    """Calls a tool that never returns by itself."""

    async def wait(self, order: str) -> str:
        await asyncio.Event().wait()
        return "never"

    async def run(self, run: Run, text: str) -> None:
        await run.say("Placing it. ")
        await run.tool("place_order", self.wait, order=text)


def test_a_tool_cut_short_by_a_stop_is_recorded_as_not_finished() -> None:
    """It started, so it may have done its work: the history says so for the next run
    (a model reads it), and the transcript does not show it as still running."""
    with TestClient(app_for({"demo": Hanging})) as client:
        with client.stream(
            "POST", "/agents/demo/runs", json={"message": {"text": "two books"}}
        ) as stream:
            lines = stream.iter_lines()
            frames: list[dict[str, Any]] = []
            while not any(f["type"] == "tool_call" for f in frames):
                frames += parse_sse(next(lines) + "\n")
            context_id = frames[0]["contextId"]
            client.post(f"/agents/demo/contexts/{context_id}/stop")
            frames += parse_sse("\n".join(lines))
        assert [f["type"] for f in frames][-2:] == ["tool_result", "done"]
        assert frames[-2]["ok"] is False and frames[-1]["stopReason"] == "stopped"
        transcript = client.get(f"/agents/demo/contexts/{context_id}").json()
        [activity] = transcript["turns"][-1]["activity"]
        assert (activity["name"], activity["ok"]) == ("place_order", False)
        history = server_context(client, context_id).history
        [call] = [m for m in history if m["role"] == "tool"]
        assert call["arguments"] == {"order": "two books"} and call["ok"] is False
        assert "may have partly run" in call["error"]


class LeavesATool(Agent):
    """Starts a tool it does not wait for, then ends as the message says: by returning,
    failing or asking."""

    left: ClassVar[set[asyncio.Task[Any]]] = set()

    async def forever(self) -> str:
        await asyncio.Event().wait()
        return "never"

    async def run(self, run: Run, text: str) -> None:
        type(self).left.add(asyncio.create_task(run.tool("slow_tool", self.forever)))
        await asyncio.sleep(0)  # the call starts, and is shown, in the run
        if text == "fail":
            raise RuntimeError("failed with a tool running")
        if text == "ask":
            await run.interrupt("Go on?", options=["yes"])
        await run.say("done")


@pytest.mark.parametrize(
    ("text", "ends"),
    [
        ("return", ["tool_call", "token", "tool_result", "done"]),
        ("fail", ["tool_call", "tool_result", "error", "done"]),
        ("ask", ["tool_call", "interrupt", "tool_result", "done"]),
    ],
)
def test_a_tool_left_running_is_shown_over_when_its_run_ends(text: str, ends: list[str]) -> None:
    """Nothing the call does after its run ended is shown (`Run.end`): the run's end
    shows it as not finished, so no client shows it running for ever."""
    LeavesATool.left = set()
    with TestClient(app_for({"demo": LeavesATool})) as client:
        frames = send(client, text)
        transcript = client.get(f"/agents/demo/contexts/{frames[0]['contextId']}").json()
        assert client.portal is not None
        for task in LeavesATool.left:
            client.portal.call(cancel, task)
    assert [f["type"] for f in frames[1:]] == ends
    call, result = (
        next(f for f in frames if f["type"] == kind) for kind in ("tool_call", "tool_result")
    )
    assert (result["callId"], result["name"], result["ok"]) == (call["callId"], "slow_tool", False)
    [activity] = transcript["turns"][-1]["activity"]
    assert (activity["name"], activity["ok"]) == ("slow_tool", False)


async def cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class Outlives(Agent):
    """Leaves work running that uses the Run once its run is over — a tool it started,
    and a task that waits for the test's word — noting what each use raised. The run
    returns, or (`asks`) ends waiting for a decision."""

    initial_state: ClassVar[dict[str, Any]] = {"kept": "yes"}
    asks: ClassVar[bool] = False
    go: ClassVar[asyncio.Event]
    finished: ClassVar[asyncio.Event]
    raised: ClassVar[dict[str, str]] = {}
    ran: ClassVar[list[str]] = []
    left: ClassVar[set[asyncio.Task[None]]] = set()

    async def slow(self) -> str:
        await type(self).go.wait()
        return "slow result"

    async def late_tool(self) -> str:
        type(self).ran.append("late_tool")
        return "late result"

    async def late_step(self) -> str:
        type(self).ran.append("late_step")
        return "late result"

    async def run(self, run: Run, text: str) -> None:
        if text == "first" and not run.replaying:
            for work in (
                self.late(run),
                self.note(run, "slow_tool", run.tool("slow_tool", self.slow)),
            ):
                type(self).left.add(asyncio.create_task(work))
            await asyncio.sleep(0)  # the slow tool starts (its call is shown) in the run
        await run.say(f"{text} done")
        if type(self).asks and text == "first":
            await run.interrupt("Go on?", options=["yes"])

    async def note(self, run: Run, use: str, work: Awaitable[Any]) -> None:
        try:
            await work
        except Exception as exc:
            type(self).raised[use] = f"{type(exc).__name__}: {exc}"

    async def late(self, run: Run) -> None:
        try:
            await self.use_late(run)
        finally:
            type(self).finished.set()

    async def use_late(self, run: Run) -> None:
        await type(self).go.wait()
        uses: dict[str, Callable[[], Any]] = {
            "say": lambda: run.say("late words"),
            "think": lambda: run.think("late thoughts"),
            "state": lambda: run.state.__setitem__("late", 1),
            "state.set": lambda: run.state.set("late", 1, source="late-job"),
            "del state": lambda: run.state.__delitem__("kept"),
            "history": lambda: run.history.append({"role": "note", "content": "late"}),
            "tool": lambda: run.tool("late_tool", self.late_tool),
            "step": lambda: run.step("late_step", self.late_step),
            "interrupt": lambda: run.interrupt("Late question?"),
            "handoff": lambda: run.handoff("demo", "late"),
            "title": lambda: run.set_title("Late title"),
            "usage": lambda: run.record_usage("m-1", 1, 1),
        }
        for use, call in uses.items():
            try:
                result = call()
                if inspect.isawaitable(result):
                    await result
            except (Exception, Suspend) as exc:
                type(self).raised[use] = f"{type(exc).__name__}: {exc}"
        await asyncio.gather(
            *(task for task in type(self).left if task is not asyncio.current_task())
        )


@pytest.mark.parametrize("asks", [False, True])
def test_a_run_used_after_it_ended_refuses_and_records_nothing(asks: bool) -> None:
    """Work the agent left running outlives its run: each use of the Run raises, and
    nothing of it lands — not in the run being saved, not in the next one."""
    Outlives.asks, Outlives.raised, Outlives.ran, Outlives.left = asks, {}, [], set()
    Outlives.go, Outlives.finished = asyncio.Event(), asyncio.Event()
    with TestClient(app_for({"demo": Outlives})) as client:
        first = send(client, "first")
        assert first[-1]["stopReason"] == ("interrupted" if asks else "end")
        context_id, run_id = first[0]["contextId"], first[0]["runId"]
        assert client.portal is not None
        client.portal.call(Outlives.go.set)
        client.portal.call(Outlives.finished.wait)
        later = decide(client, first, "yes") if asks else []
        second = send(client, "second", context_id)
        transcript = client.get(f"/agents/demo/contexts/{context_id}").json()
        context = server_context(client, context_id)
        history, state = list(context.history), dict(context.state)
    assert set(Outlives.raised) == {
        "say", "think", "state", "state.set", "del state", "history", "tool", "step",
        "interrupt", "handoff", "title", "usage", "slow_tool",
    }  # fmt: skip
    for use, raised in Outlives.raised.items():
        assert raised.startswith(f"RunEnded: run {run_id} has ended: "), use
    assert "run.say() is refused. A Run is only good until its run ends" in Outlives.raised["say"]
    assert Outlives.ran == []  # the late tool and step never ran
    # Nothing late landed: the numbering runs on unbroken, no state, history or title.
    assert second[0]["seq"] == (later or first)[-1]["seq"] + 1
    assert state == {"kept": "yes"}
    assert not [m for m in history if "late" in str(m) or m.get("name") == "slow_tool"]
    assert transcript["title"] == "first" and "late" not in str(transcript)


class HandsOver(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.handoff("helper", text)
        Helper.gate.set()  # the helper's part is over: what it left running goes on
        raised = await Helper.left
        await run.say(f" / the helper's late work got: {raised}")


class Helper(Agent):
    gate: ClassVar[asyncio.Event]
    left: ClassVar[asyncio.Task[str]]

    async def run(self, run: Run, text: str) -> None:
        await run.say("helping")

        async def late() -> str:
            await type(self).gate.wait()
            try:
                run.state["helper_late"] = True  # would be audited as the first agent's
                await run.say(" late helping")
            except RuntimeError as exc:
                return str(exc)
            return "nothing"

        type(self).gate = asyncio.Event()
        type(self).left = asyncio.create_task(late())


def test_a_run_handed_off_ends_for_its_agent_when_the_handoff_returns() -> None:
    with TestClient(app_for({"demo": HandsOver, "helper": Helper})) as client:
        frames = send(client, "hi")
        state = dict(server_context(client, frames[0]["contextId"]).state)
    text = frames[-1]["text"]
    assert text.startswith("helping / the helper's late work got: run ")
    assert "has ended for 'helper', whose handoff returned: a write to run.state" in text
    assert "late helping" not in text and "helper_late" not in state


class Charges(Agent):
    """Calls a `charge` tool, or step, as `how` says, and says what that raised."""

    how: ClassVar[str] = "async"
    charged: ClassVar[list[str]] = []

    async def run(self, run: Run, text: str) -> None:
        charged = type(self).charged

        def charge_now(card: str) -> str:
            charged.append(card)
            return "charged"

        async def charge(card: str) -> str:
            return charge_now(card)

        class Charger:
            async def __call__(self, card: str) -> str:
                return charge_now(card)

        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "plain def": lambda: run.call_tool("charge", charge_now, {"card": "4242"}),
            "arguments as text": lambda: run.call_tool("charge", charge, "card=4242"),  # type: ignore[arg-type]
            "not callable": lambda: run.call_tool("charge", "charge", {"card": "4242"}),  # type: ignore[arg-type]
            "step of a plain def": lambda: run.step("charge", lambda: charge_now("4242")),
            "step not callable": lambda: run.step("charge", None),  # type: ignore[arg-type]
            "partial": lambda: run.call_tool("charge", functools.partial(charge, "4242"), {}),
            "async __call__": lambda: run.tool("charge", Charger(), card="4242"),
            "lambda of a coroutine": lambda: run.tool(
                "charge", lambda **a: charge(**a), card="4242"
            ),
            "step of a lambda": lambda: run.step("charge", lambda: charge("4242")),
        }
        try:
            await calls[type(self).how]()
        except TypeError as exc:
            await run.say(f"TypeError: {exc}")
        else:
            await run.say("done")


@pytest.mark.parametrize(
    ("how", "refusal", "ran"),
    [
        ("arguments as text", "the arguments of tool 'charge' are a dict", False),
        ("not callable", "tool 'charge' is called as await fn(**arguments)", False),
        ("step not callable", "step 'charge' is called as await fn()", False),
        # Only calling a plain function shows it is one: it has run, and the run is told
        # so by a TypeError, not a ToolFailed a model would answer by calling it again.
        ("plain def", "tool 'charge' must be an async function", True),
        ("step of a plain def", "step 'charge' must be an async function", True),
    ],
)
def test_a_tool_or_step_that_cannot_be_awaited_is_a_type_error_not_a_failed_call(
    how: str, refusal: str, ran: bool
) -> None:
    Charges.how, Charges.charged = how, []
    with TestClient(app_for({"demo": Charges})) as client:
        frames = send(client, "hi")
        history = list(server_context(client, frames[0]["contextId"]).history)
    said = frames[-1]["text"]
    assert said.startswith("TypeError: ") and refusal in said, said
    assert Charges.charged == (["4242"] if ran else [])
    called = [m for m in history if m["role"] == "tool"]
    if how == "plain def":
        assert tool_frames(frames) == [
            ("tool_call", "charge", None),
            ("tool_result", "charge", False),
        ]
        [entry] = called
        assert entry["ok"] is False and "it ran" in entry["error"]
    else:
        assert tool_frames(frames) == [] and called == []


@pytest.mark.parametrize(
    "how", ["partial", "async __call__", "lambda of a coroutine", "step of a lambda"]
)
def test_a_callable_that_returns_an_awaitable_is_a_tool_or_step(how: str) -> None:
    Charges.how, Charges.charged = how, []
    with TestClient(app_for({"demo": Charges})) as client:
        frames = send(client, "hi")
    assert frames[-1]["text"] == "done" and Charges.charged == ["4242"]
    if how != "step of a lambda":
        assert tool_frames(frames) == [
            ("tool_call", "charge", None),
            ("tool_result", "charge", True),
        ]
