"""Human-in-the-loop: interrupts survive reloads and restarts; decisions resume by replay."""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel
from starlette.requests import HTTPConnection
from starlette.testclient import TestClient

from conftest import app_for, parse_sse, server_context
from thinwire import Agent, Approval, Rejected, Run, SQLiteStore

PRIVATE = "tw-canary-checkpoint-5e1f"
OPERATOR_TOKEN = "interrupts-operator-token"
OPERATOR = {"authorization": f"Bearer {OPERATOR_TOKEN}"}


class Refunder(Agent):
    lookups: ClassVar[list[str]] = []
    refunds: ClassVar[list[int]] = []

    async def lookup(self, order: str) -> dict[str, Any]:
        type(self).lookups.append(order)
        return {"order": order, "amount": 40, "internal": PRIVATE}

    async def refund(self, order: str, amount: int) -> str:
        type(self).refunds.append(amount)
        return f"refunded {amount}"

    async def run(self, run: Run, text: str) -> None:
        await run.think("Checking the order. ")
        found = await run.tool("lookup_order", self.lookup, order="1234")
        await run.say("I found your order. ")
        try:
            await run.tool(
                "issue_refund",
                self.refund,
                approval=Approval(
                    f"Refund ${found['amount']} on order 1234?", {"order": "1234", "amount": 40}
                ),
                order="1234",
                amount=found["amount"],
            )
        except Rejected:
            await run.say("Okay, no refund.")
            return
        await run.say("Refund issued.")


class Amount(BaseModel):
    amount: int


class TwoQuestions(Agent):
    async def run(self, run: Run, text: str) -> None:
        color = await run.interrupt("Which color?", options=["red", "blue"])
        await run.say(f"{color}. ")
        size = await run.interrupt("How much?", schema=Amount)
        await run.say(f"{size.amount} of them.")


class AsksTwiceThenRecalls(Agent):
    """Says a word before each of two questions; asked to recall, says what the history
    holds of its last reply."""

    async def run(self, run: Run, text: str) -> None:
        if text == "recall":
            replies = [m for m in run.history if m["role"] == "assistant"]
            await run.say(f"{replies[-1]['content']}|{replies[-1]['stopReason']}")
            return
        await run.say("a ")
        await run.interrupt("Go on?", options=["yes"])
        await run.say("b ")
        await run.interrupt("Really?", options=["yes"])


def by_header(connection: HTTPConnection) -> str | None:
    return connection.headers.get("x-user", "ada")


@pytest.fixture
def client() -> Any:
    Refunder.lookups, Refunder.refunds = [], []
    app = app_for(
        {"demo": Refunder, "two": TwoQuestions, "recalls": AsksTwiceThenRecalls},
        identify=by_header,
    )
    with TestClient(app) as test_client:
        yield test_client


def ask(client: TestClient, agent: str = "demo") -> list[dict[str, Any]]:
    return parse_sse(
        client.post(f"/agents/{agent}/runs", json={"message": {"text": "refund"}}).text
    )


def decide(
    client: TestClient,
    context_id: str,
    interrupt_id: str,
    value: Any,
    agent: str = "demo",
    **headers: str,
) -> Any:
    return client.post(
        f"/agents/{agent}/contexts/{context_id}/decisions",
        json={"interruptId": interrupt_id, "value": value},
        headers=headers,
    )


def test_the_run_suspends_with_only_the_public_request(client: TestClient) -> None:
    frames = ask(client)
    interrupt, done = frames[-2], frames[-1]
    assert interrupt["type"] == "interrupt"
    request = interrupt["interrupt"]
    assert request["prompt"] == "Refund $40 on order 1234?"
    assert request["options"] == ["approve", "reject"]
    assert request["payload"] == {"order": "1234", "amount": 40}
    assert done["stopReason"] == "interrupted" and done["text"] == "I found your order. "
    assert PRIVATE not in str(frames)
    transcript = client.get(f"/agents/demo/contexts/{done['contextId']}").json()
    assert transcript["pendingInterrupt"] == request
    assert transcript["turns"][-1]["stopReason"] == "interrupted"
    assert PRIVATE not in str(transcript)


def test_approve_resumes_without_redoing_what_was_done(client: TestClient) -> None:
    frames = ask(client)
    context_id, request = frames[0]["contextId"], frames[-2]["interrupt"]
    response = decide(client, context_id, request["interruptId"], "approve")
    assert response.status_code == 200
    resumed = parse_sse(response.text)
    kinds = [f["type"] for f in resumed]
    assert kinds[0] == "run_start" and resumed[0]["runId"] != frames[0]["runId"]
    assert resumed[0]["seq"] == frames[-1]["seq"] + 1
    assert "thinking" not in kinds  # the replayed part is not sent again
    assert [f["name"] for f in resumed if f["type"] == "tool_call"] == ["issue_refund"]
    assert resumed[-1]["text"] == "Refund issued." and resumed[-1]["toolCalls"] == ["issue_refund"]
    assert Refunder.lookups == ["1234"] and Refunder.refunds == [40]
    transcript = client.get(f"/agents/demo/contexts/{context_id}").json()
    assert transcript["pendingInterrupt"] is None
    assert [t["text"] for t in transcript["turns"]] == [
        "refund",
        "I found your order. ",
        "Refund issued.",
    ]


def test_reject_never_runs_the_tool(client: TestClient) -> None:
    frames = ask(client)
    resumed = parse_sse(
        decide(
            client, frames[0]["contextId"], frames[-2]["interrupt"]["interruptId"], "reject"
        ).text
    )
    assert resumed[-1]["text"] == "Okay, no refund." and resumed[-1]["stopReason"] == "end"
    assert Refunder.refunds == [] and Refunder.lookups == ["1234"]
    # The history says so, as it says what a stop left unanswered.
    history = server_context(client, frames[0]["contextId"]).history
    [refund] = [m for m in history if m.get("name") == "issue_refund"]
    assert (refund["ok"], refund["error"]) == (False, "a person rejected this call; it did not run")


def test_several_interrupts_in_one_run_with_options_and_a_schema(client: TestClient) -> None:
    first = ask(client, "two")
    context_id = first[0]["contextId"]
    color = first[-2]["interrupt"]
    assert color["options"] == ["red", "blue"] and color["decisionSchema"] is None
    bad = decide(client, context_id, color["interruptId"], "green", agent="two")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_decision"
    # A sentence a person can read, not a Python list.
    assert bad.json()["error"]["message"] == "The answer must be one of: red, blue."
    second = parse_sse(decide(client, context_id, color["interruptId"], "blue", agent="two").text)
    size = second[-2]["interrupt"]
    assert second[-1]["text"] == "blue. " and size["decisionSchema"]["required"] == ["amount"]
    wrong = decide(client, context_id, size["interruptId"], {"amount": "many"}, agent="two")
    assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "invalid_decision"
    third = parse_sse(
        decide(client, context_id, size["interruptId"], {"amount": 3}, agent="two").text
    )
    assert third[-1]["text"] == "3 of them." and third[-1]["stopReason"] == "end"


def test_typed_errors_around_decisions(client: TestClient) -> None:
    frames = ask(client)
    context_id, interrupt_id = frames[0]["contextId"], frames[-2]["interrupt"]["interruptId"]

    busy = client.post(
        "/agents/demo/runs", json={"contextId": context_id, "message": {"text": "hi"}}
    )
    assert busy.status_code == 409
    assert busy.json()["error"] == {
        "code": "decision_pending",
        "message": busy.json()["error"]["message"],
        "retryable": False,
        "interruptId": interrupt_id,
    }
    unknown = decide(client, context_id, "int-" + "0" * 24, "approve")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "interrupt_not_found"
    foreign = decide(client, context_id, interrupt_id, "approve", **{"x-user": "eve"})
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "context_not_found"
    assert Refunder.refunds == []

    assert decide(client, context_id, interrupt_id, "approve").status_code == 200
    again = decide(client, context_id, interrupt_id, "approve")
    assert again.status_code == 409 and again.json()["error"]["code"] == "interrupt_answered"
    assert Refunder.refunds == [40]
    # Pages show the words as they are: they name the question, never its id.
    for refusal in (busy, unknown, again):
        assert "int-" not in refusal.json()["error"]["message"]


def test_stop_while_waiting_ends_the_run(client: TestClient) -> None:
    frames = ask(client)
    context_id, interrupt_id = frames[0]["contextId"], frames[-2]["interrupt"]["interruptId"]
    stopped = client.post(f"/agents/demo/contexts/{context_id}/stop").json()
    assert stopped == {"contextId": context_id, "runId": frames[0]["runId"], "stopping": True}
    transcript = client.get(f"/agents/demo/contexts/{context_id}").json()
    assert transcript["pendingInterrupt"] is None
    # The reply that asked ends there, stopped: no empty reply is added after it.
    assert [(t["role"], t["text"], t["stopReason"]) for t in transcript["turns"]] == [
        ("user", "refund", None),
        ("assistant", "I found your order. ", "stopped"),
    ]
    late = decide(client, context_id, interrupt_id, "approve")
    assert late.status_code == 404 and late.json()["error"]["code"] == "interrupt_not_found"
    # A reattach is not shown the question that is gone.
    assert client.get(f"/agents/demo/contexts/{context_id}/events").status_code == 204
    after = client.post(
        "/agents/demo/runs", json={"contextId": context_id, "message": {"text": "x"}}
    )
    assert after.status_code == 200
    assert Refunder.refunds == []


def test_stop_while_waiting_again_ends_the_reply_there_and_the_history_keeps_it(
    client: TestClient,
) -> None:
    first = ask(client, "recalls")
    context_id, interrupt_id = first[0]["contextId"], first[-2]["interrupt"]["interruptId"]
    second = parse_sse(decide(client, context_id, interrupt_id, "yes", agent="recalls").text)
    assert second[-1]["stopReason"] == "interrupted"
    client.post(f"/agents/recalls/contexts/{context_id}/stop")
    turns = client.get(f"/agents/recalls/contexts/{context_id}").json()["turns"]
    assert [(t["text"], t["stopReason"]) for t in turns] == [
        ("refund", None),
        ("a ", "interrupted"),  # answered: the run went on
        ("b ", "stopped"),  # the question still waiting when it was stopped
    ]
    recalled = parse_sse(
        client.post(
            "/agents/recalls/runs", json={"contextId": context_id, "message": {"text": "recall"}}
        ).text
    )
    assert recalled[-1]["text"] == "a b |stopped"  # all it said, before and after the answer


class Keeper(Agent):
    """Looks something up and notes it, asks; then acts, notes it, asks again. Asked to
    recall, says what its AgentState and history hold."""

    done: ClassVar[list[str]] = []

    async def look(self) -> str:
        type(self).done.append("look")
        return "found"

    async def act(self) -> str:
        type(self).done.append("act")
        return "acted"

    async def run(self, run: Run, text: str) -> None:
        if text == "recall":
            tools = [m["name"] for m in run.history if m["role"] == "tool"]
            await run.say(f"{run.state.get('noted')}|{','.join(tools)}")
            return
        await run.tool("look", self.look)
        run.state["noted"] = ["looked"]
        await run.interrupt("Go on?", options=["yes"])
        run.state["noted"] = ["looked", "went on"]
        await run.tool("act", self.act)
        await run.interrupt("Really?", options=["yes"])


def test_a_stop_while_waiting_keeps_what_the_run_did_as_any_stop_does(tmp_path: Path) -> None:
    """Its tool steps in the history and its AgentState writes, audited as the run's, as a
    stop at any other point keeps them; also when the stop comes after a restart."""
    Keeper.done = []

    def app() -> Any:
        return app_for(
            {"keeper": Keeper}, store=SQLiteStore(tmp_path / "db"), operator_token=OPERATOR_TOKEN
        )

    with TestClient(app()) as first:
        asked = parse_sse(first.post("/agents/keeper/runs", json={"message": {"text": "go"}}).text)
        context_id, interrupt_id = asked[0]["contextId"], asked[-2]["interrupt"]["interruptId"]
        asked_at = time.time()
        again = parse_sse(decide(first, context_id, interrupt_id, "yes", agent="keeper").text)
    assert again[-1]["stopReason"] == "interrupted"
    with TestClient(app()) as restarted:
        restarted.post(f"/agents/keeper/contexts/{context_id}/stop")
        events = restarted.get(f"/agents/keeper/contexts/{context_id}/events")
        assert events.status_code == 204
        recalled = parse_sse(
            restarted.post(
                "/agents/keeper/runs", json={"contextId": context_id, "message": {"text": "recall"}}
            ).text
        )
        audit = restarted.get(
            f"/admin/agents/keeper/contexts/{context_id}/audit",
            headers=OPERATOR,
        ).json()
    assert recalled[-1]["text"] == "['looked', 'went on']|look,act"
    assert Keeper.done == ["look", "act"]  # each once: kept, not done again
    writes = [(entry["key"], entry["value"], entry["runId"]) for entry in audit["entries"]]
    # Each write as the run that made it made it: the replay after the answer repeats the
    # first, which stays the asking run's, at its own time.
    assert writes == [
        ("noted", ["looked"], asked[0]["runId"]),
        ("noted", ["looked", "went on"], again[0]["runId"]),
    ]
    assert audit["entries"][0]["time"] < asked_at < audit["entries"][1]["time"]


def test_a_decision_after_a_restart_replays_from_the_store(tmp_path: Path) -> None:
    Refunder.lookups, Refunder.refunds = [], []

    def app() -> Any:
        return app_for({"demo": Refunder}, store=SQLiteStore(tmp_path / "db"))

    with TestClient(app()) as first:
        frames = ask(first)
    context_id, interrupt_id = frames[0]["contextId"], frames[-2]["interrupt"]["interruptId"]
    with TestClient(app()) as restarted:
        transcript = restarted.get(f"/agents/demo/contexts/{context_id}").json()
        assert transcript["pendingInterrupt"]["interruptId"] == interrupt_id
        resumed = parse_sse(decide(restarted, context_id, interrupt_id, "approve").text)
    assert resumed[-1]["text"] == "Refund issued."
    assert Refunder.lookups == ["1234"]  # not looked up again after the restart
    assert Refunder.refunds == [40]  # refunded exactly once


class Wavering(Agent):
    calls: ClassVar[int] = 0

    async def run(self, run: Run, text: str) -> None:
        type(self).calls += 1
        if type(self).calls == 1:
            await run.tool("first", self.noop)
        await run.interrupt("Go on?", options=["yes"])

    async def noop(self) -> None:
        return None


def test_a_resume_that_does_not_replay_its_journal_fails_loudly() -> None:
    Wavering.calls = 0
    with TestClient(app_for({"demo": Wavering})) as client:
        frames = ask(client)
        resumed = parse_sse(
            decide(
                client, frames[0]["contextId"], frames[-2]["interrupt"]["interruptId"], "yes"
            ).text
        )
    assert resumed[-2]["code"] == "agent_error" and resumed[-1]["stopReason"] == "error"


def test_decide_over_a_websocket(client: TestClient) -> None:
    def until_done(socket: Any) -> list[dict[str, Any]]:
        frames = [socket.receive_json()]
        while frames[-1]["type"] != "done":
            frames.append(socket.receive_json())
        return frames

    with client.websocket_connect("/agents/demo/ws", subprotocols=["thinwire.v1"]) as socket:
        socket.send_json({"type": "send", "message": {"text": "refund"}})
        asked = until_done(socket)
        request = asked[-2]["interrupt"]
        decision = {
            "type": "decide",
            "contextId": asked[0]["contextId"],
            "interruptId": request["interruptId"],
        }
        socket.send_json({**decision, "value": "maybe"})
        assert socket.receive_json()["code"] == "invalid_decision"
        socket.send_json({**decision, "value": "approve"})
        resumed = until_done(socket)
    assert resumed[-1]["text"] == "Refund issued." and Refunder.refunds == [40]


class Counts(Agent):
    """Counts a model call's tokens before it asks and another's after, shown publicly."""

    async def run(self, run: Run, text: str) -> None:
        run.record_usage("m-1", 100, 10, public=True)
        await run.say("asked ")
        await run.interrupt("Go on?", options=["yes"])
        run.record_usage("m-1", 1, 1, public=True)
        await run.say("went on")


def test_usage_is_counted_once_across_a_resume() -> None:
    """The resume replays the code before the question: what it counted then was counted
    already, in the operator's totals and in the public meta of the reply that asked."""
    with TestClient(app_for({"demo": Counts}, operator_token=OPERATOR_TOKEN)) as client:
        frames = ask(client)
        context_id = frames[0]["contextId"]
        interrupt_id = frames[-2]["interrupt"]["interruptId"]
        resumed = parse_sse(decide(client, context_id, interrupt_id, "yes").text)
        usage = client.get(
            f"/admin/agents/demo/contexts/{context_id}/usage",
            headers=OPERATOR,
        ).json()
        turns = client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]
    assert resumed[-1]["text"] == "went on"
    assert usage["total"] == {"m-1": {"calls": 2, "inputTokens": 101, "outputTokens": 11}}
    assert [run["models"] for run in usage["runs"]] == [
        {"m-1": {"calls": 1, "inputTokens": 100, "outputTokens": 10}},
        {"m-1": {"calls": 1, "inputTokens": 1, "outputTokens": 1}},
    ]
    replies = [t for t in turns if t["role"] == "assistant"]
    assert [(t["text"], t["meta"]["usage"]) for t in replies] == [
        ("asked ", {"inputTokens": 100, "outputTokens": 10}),
        ("went on", {"inputTokens": 1, "outputTokens": 1}),
    ]


def asked_turns(transcript: dict[str, Any]) -> list[tuple[str, Any]]:
    """Each reply's stop reason and what it asked (None when it asked nothing)."""
    return [(t["stopReason"], t["asked"]) for t in transcript["turns"] if t["role"] == "assistant"]


def test_the_transcript_keeps_what_was_asked_and_the_answer(client: TestClient) -> None:
    frames = ask(client)
    context_id, request = frames[0]["contextId"], frames[-2]["interrupt"]
    waiting = client.get(f"/agents/demo/contexts/{context_id}").json()
    # The question, exactly as its frame carried it: nothing private.
    assert asked_turns(waiting) == [
        ("interrupted", {"request": request, "status": "waiting", "decision": None})
    ]
    assert waiting["turns"][0]["asked"] is None  # the user's turn asks nothing
    assert PRIVATE not in str(waiting)
    decide(client, context_id, request["interruptId"], "approve")
    answered = client.get(f"/agents/demo/contexts/{context_id}").json()
    assert asked_turns(answered) == [
        ("interrupted", {"request": request, "status": "answered", "decision": "approve"}),
        ("end", None),
    ]
    assert PRIVATE not in str(answered)


def test_each_of_several_questions_keeps_its_own_answer(client: TestClient) -> None:
    frames = ask(client, "two")
    context_id = frames[0]["contextId"]
    second = parse_sse(
        decide(client, context_id, frames[-2]["interrupt"]["interruptId"], "blue", "two").text
    )
    decide(client, context_id, second[-2]["interrupt"]["interruptId"], {"amount": 3}, "two")
    transcript = client.get(f"/agents/two/contexts/{context_id}").json()
    assert [
        (r, a and (a["request"]["prompt"], a["status"], a["decision"]))
        for r, a in asked_turns(transcript)
    ] == [
        ("interrupted", ("Which color?", "answered", "blue")),
        ("interrupted", ("How much?", "answered", {"amount": 3})),
        ("end", None),
    ]


def test_a_stop_while_waiting_leaves_the_question_unanswered(client: TestClient) -> None:
    frames = ask(client)
    context_id, request = frames[0]["contextId"], frames[-2]["interrupt"]
    client.post(f"/agents/demo/contexts/{context_id}/stop")
    transcript = client.get(f"/agents/demo/contexts/{context_id}").json()
    assert asked_turns(transcript) == [
        ("stopped", {"request": request, "status": "stopped", "decision": None})
    ]


def test_what_was_asked_and_answered_survives_a_restart(tmp_path: Path) -> None:
    Refunder.lookups, Refunder.refunds = [], []

    def app() -> Any:
        return app_for({"demo": Refunder}, store=SQLiteStore(tmp_path / "db"))

    with TestClient(app()) as first:
        frames = ask(first)
    context_id, request = frames[0]["contextId"], frames[-2]["interrupt"]
    with TestClient(app()) as restarted:
        waiting = restarted.get(f"/agents/demo/contexts/{context_id}").json()
        assert asked_turns(waiting)[-1][1] == {
            "request": request,
            "status": "waiting",
            "decision": None,
        }
        decide(restarted, context_id, request["interruptId"], "reject")
    with TestClient(app()) as again:
        answered = again.get(f"/agents/demo/contexts/{context_id}").json()
    assert asked_turns(answered) == [
        ("interrupted", {"request": request, "status": "answered", "decision": "reject"}),
        ("end", None),
    ]


class CatchesEverything(Agent):
    """Asks for approval inside a `try` whose handler catches what `how` says, then goes
    on as if the tool had failed."""

    how: ClassVar[str] = "bare"

    async def run(self, run: Run, text: str) -> None:
        async def refund() -> str:
            return "refunded"

        how = type(self).how
        try:
            result = await run.tool("refund", refund, approval=Approval("Refund?"))
        except Exception:
            result = "failed"
        except BaseException:
            if how == "except Exception":
                raise
            result = "failed"
            if how == "then raises":
                raise RuntimeError("the refund could not be checked") from None
            if how == "then asks again":
                await run.interrupt("Refund anyway?", options=["yes"])
        await run.say(f"result: {result}")


@pytest.mark.parametrize("how", ["then returns", "then raises", "then asks again"])
def test_a_question_the_agent_went_on_from_fails_the_run(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The agent caught the Suspend its question raised (a bare `except:`): the question
    went out, but nobody could answer it. The run fails, logged, rather than end as if it
    had not asked or wait on a second question past an unanswerable first."""
    CatchesEverything.how = how
    caplog.set_level(logging.ERROR, "thinwire")
    with TestClient(app_for({"demo": CatchesEverything})) as client:
        frames = ask(client)
        context_id = frames[0]["contextId"]
        transcript = client.get(f"/agents/demo/contexts/{context_id}").json()
        again = client.post(  # the conversation is free, not waiting for an answer
            "/agents/demo/runs", json={"contextId": context_id, "message": {"text": "again"}}
        )
    kinds = [f["type"] for f in frames]
    assert kinds[:2] == ["run_start", "interrupt"] and kinds[-2:] == ["error", "done"]
    assert frames[-2]["code"] == "agent_error" and frames[-1]["stopReason"] == "error"
    assert transcript["pendingInterrupt"] is None and again.status_code == 200
    reference = frames[-2]["message"].rsplit(" ", 1)[-1].rstrip(".")
    logged = "\n".join(r.getMessage() + str(r.exc_info) for r in caplog.records)
    assert reference in logged
    assert "asked a person ('Refund?') and then went on: its code caught thinwire's Suspend" in (
        logged
    )


def test_an_except_exception_does_not_catch_the_question() -> None:
    CatchesEverything.how = "except Exception"
    with TestClient(app_for({"demo": CatchesEverything})) as client:
        frames = ask(client)
    assert [f["type"] for f in frames] == ["run_start", "interrupt", "done"]
    assert frames[-1]["stopReason"] == "interrupted"


#: What a model may put in a prompt from a tool argument anyone wrote: an override makes
#: "0001$" read "$1000", an isolate with marks swaps "Eve" and "Bob" (in Chromium).
SPOOFED = "Pay \u202e0001$\u202c to \u2067Eve\u200f or\u200f Bob\u2069?\u061c\u200e"
#: Hebrew and Arabic letters, a ZWNJ and a ZWJ emoji: text, kept as it is.
RTL = "לאשר? تأكيد؟ نمی\u200cشود 👩\u200d💻"


class AsksWithBidiControls(Agent):
    async def run(self, run: Run, text: str) -> None:
        options = ["\u202eevorppa\u202c", RTL]
        choice = await run.interrupt(f"{SPOOFED} {RTL}", options=options)
        await run.say(f"option {options.index(choice)}")  # the option it gave, not as shown


def test_a_question_reaches_every_reader_without_bidi_controls() -> None:
    app = app_for({"demo": AsksWithBidiControls}, identify=by_header, operator_token=OPERATOR_TOKEN)
    with TestClient(app) as client:
        frames = ask(client)
        context_id, request = frames[0]["contextId"], frames[-2]["interrupt"]
        assert request["prompt"] == f"Pay 0001$ to Eve or Bob? {RTL}"
        assert request["options"] == ["evorppa", RTL]
        path = f"/agents/demo/contexts/{context_id}"
        for read in (client.get(path).json(), client.get(f"/admin{path}", headers=OPERATOR).json()):
            assert read["pendingInterrupt"] == request
            assert read["turns"][-1]["asked"]["request"] == request
        checkpoint = server_context(client, context_id).record.checkpoint
        assert checkpoint is not None and checkpoint.interrupt == request
        # The person answers what they read; the agent, replaying, gets its own option.
        resumed = parse_sse(decide(client, context_id, request["interruptId"], RTL).text)
        assert resumed[-1]["stopReason"] == "end" and resumed[-1]["text"] == "option 1"


def test_a_question_kept_with_its_bidi_controls_is_still_answered() -> None:
    """A checkpoint saved by an earlier release has the prompt as the agent gave it: its
    journal still matches the prompt the agent asks again, controls dropped."""
    with TestClient(app_for({"demo": AsksWithBidiControls}, identify=by_header)) as client:
        frames = ask(client)
        context_id, request = frames[0]["contextId"], frames[-2]["interrupt"]
        record = server_context(client, context_id).record
        assert record.checkpoint is not None
        kept = {**request, "prompt": f"{SPOOFED} {RTL}", "options": ["\u202eevorppa\u202c", RTL]}
        record.checkpoint = dataclasses.replace(record.checkpoint, interrupt=kept)
        resumed = parse_sse(decide(client, context_id, request["interruptId"], RTL).text)
        assert resumed[-1]["stopReason"] == "end" and resumed[-1]["text"] == "option 1"
