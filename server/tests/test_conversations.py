"""A principal's conversations: the list, titles, regenerate, edit and branches."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
from collections.abc import Iterator
from typing import Any, ClassVar

import httpx
import pytest
from starlette.testclient import TestClient

from conftest import app_for, parse_sse, server_context
from thinwire import Agent, MemoryStore, Run, wire
from thinwire.branches import WHOLE, Page, Position, reaching_back
from thinwire.demo import DemoAgent

ADA = {"x-user": "ada"}
EVE = {"x-user": "eve"}


def by_header(connection: Any) -> str | None:
    return connection.headers.get("x-user")


class Numbered(Agent):
    """Answers "<text> #<n>", n counting every run; remembers the history it was given
    and writes AgentState, so a test sees what each run read and wrote."""

    system_prompt = "number the replies"
    runs = 0
    seen: ClassVar[list[list[str]]] = []

    async def run(self, run: Run, text: str) -> None:
        type(self).runs += 1
        type(self).seen.append([str(m["content"]) for m in run.history])
        run.state["last"] = text
        if text.startswith("name it "):
            run.set_title(text.removeprefix("name it "))
        await run.think(f"numbering {text}")
        await run.say(f"{text} #{type(self).runs}")
        run.record_usage("stub-model", 7, 3, public=text == "public usage")


@pytest.fixture
def client() -> Iterator[TestClient]:
    Numbered.runs, Numbered.seen = 0, []
    app = app_for({"chat": Numbered, "demo": DemoAgent}, identify=by_header)
    with TestClient(app) as test_client:
        yield test_client


def send(
    client: TestClient,
    text: str,
    context_id: str | None = None,
    headers: dict[str, str] = ADA,
    agent: str = "chat",
) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"message": {"text": text}}
    if context_id is not None:
        body["contextId"] = context_id
    response = client.post(f"/agents/{agent}/runs", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


def url(context_id: str, tail: str = "", agent: str = "chat") -> str:
    return f"/agents/{agent}/contexts/{context_id}{tail}"


def turns(client: TestClient, context_id: str) -> list[dict[str, Any]]:
    response = client.get(url(context_id), headers=ADA)
    assert response.status_code == 200, response.text
    return list(response.json()["turns"])


def texts(client: TestClient, context_id: str) -> list[str]:
    return [turn["text"] for turn in turns(client, context_id)]


def conversation(client: TestClient, *messages: str, headers: dict[str, str] = ADA) -> str:
    context_id = str(send(client, messages[0], headers=headers)[0]["contextId"])
    for text in messages[1:]:
        send(client, text, context_id, headers=headers)
    return context_id


def listed(client: TestClient, headers: dict[str, str] = ADA, **query: Any) -> dict[str, Any]:
    response = client.get("/agents/chat/contexts", params=query, headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def error(response: Any) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


# --- the list ---------------------------------------------------------------------------


def test_the_list_shows_the_callers_conversations_most_recent_first(client: TestClient) -> None:
    first = conversation(client, "first topic")
    second = conversation(client, "second topic", "more on it")
    third = conversation(client, "third topic")
    send(client, "back to the first", first)  # now the most recently active
    conversation(client, "eve's own", headers=EVE)

    page = listed(client)
    # Built without the wire model, for speed: it must still be exactly its shape.
    assert wire.ConversationPage.model_validate(page).model_dump(by_alias=True) == page
    ids = [c["contextId"] for c in page["conversations"]]
    assert ids == [first, third, second] and page["nextCursor"] is None
    top = page["conversations"][0]
    assert top["title"] == "first topic" and top["status"] == "idle"
    assert top["turnCount"] == 4 and top["preview"] == "back to the first #5"
    assert top["createdAt"] <= top["updatedAt"]
    # Another principal sees only their own; another agent's list is its own too.
    assert [c["title"] for c in listed(client, EVE)["conversations"]] == ["eve's own"]
    assert client.get("/agents/demo/contexts", headers=ADA).json()["conversations"] == []


def test_the_list_pages_with_an_opaque_cursor(client: TestClient) -> None:
    made = [conversation(client, f"topic {n}") for n in range(5)]
    seen: list[str] = []
    query: dict[str, Any] = {"limit": 2}
    while True:
        page = listed(client, **query)
        seen += [c["contextId"] for c in page["conversations"]]
        if page["nextCursor"] is None:
            break
        query = {"limit": 2, "cursor": page["nextCursor"]}
    assert seen == made[::-1]
    for bad in ({"limit": 0}, {"limit": 101}, {"limit": "ten"}, {"cursor": "not-ours"}):
        response = client.get("/agents/chat/contexts", params=bad, headers=ADA)
        assert error(response) == (400, "invalid_request"), bad
    assert client.get("/agents/chat/contexts").status_code == 401


def test_the_list_says_which_conversation_waits_for_a_decision(client: TestClient) -> None:
    context_id = send(client, "hello", agent="demo")[0]["contextId"]
    frames = send(client, "refund please", context_id, agent="demo")
    assert frames[-2]["type"] == "interrupt"
    [waiting] = client.get("/agents/demo/contexts", headers=ADA).json()["conversations"]
    assert waiting["status"] == "waiting"


# --- titles -----------------------------------------------------------------------------


def test_titles_come_from_the_first_message_the_agent_and_the_user(client: TestClient) -> None:
    long = "a rather long first message " * 5
    context_id = conversation(client, long, "second")
    title = listed(client)["conversations"][0]["title"]
    assert title.endswith("…") and len(title) <= 60 and long.startswith(title[:-1])

    frames = send(client, "name it Travel plans", context_id)
    assert [f["title"] for f in frames if f["type"] == "title"] == ["Travel plans"]
    assert client.get(url(context_id), headers=ADA).json()["title"] == "Travel plans"

    renamed = client.patch(url(context_id), json={"title": "  Mine  "}, headers=ADA)
    assert renamed.status_code == 200 and renamed.json()["title"] == "Mine"
    wire.ConversationSummary.model_validate(renamed.json())
    assert renamed.json()["contextId"] == context_id
    # The user's name stays: the agent's next title is not used, nor announced.
    frames = send(client, "name it Agent's idea", context_id)
    assert "title" not in [f["type"] for f in frames]
    assert listed(client)["conversations"][0]["title"] == "Mine"


def test_an_agent_title_must_show_something(client: TestClient) -> None:
    """As the user's: an agent's title of nothing a reader sees is the agent's mistake,
    as a blank one is, and the title stays."""
    context_id = conversation(client, "name it Plans")
    for unseen in ("\u200b\u200b", "\u202e\u202c", "\ufeff\u2060"):
        frames = send(client, f"name it {unseen}", context_id)
        assert [f["code"] for f in frames if f["type"] == "error"] == ["agent_error"]
        assert "title" not in [f["type"] for f in frames]
    assert client.get(url(context_id), headers=ADA).json()["title"] == "Plans"
    # Format characters that reorder nothing are text: a ZWNJ inside a Persian word.
    frames = send(client, "name it نمی\u200cشود", context_id)
    assert [f["title"] for f in frames if f["type"] == "title"] == ["نمی\u200cشود"]


def test_editing_the_first_message_keeps_the_title(client: TestClient) -> None:
    """A title is taken from a message only while there is none: an edit of the first
    message and a branch switch keep it. An agent that names the conversation in the
    edit's run renames it, as in any run."""
    context_id = conversation(client, "one", "two")
    first = turns(client, context_id)[0]
    edit = {"turnId": first["id"], "message": {"text": "uno"}}
    client.post(url(context_id, "/edits"), json=edit, headers=ADA)
    assert texts(client, context_id)[0] == "uno"
    assert client.get(url(context_id), headers=ADA).json()["title"] == "one"
    assert listed(client)["conversations"][0]["title"] == "one"
    edited = turns(client, context_id)[0]
    back = {"turnId": edited["id"], "index": 0}
    assert client.post(url(context_id, "/branch"), json=back, headers=ADA).json()["title"] == "one"

    edit = {"turnId": first["id"], "message": {"text": "name it Numbers"}}
    frames = parse_sse(client.post(url(context_id, "/edits"), json=edit, headers=ADA).text)
    assert [f["title"] for f in frames if f["type"] == "title"] == ["Numbers"]
    assert listed(client)["conversations"][0]["title"] == "Numbers"


def test_a_title_cut_short_keeps_whole_characters(client: TestClient) -> None:
    family = "\U0001f469\u200d\U0001f469\u200d\U0001f467"  # one emoji, five code points
    for start in range(55, 60):
        context_id = conversation(client, "x" * start + family + " and more words after")
        title = client.get(url(context_id), headers=ADA).json()["title"]
        assert title.endswith("…") and len(title) <= 60
        kept = title[:-1]
        assert family in kept or ("\u200d" not in kept and "\U0001f469" not in kept), title


def test_a_rename_is_checked(client: TestClient) -> None:
    context_id = conversation(client, "hello")
    for body, expected in (
        ({"title": "x" * 201}, (400, "title_too_long")),
        ({"title": "   "}, (400, "invalid_request")),
        ({"title": ""}, (400, "invalid_request")),
        ({"title": "\x00\u202e"}, (400, "invalid_request")),
        ({"title": "\u200b\ufeff\u2060"}, (400, "invalid_request")),  # nothing to see
        ({}, (400, "invalid_request")),
    ):
        assert error(client.patch(url(context_id), json=body, headers=ADA)) == expected
    ok = client.patch(url(context_id), json={"title": "x" * 200}, headers=ADA)
    assert ok.status_code == 200
    # One line of what it says: no control characters, no override reordering the rest.
    spoof = {"title": "invoice\x00 \u202egpj.exe\u202c\nfor Ada"}
    plain = client.patch(url(context_id), json=spoof, headers=ADA)
    assert plain.json()["title"] == "invoice gpj.exe for Ada"
    marked = {"title": "Ada\u200f's \u061cplans"}  # marks reorder too
    assert client.patch(url(context_id), json=marked, headers=ADA).json()["title"] == "Ada's plans"
    # The limit counts what is kept.
    longest = {"title": "x" * 200 + "\x00\x00"}
    assert client.patch(url(context_id), json=longest, headers=ADA).status_code == 200
    assert error(client.patch(url(context_id), json={"title": "x"}, headers=EVE)) == (
        404,
        "context_not_found",
    )


# --- regenerate, edit, branches -----------------------------------------------------------


def test_regenerate_answers_again_and_keeps_the_old_reply_as_a_sibling(
    client: TestClient,
) -> None:
    context_id = conversation(client, "one", "two")
    before = turns(client, context_id)
    frames = parse_sse(client.post(url(context_id, "/regenerate"), json={}, headers=ADA).text)
    assert frames[-1]["text"] == "two #3"
    after = turns(client, context_id)
    assert [t["text"] for t in after] == ["one", "one #1", "two", "two #3"]
    assert [(t["siblings"], t["siblingIndex"]) for t in after] == [(1, 0)] * 2 + [(2, 1)] * 2
    assert frames[0]["turnId"] == after[-1]["id"] != before[-1]["id"]
    assert after[:2] == before[:2]  # the shared turns, unchanged
    # The new run read the history up to the message, not the reply it replaces.
    assert Numbered.seen[-1] == ["number the replies", "one", "one #1", "two"]

    shown = client.post(
        url(context_id, "/branch"), json={"turnId": after[-1]["id"], "index": 0}, headers=ADA
    )
    assert shown.status_code == 200
    assert [t["text"] for t in shown.json()["turns"]] == ["one", "one #1", "two", "two #2"]
    assert texts(client, context_id) == ["one", "one #1", "two", "two #2"]
    # A send continues the branch shown.
    send(client, "three", context_id)
    assert Numbered.seen[-1][-3:] == ["two", "two #2", "three"]


def test_edit_forks_at_the_users_turn_with_only_the_history_before_it(
    client: TestClient,
) -> None:
    context_id = conversation(client, "one", "two", "three")
    original = turns(client, context_id)
    body = {"turnId": original[2]["id"], "message": {"text": "TWO"}}
    frames = parse_sse(client.post(url(context_id, "/edits"), json=body, headers=ADA).text)
    assert frames[-1]["text"] == "TWO #4"
    edited = turns(client, context_id)
    assert [t["text"] for t in edited] == ["one", "one #1", "TWO", "TWO #4"]
    assert (edited[2]["siblings"], edited[2]["siblingIndex"]) == (2, 1)
    assert frames[0]["userTurnId"] == edited[2]["id"]
    # Never the later turns of the other branch, nor the message it replaces.
    assert Numbered.seen[-1] == ["number the replies", "one", "one #1", "TWO"]
    history = [m["content"] for m in server_context(client, context_id, "chat").history]
    assert history == ["number the replies", "one", "one #1", "TWO", "TWO #4"]

    back = client.post(
        url(context_id, "/branch"), json={"turnId": edited[2]["id"], "index": 0}, headers=ADA
    )
    assert [t["text"] for t in back.json()["turns"]] == [t["text"] for t in original]
    assert back.json()["turns"][2]["siblings"] == 2
    assert listed(client)["conversations"][0]["turnCount"] == 6


def test_going_back_to_an_earlier_alternative_shows_its_latest_branch(
    client: TestClient,
) -> None:
    context_id = conversation(client, "one", "two")
    client.post(url(context_id, "/regenerate"), json={}, headers=ADA)  # "two #3"
    first = turns(client, context_id)[0]
    body = {"turnId": first["id"], "message": {"text": "uno"}}
    client.post(url(context_id, "/edits"), json=body, headers=ADA)
    edited = turns(client, context_id)[0]
    back = client.post(
        url(context_id, "/branch"), json={"turnId": edited["id"], "index": 0}, headers=ADA
    )
    # The regenerated reply, made after the one it replaced, not the first one.
    shown = back.json()["turns"]
    assert [t["text"] for t in shown] == ["one", "one #1", "two", "two #3"]
    assert [(t["siblings"], t["siblingIndex"]) for t in shown] == [(2, 0)] * 2 + [(2, 1)] * 2
    assert texts(client, context_id) == ["one", "one #1", "two", "two #3"]


@pytest.mark.parametrize("cold", [False, True], ids=["live", "cold"])
def test_a_turn_of_another_branch_names_its_exchange_to_switch_to(
    client: TestClient, cold: bool
) -> None:
    context_id = conversation(client, "one", "two")
    original = turns(client, context_id)
    body = {"turnId": original[2]["id"], "message": {"text": "TWO"}}
    client.post(url(context_id, "/edits"), json=body, headers=ADA)
    if cold:  # the other branch's exchanges are in the store only
        registry = client.app.state.thinwire.contexts  # type: ignore[attr-defined]
        registry.forget_cached(server_context(client, context_id, "chat"))
    branch = url(context_id, "/branch")
    # The id the page kept from before the edit: off the branch shown now.
    back = client.post(branch, json={"turnId": original[2]["id"], "index": 0}, headers=ADA)
    assert back.status_code == 200, back.text
    assert [t["text"] for t in back.json()["turns"]] == ["one", "one #1", "two", "two #2"]
    again = client.post(branch, json={"turnId": original[3]["id"], "index": 1}, headers=ADA)
    assert [t["text"] for t in again.json()["turns"]] == ["one", "one #1", "TWO", "TWO #3"]
    for unknown in ("turn-000000000001-a7", "turn-000500000001-u0", "turn-000000000009-u0"):
        refused = client.post(branch, json={"turnId": unknown, "index": 0}, headers=ADA)
        assert error(refused) == (404, "turn_not_found")


def test_run_start_names_the_turn_its_run_follows(client: TestClient) -> None:
    first = send(client, "one")
    assert first[0]["afterTurnId"] is None  # the first message follows nothing
    context_id = first[0]["contextId"]
    second = send(client, "two", context_id)
    shown = turns(client, context_id)
    assert second[0]["afterTurnId"] == shown[1]["id"]  # the reply before it
    again = parse_sse(client.post(url(context_id, "/regenerate"), json={}, headers=ADA).text)
    assert again[0]["afterTurnId"] == shown[1]["id"]  # an alternative follows the same turn


def test_agent_state_is_per_conversation_and_its_audit_names_each_run(
    client: TestClient,
) -> None:
    context_id = conversation(client, "one")
    first = send(client, "two", context_id)[0]["runId"]
    again = parse_sse(client.post(url(context_id, "/regenerate"), json={}, headers=ADA).text)
    context = server_context(client, context_id, "chat")
    assert context.state["last"] == "two"  # one state, whichever branch wrote it last
    store = client.app.state.thinwire.store  # type: ignore[attr-defined]
    assert client.portal is not None
    audit = client.portal.call(store.audit, context_id)
    runs = [(entry.value, entry.run_id) for entry in audit if entry.key == "last"]
    assert runs[-2:] == [("two", first), ("two", again[0]["runId"])]


def test_branch_and_edit_errors_are_typed(client: TestClient) -> None:
    context_id = conversation(client, "one", "two")
    shown = turns(client, context_id)
    edits = url(context_id, "/edits")
    missing = "turn-00ff00000000-u0"

    def edit(turn_id: str, text: str = "x") -> tuple[int, str]:
        body = {"turnId": turn_id, "message": {"text": text}}
        return error(client.post(edits, json=body, headers=ADA))

    assert edit(shown[1]["id"]) == (400, "not_a_user_turn")
    assert edit(missing) == (404, "turn_not_found")
    assert edit("turn-1") == (400, "invalid_request")
    assert edit(shown[0]["id"], " ") == (400, "invalid_request")
    client.post(url(context_id, "/regenerate"), json={}, headers=ADA)
    assert edit(shown[3]["id"]) == (400, "not_a_user_turn")  # a reply of another branch

    branch = url(context_id, "/branch")
    current = turns(client, context_id)
    assert error(
        client.post(branch, json={"turnId": current[2]["id"], "index": 2}, headers=ADA)
    ) == (404, "branch_not_found")
    assert error(client.post(branch, json={"turnId": missing, "index": 0}, headers=ADA)) == (
        404,
        "turn_not_found",
    )
    for index in (-1, "1", 1.0, True):  # a whole number, not one made from something else
        assert error(
            client.post(branch, json={"turnId": current[2]["id"], "index": index}, headers=ADA)
        ) == (400, "invalid_request")
    # Nothing of that changed the conversation.
    assert turns(client, context_id) == current

    cleared = client.post(url(context_id, "/clear"), headers=ADA)
    assert cleared.status_code == 200
    assert error(client.post(url(context_id, "/regenerate"), json={}, headers=ADA)) == (
        409,
        "nothing_to_regenerate",
    )


def test_an_index_past_the_alternatives_says_how_many_there_are(client: TestClient) -> None:
    context_id = conversation(client, "one")
    first = turns(client, context_id)[0]["id"]

    def refused(index: int) -> str:
        body = {"turnId": first, "index": index}
        response = client.post(url(context_id, "/branch"), json=body, headers=ADA)
        assert error(response) == (404, "branch_not_found")
        return str(response.json()["error"]["message"])

    assert refused(1) == "that turn has 1 alternative"
    regenerate(client, context_id)
    assert refused(2) == "that turn has 2 alternatives"
    # Any index a conversation's branches could reach is asked about, not refused unread.
    assert refused(10_001) == "that turn has 2 alternatives"
    assert refused(wire.MAX_BRANCHES - 1) == "that turn has 2 alternatives"
    body = {"turnId": first, "index": wire.MAX_BRANCHES}
    response = client.post(url(context_id, "/branch"), json=body, headers=ADA)
    assert error(response) == (400, "invalid_request")


def test_a_conversation_out_of_branches_says_so_and_still_goes_on(client: TestClient) -> None:
    context_id = conversation(client, "one")
    lines = server_context(client, context_id, "chat").record.lines
    lines.next_line = wire.MAX_BRANCHES  # as after 65,536 regenerations and edits
    for refused in (
        regenerate(client, context_id),
        client.post(
            url(context_id, "/edits"),
            json={"turnId": turns(client, context_id)[0]["id"], "message": {"text": "uno"}},
            headers=ADA,
        ),
    ):
        assert error(refused) == (409, "too_many_branches")
        assert "65536 branches" in refused.json()["error"]["message"]
    send(client, "two", context_id)  # a send forks nothing: the branch shown goes on
    assert [t["text"] for t in turns(client, context_id)[::2]] == ["one", "two"]
    # A clear keeps the count (turn ids are never reused), so its first send is refused.
    client.post(url(context_id, "/clear"), headers=ADA)
    assert error(post_run(client, "three", context_id, None)) == (409, "too_many_branches")


def test_regenerate_and_edit_wait_for_a_pending_decision(client: TestClient) -> None:
    context_id = send(client, "hello", agent="demo")[0]["contextId"]
    send(client, "refund please", context_id, agent="demo")
    user = client.get(url(context_id, agent="demo"), headers=ADA).json()["turns"][0]
    for tail, body in (
        ("/regenerate", {}),
        ("/edits", {"turnId": user["id"], "message": {"text": "hi"}}),
        ("/branch", {"turnId": user["id"], "index": 0}),
    ):
        response = client.post(url(context_id, tail, agent="demo"), json=body, headers=ADA)
        assert error(response) == (409, "decision_pending"), tail


def test_a_conversation_waiting_for_a_decision_can_be_renamed(client: TestClient) -> None:
    context_id = send(client, "hello", agent="demo")[0]["contextId"]
    asked = send(client, "refund please", context_id, agent="demo")
    interrupt = next(f for f in asked if f["type"] == "interrupt")["interrupt"]
    renamed = client.patch(url(context_id, agent="demo"), json={"title": "Refund"}, headers=ADA)
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["title"] == "Refund"
    # The question still waits, and its answer goes on as before.
    transcript = client.get(url(context_id, agent="demo"), headers=ADA).json()
    assert transcript["title"] == "Refund"
    assert transcript["pendingInterrupt"]["interruptId"] == interrupt["interruptId"]
    answered = client.post(
        url(context_id, "/decisions", agent="demo"),
        json={"interruptId": interrupt["interruptId"], "value": "approve"},
        headers=ADA,
    )
    assert parse_sse(answered.text)[-1]["type"] == "done"
    assert client.get(url(context_id, agent="demo"), headers=ADA).json()["title"] == "Refund"


class Pausing(MemoryStore):
    """A store whose next save or delete, once armed, waits inside until let go: a
    rename or a forget caught holding its conversation."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.inside = asyncio.Event()
        self.go = asyncio.Event()

    async def _pause(self) -> None:
        if self.armed:
            self.armed = False
            self.inside.set()
            await self.go.wait()

    async def save(self, record: Any, **options: Any) -> int:
        await self._pause()
        return await super().save(record, **options)

    async def delete(self, context_id: str) -> bool:
        await self._pause()
        return await super().delete(context_id)


@pytest.mark.parametrize("verb", ["rename", "forget"])
def test_a_send_right_after_a_rename_or_forget_waits_for_it(
    verb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user renames the chat, then types: the send arrives while the rename holds the
    conversation, and waits for it rather than being refused as busy. After a forget it
    finds the conversation gone, as any later request does."""
    store = Pausing()
    app = app_for({"chat": Numbered}, identify=by_header, store=store)
    with TestClient(app) as client:
        context_id = conversation(client, "hello")
        registry = client.app.state.thinwire.contexts  # type: ignore[attr-defined]
        arrived = asyncio.Event()
        acquire = registry.acquire

        async def spied(context: Any, holder: str) -> None:
            if holder == "run":
                arrived.set()
            await acquire(context, holder)

        monkeypatch.setattr(registry, "acquire", spied)

        async def race() -> tuple[httpx.Response, httpx.Response]:
            transport = httpx.ASGITransport(app=client.app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://testserver", headers=ADA
            ) as http:
                store.armed = True
                if verb == "rename":
                    change = asyncio.create_task(
                        http.patch(url(context_id), json={"title": "Mine"})
                    )
                else:
                    change = asyncio.create_task(http.delete(url(context_id)))
                await store.inside.wait()  # the change holds the conversation
                body = {"contextId": context_id, "message": {"text": "typed"}}
                sent = asyncio.create_task(http.post("/agents/chat/runs", json=body))
                await arrived.wait()  # the send asks for the conversation meanwhile
                store.go.set()
                return await change, await sent

        assert client.portal is not None
        changed, sent = client.portal.call(race)
        if verb == "rename":
            assert changed.status_code == 200 and changed.json()["title"] == "Mine"
            assert sent.status_code == 200, sent.text
            assert parse_sse(sent.text)[-1]["stopReason"] == "end"
            assert texts(client, context_id) == ["hello", "hello #1", "typed", "typed #2"]
            assert listed(client)["conversations"][0]["title"] == "Mine"
        else:
            assert changed.status_code == 204
            assert error(sent) == (404, "context_not_found")
            assert listed(client)["conversations"] == []


def test_a_repeated_regenerate_replays_the_run_it_started(client: TestClient) -> None:
    context_id = conversation(client, "one")
    body = {"messageId": "msg-regen-0001"}
    first = parse_sse(client.post(url(context_id, "/regenerate"), json=body, headers=ADA).text)
    again = parse_sse(client.post(url(context_id, "/regenerate"), json=body, headers=ADA).text)
    assert first[0]["runId"] == again[0]["runId"] and Numbered.runs == 2
    assert turns(client, context_id)[-1]["siblings"] == 2


def test_another_principal_cannot_reach_any_of_it(client: TestClient) -> None:
    context_id = conversation(client, "private")
    turn_id = turns(client, context_id)[0]["id"]
    unknown = "ctx-" + "0" * 36
    for target in (context_id, unknown):
        for method, tail, body in (
            ("PATCH", "", {"title": "mine now"}),
            ("POST", "/regenerate", {}),
            ("POST", "/edits", {"turnId": turn_id, "message": {"text": "x"}}),
            ("POST", "/branch", {"turnId": turn_id, "index": 0}),
        ):
            response = client.request(method, url(target, tail), json=body, headers=EVE)
            assert error(response) == (404, "context_not_found"), (target, tail)
    assert texts(client, context_id) == ["private", "private #1"]
    assert listed(client)["conversations"][0]["title"] == "private"


def page(client: TestClient, context_id: str, headers: dict[str, str] = ADA, **query: Any) -> Any:
    return client.get(url(context_id), params=query, headers=headers)


def read_back_in_pages(client: TestClient, context_id: str, limit: int) -> list[dict[str, Any]]:
    """The branch shown, read from its end a page at a time, as a UI scrolling up does."""
    body = page(client, context_id, limit=limit).json()
    read = body["turns"]
    while body["hasEarlier"]:
        assert len(body["turns"]) == 2 * limit
        body = page(client, context_id, limit=limit, before=read[0]["id"]).json()
        read = body["turns"] + read
    return list(read)


@pytest.mark.parametrize("cold", [False, True], ids=["live", "cold"])
def test_a_transcript_reads_in_pages_from_its_end(client: TestClient, cold: bool) -> None:
    context_id = conversation(client, *(f"m{n}" for n in range(7)))
    whole = turns(client, context_id)
    edited = {"turnId": whole[6]["id"], "message": {"text": "M3"}}
    client.post(url(context_id, "/edits"), json=edited, headers=ADA)
    send(client, "m4'", context_id)
    if cold:  # answered from the store's transcript, not the live context
        registry = client.app.state.thinwire.contexts  # type: ignore[attr-defined]
        registry.forget_cached(server_context(client, context_id, "chat"))
    shown = turns(client, context_id)
    assert [t["text"] for t in shown[::2]] == ["m0", "m1", "m2", "M3", "m4'"]
    assert page(client, context_id).json()["hasEarlier"] is False
    for limit in (1, 2, 5, 1000):
        assert read_back_in_pages(client, context_id, limit) == shown
    last = page(client, context_id, limit=2).json()
    assert [t["text"] for t in last["turns"]] == ["M3", "M3 #8", "m4'", "m4' #9"]
    assert last["hasEarlier"] is True and last["contextId"] == context_id
    # Before a turn of a branch not shown: that branch's own earlier exchanges.
    before = page(client, context_id, limit=2, before=whole[10]["id"]).json()  # m5
    assert [t["text"] for t in before["turns"][::2]] == ["m3", "m4"]
    assert [t["siblings"] for t in before["turns"][::2]] == [2, 1]
    # The first page of another branch comes back from the switch itself, reaching back
    # to the exchange before the one switched (m2: shown on both branches), so a client
    # that had read that far keeps what it read and the exchange switched stays in view.
    switched = client.post(
        url(context_id, "/branch"),
        params={"limit": 1},
        json={"turnId": shown[6]["id"], "index": 0},
        headers=ADA,
    ).json()
    assert [t["text"] for t in switched["turns"][::2]] == ["m2", "m3", "m4", "m5", "m6"]
    assert switched["turns"][0]["id"] == shown[4]["id"]
    assert switched["hasEarlier"] is True
    again = turns(client, context_id)
    assert [t["id"] for t in again] == [t["id"] for t in whole]
    assert read_back_in_pages(client, context_id, 3) == again


def test_a_switch_reaches_back_to_its_fork_only_within_a_page() -> None:
    longest = wire.MAX_TRANSCRIPT_PAGE
    assert reaching_back(Page(10), fork=40, depth=45, longest=longest) == Page(10)  # ends there
    assert reaching_back(Page(2), fork=40, depth=45, longest=longest) == Page(6)  # from 39 on
    assert reaching_back(Page(2), fork=0, depth=45, longest=longest) == Page(45)  # the whole
    assert reaching_back(Page(2), fork=1, depth=1000, longest=longest) == Page(longest)
    # Too far back to reach: the page asked for, not a longest one without the fork.
    assert reaching_back(Page(2), fork=1, depth=1001, longest=longest) == Page(2)
    assert reaching_back(Page(2), fork=1, depth=5000, longest=longest) == Page(2)
    assert reaching_back(WHOLE, fork=40, depth=45, longest=longest) == WHOLE
    before = Page(2, Position(0, 3))
    assert reaching_back(before, fork=1, depth=45, longest=longest) == before


def test_a_switch_too_far_back_answers_the_page_asked_for(
    stored_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A switch reaches back to its fork within the longest page; past it, the page asked
    for (the fork is read with `before`), never a longest page that misses it anyway."""
    monkeypatch.setattr(wire, "MAX_TRANSCRIPT_PAGE", 4)
    client = stored_client
    context_id = conversation(client, *(f"m{n}" for n in range(8)))
    shown = turns(client, context_id)
    branch = url(context_id, "/branch")

    def switch(exchange: int) -> Any:
        edited = {"turnId": shown[2 * exchange]["id"], "message": {"text": "edited"}}
        client.post(url(context_id, "/edits"), json=edited, headers=ADA)
        body = {"turnId": shown[2 * exchange]["id"], "index": 0}
        return client.post(branch, params={"limit": 2}, json=body, headers=ADA).json()

    beyond = switch(1)  # from m0: 8 exchanges, more than a page holds
    assert [t["text"] for t in beyond["turns"][::2]] == ["m6", "m7"]
    assert beyond["hasEarlier"] is True
    within = switch(5)  # from m4, one before: 4 exchanges, the longest page
    assert [t["text"] for t in within["turns"][::2]] == ["m4", "m5", "m6", "m7"]


def test_a_page_asked_for_wrongly_is_refused_and_reveals_nothing(client: TestClient) -> None:
    context_id = conversation(client, "one", "two")
    first = turns(client, context_id)[0]["id"]
    for limit in ("0", "-1", "x", "1001", "²"):
        assert error(page(client, context_id, limit=limit)) == (400, "invalid_request"), limit
    # No turn's id at all: a malformed query. One of a turn's form the conversation lacks: 404.
    for before in ("nope", "x" * 5000, "\x00", f"{first} ", first.upper(), first + "0" * 4):
        assert error(page(client, context_id, before=before)) == (400, "invalid_request")
    for before in ("turn-000900000000-u0", "turn-000000000009-u0"):
        assert error(page(client, context_id, before=before)) == (404, "turn_not_found")
    # Another principal learns neither the conversation nor its turns.
    for before in (first, "turn-000900000000-u0"):
        response = page(client, context_id, EVE, limit=1, before=before)
        assert error(response) == (404, "context_not_found")
    cleared = client.post(url(context_id, "/clear"), headers=ADA)
    assert cleared.status_code == 200  # the turn ids of the history cleared are gone
    assert error(page(client, context_id, before=first)) == (404, "turn_not_found")


def test_a_query_parameter_given_twice_is_refused_not_read_as_its_last(
    client: TestClient,
) -> None:
    # Read as the last alone, ?limit=1&limit=1000 is not what either half asked for.
    context_id = conversation(client, "one", "two")
    first = turns(client, context_id)[0]["id"]
    repeated = {
        url(context_id): [("limit", "1"), ("limit", "2")],
        url(context_id) + "?before=" + first: [("limit", "1"), ("limit", "1")],
        url(context_id, "/events"): [("after", "0"), ("after", "1")],
        "/agents/chat/contexts": [("limit", "5"), ("limit", "6")],
        "/agents/chat/contexts?limit=5": [("cursor", "a"), ("cursor", "b")],
    }
    for path, params in repeated.items():
        response = client.get(path, params=params, headers=ADA)
        assert error(response) == (400, "invalid_request"), path
        assert "given more than once" in response.json()["error"]["message"]
    # Once each, as ever.
    assert page(client, context_id, limit=1, before=first).status_code == 200


# --- what each turn showed --------------------------------------------------------------


def test_turns_keep_their_thinking_and_public_usage_only_when_marked(client: TestClient) -> None:
    context_id = conversation(client, "quiet", "public usage")
    quiet, public = turns(client, context_id)[1], turns(client, context_id)[3]
    assert quiet["thinking"] == "numbering quiet"
    assert quiet["meta"]["model"] is None and quiet["meta"]["usage"] is None
    assert public["meta"]["model"] == "stub-model"
    assert public["meta"]["usage"] == {"inputTokens": 7, "outputTokens": 3}


# --- a tab behind another: a send names the last turn it shows -------------------------


def post_run(
    client: TestClient, text: str, context_id: str, after: str | None, headers: Any = ADA
) -> Any:
    body: dict[str, Any] = {"contextId": context_id, "message": {"text": text}}
    if after is not None:
        body["afterTurnId"] = after
    return client.post("/agents/chat/runs", json=body, headers=headers)


def regenerate(client: TestClient, context_id: str, turn_id: str | None = None) -> Any:
    body = {} if turn_id is None else {"turnId": turn_id}
    return client.post(url(context_id, "/regenerate"), json=body, headers=ADA)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def stored_client(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[TestClient]:
    """A client of an app over each kind of store."""
    from thinwire import MemoryStore, SQLiteStore
    from thinwire.stores.redis import RedisStore

    store: Any
    if request.param == "memory":
        store = MemoryStore()
    elif request.param == "sqlite":
        store = SQLiteStore(tmp_path / "t.db")
    else:
        prefix = f"test-{secrets.token_hex(4)}"
        store = RedisStore.from_url(request.getfixturevalue("redis_url"), prefix=prefix)
    Numbered.runs, Numbered.seen = 0, []
    app = app_for({"chat": Numbered}, identify=by_header, store=store)
    with TestClient(app) as test_client:
        yield test_client


def made_cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    "forged",
    [
        '[NaN, "x"]',
        '[Infinity, "x"]',
        "[1" + "0" * 400 + ', "x"]',
        '[true, "x"]',
        '[1e999, "x"]',
        '[0, "../../etc"]',
        f'[0, "ctx-{"0" * 35}"]',
        f'[0, "ctx-{"0" * 36}", 1]',
        f'[0, "ctx-{"A" * 36}"]',
    ],
)
def test_a_forged_cursor_is_a_400_on_every_store(stored_client: TestClient, forged: str) -> None:
    """Not a 500 (a number past a float's range) nor a 503 blaming Redis (NaN reached its
    query): any signed-in user can send one. Its shape is checked, not where it came
    from (a list is its owner's alone: a cursor of theirs they made is theirs to use)."""
    conversation(stored_client, "one")
    response = stored_client.get(
        "/agents/chat/contexts", params={"cursor": made_cursor(forged)}, headers=ADA
    )
    assert error(response) == (400, "invalid_request")
    assert response.json()["error"]["message"] == "cursor: not a valid cursor"


def test_a_cursor_of_the_right_shape_pages_on_from_where_it_says(
    stored_client: TestClient,
) -> None:
    conversation(stored_client, "one")
    made = made_cursor(f'[1e12, "ctx-{"f" * 36}"]')  # after everything: all of it
    response = stored_client.get("/agents/chat/contexts", params={"cursor": made}, headers=ADA)
    assert response.status_code == 200 and len(response.json()["conversations"]) == 1


def cool(client: TestClient, context_id: str) -> None:
    """Drop the server's cached copy: the next use reads the store."""
    registry = client.app.state.thinwire.contexts  # type: ignore[attr-defined]
    registry.forget_cached(server_context(client, context_id, "chat"))


@pytest.mark.parametrize("cold", [False, True], ids=["live", "cold"])
def test_a_send_continues_the_branch_its_tab_shows_though_another_tab_switched(
    stored_client: TestClient, cold: bool
) -> None:
    client = stored_client
    context_id = conversation(client, "one", "two")
    shown_in_b = turns(client, context_id)  # tab B shows this, and stays on it
    regenerate(client, context_id)  # tab A: "two #3", now the branch shown
    if cold:
        cool(client, context_id)
    response = post_run(client, "three", context_id, after=shown_in_b[-1]["id"])
    assert response.status_code == 200, response.text
    frames = parse_sse(response.text)
    # B's message answers what B's user saw, and says so.
    assert frames[0]["afterTurnId"] == shown_in_b[-1]["id"]
    assert Numbered.seen[-1] == ["number the replies", "one", "one #1", "two", "two #2", "three"]
    after = turns(client, context_id)
    assert [t["text"] for t in after] == ["one", "one #1", "two", "two #2", "three", "three #4"]
    assert after[:2] == shown_in_b[:2]
    assert after[2:4] == [{**t, "siblings": 2} for t in shown_in_b[2:]]  # A's, a sibling
    assert listed(client)["conversations"][0]["turnCount"] == 6
    # The branch A made is kept, and a tab that shows it continues it in turn.
    back = client.post(
        url(context_id, "/branch"), json={"turnId": after[3]["id"], "index": 1}, headers=ADA
    )
    regenerated = back.json()["turns"]
    assert [t["text"] for t in regenerated] == ["one", "one #1", "two", "two #3"]
    if cold:
        cool(client, context_id)
    response = post_run(client, "three", context_id, after=after[-1]["id"])
    assert parse_sse(response.text)[-1]["text"] == "three #5"
    assert texts(client, context_id) == [t["text"] for t in after] + ["three", "three #5"]


@pytest.mark.parametrize("cold", [False, True], ids=["live", "cold"])
def test_a_send_after_a_turn_the_conversation_went_on_from_is_refused(
    stored_client: TestClient, cold: bool
) -> None:
    client = stored_client
    context_id = conversation(client, "one")
    shown_in_b = turns(client, context_id)
    send(client, "two", context_id)  # tab A went on
    before = turns(client, context_id)
    runs = Numbered.runs
    if cold:
        cool(client, context_id)
    refused = post_run(client, "also two", context_id, after=shown_in_b[-1]["id"])
    assert error(refused) == (409, "branch_moved")
    assert refused.json()["error"]["retryable"] is False
    # Shown to the user as it is: it tells what happened, not which request to make.
    assert refused.json()["error"]["message"] == (
        "The conversation changed elsewhere (another tab added to it, or cleared it), so "
        "nothing was done. Look at what it holds now and try again."
    )
    # Nothing recorded: no turn, no run, the same list entry.
    assert turns(client, context_id) == before and Numbered.runs == runs
    assert listed(client)["conversations"][0]["turnCount"] == 4
    # The user's turn of an exchange names it as well as its reply does.
    assert error(post_run(client, "x", context_id, after=shown_in_b[0]["id"])) == (
        409,
        "branch_moved",
    )
    assert post_run(client, "three", context_id, after=before[-2]["id"]).status_code == 200


@pytest.mark.parametrize("cold", [False, True], ids=["live", "cold"])
def test_an_edit_of_a_turn_on_another_branch_forks_there(
    stored_client: TestClient, cold: bool
) -> None:
    client = stored_client
    context_id = conversation(client, "one", "two", "three")
    shown_in_b = turns(client, context_id)  # tab B shows this, and stays on it
    client.post(  # tab A edits "two": its branch is now the one shown
        url(context_id, "/edits"),
        json={"turnId": shown_in_b[2]["id"], "message": {"text": "deux"}},
        headers=ADA,
    )
    if cold:
        cool(client, context_id)
    # B edits "three", which only B's branch holds: the edit forks beside it, there.
    response = client.post(
        url(context_id, "/edits"),
        json={"turnId": shown_in_b[4]["id"], "message": {"text": "trois"}},
        headers=ADA,
    )
    assert response.status_code == 200, response.text
    assert Numbered.seen[-1] == ["number the replies", "one", "one #1", "two", "two #2", "trois"]
    after = turns(client, context_id)
    assert [t["text"] for t in after] == ["one", "one #1", "two", "two #2", "trois", "trois #5"]
    assert after[2]["siblings"] == 2 and after[4]["siblings"] == 2
    # A's branch is kept, a sibling of B's "two".
    a_branch = client.post(
        url(context_id, "/branch"), json={"turnId": after[2]["id"], "index": 1}, headers=ADA
    )
    assert [t["text"] for t in a_branch.json()["turns"]] == ["one", "one #1", "deux", "deux #4"]


def test_replicas_on_one_store_agree_on_the_branch_a_send_follows(redis_url: str) -> None:
    from thinwire.stores.redis import RedisStore

    prefix = f"test-{secrets.token_hex(4)}"

    def replica() -> TestClient:
        store = RedisStore.from_url(redis_url, prefix=prefix)
        return TestClient(app_for({"chat": Numbered}, identify=by_header, store=store))

    Numbered.runs, Numbered.seen = 0, []
    with replica() as a, replica() as b:
        context_id = conversation(a, "one", "two")
        shown_in_b = turns(b, context_id)  # held by b, from before a's change
        regenerate(a, context_id)
        response = post_run(b, "three", context_id, after=shown_in_b[-1]["id"])
        assert parse_sse(response.text)[0]["afterTurnId"] == shown_in_b[-1]["id"]
        assert Numbered.seen[-1][-3:] == ["two", "two #2", "three"]
        assert texts(a, context_id) == ["one", "one #1", "two", "two #2", "three", "three #4"]
        refused = post_run(a, "again", context_id, after=shown_in_b[-1]["id"])
        assert error(refused) == (409, "branch_moved")


def test_a_send_after_a_turn_the_conversation_never_had_or_dropped(client: TestClient) -> None:
    context_id = conversation(client, "one", "two")
    shown = turns(client, context_id)
    for unknown in ("turn-00ff00000000-u0", "turn-000000000009-a0"):
        assert error(post_run(client, "x", context_id, after=unknown)) == (404, "turn_not_found")
    for malformed in ("turn-1", "", 7):
        body = {"contextId": context_id, "message": {"text": "x"}, "afterTurnId": malformed}
        refused = client.post("/agents/chat/runs", json=body, headers=ADA)
        assert error(refused) == (400, "invalid_request")
    # No conversation named: no turn to follow, whatever the id.
    body = {"message": {"text": "x"}, "afterTurnId": shown[-1]["id"]}
    refused = client.post("/agents/chat/runs", json=body, headers=ADA)
    assert error(refused) == (400, "invalid_request")
    assert "give its contextId" in refused.json()["error"]["message"]
    assert listed(client)["conversations"][0]["turnCount"] == 4
    # Cleared in another tab: what this one shows is gone.
    client.post(url(context_id, "/clear"), headers=ADA)
    assert error(post_run(client, "x", context_id, after=shown[-1]["id"])) == (
        409,
        "branch_moved",
    )
    assert turns(client, context_id) == []
    # Without the turn, a send goes after the branch shown, whatever a tab shows.
    assert post_run(client, "fresh", context_id, after=None).status_code == 200
    assert texts(client, context_id) == ["fresh", "fresh #3"]


def test_a_send_after_a_turn_still_waits_for_a_pending_decision(client: TestClient) -> None:
    context_id = send(client, "hello", agent="demo")[0]["contextId"]
    first = client.get(url(context_id, agent="demo"), headers=ADA).json()["turns"]
    send(client, "refund please", context_id, agent="demo")
    body = {"contextId": context_id, "message": {"text": "x"}, "afterTurnId": first[-1]["id"]}
    refused = client.post("/agents/demo/runs", json=body, headers=ADA)
    assert error(refused) == (409, "decision_pending")


def test_a_send_without_the_turn_follows_the_branch_shown(client: TestClient) -> None:
    context_id = conversation(client, "one", "two")
    regenerate(client, context_id)  # "two #3", shown
    assert post_run(client, "three", context_id, after=None).status_code == 200
    assert Numbered.seen[-1][-3:] == ["two", "two #3", "three"]


def test_regenerate_names_the_reply_its_tab_shows(client: TestClient) -> None:
    context_id = conversation(client, "one", "two")
    shown_in_b = turns(client, context_id)
    body = {"turnId": shown_in_b[2]["id"], "message": {"text": "TWO"}}
    client.post(url(context_id, "/edits"), json=body, headers=ADA)  # tab A: "TWO #3"
    again = regenerate(client, context_id, shown_in_b[-1]["id"])
    assert again.status_code == 200, again.text
    frames = parse_sse(again.text)
    assert frames[-1]["text"] == "two #4"
    assert frames[0]["afterTurnId"] == shown_in_b[1]["id"]
    # The message B showed, answered again with what came before it.
    assert Numbered.seen[-1] == ["number the replies", "one", "one #1", "two"]
    after = turns(client, context_id)
    assert [t["text"] for t in after] == ["one", "one #1", "two", "two #4"]
    assert [(t["siblings"], t["siblingIndex"]) for t in after[2:]] == [(3, 2)] * 2
    # Its user turn names the exchange too; one the conversation went on from is refused.
    assert parse_sse(regenerate(client, context_id, after[2]["id"]).text)[-1]["text"] == "two #5"
    runs = Numbered.runs
    refused = regenerate(client, context_id, shown_in_b[1]["id"])
    assert error(refused) == (409, "branch_moved") and Numbered.runs == runs
    assert error(regenerate(client, context_id, "turn-00ff00000000-a0")) == (
        404,
        "turn_not_found",
    )
    assert error(regenerate(client, context_id, "turn-1")) == (400, "invalid_request")
    # Without it: the last reply of the branch shown, as ever.
    assert parse_sse(regenerate(client, context_id).text)[-1]["text"] == "two #6"


def test_run_start_says_when_the_run_made_another_branch_the_one_shown(
    client: TestClient,
) -> None:
    def switched(response: Any) -> bool:
        assert response.status_code == 200, response.text
        start = parse_sse(response.text)[0]
        assert start["type"] == "run_start"
        return bool(start["branchSwitched"])

    context_id = conversation(client, "one", "two")
    shown_in_b = turns(client, context_id)  # tab B shows this, and stays on it
    regenerated = regenerate(client, context_id)  # tab A: "two #3", a sibling, shown
    a_reply = parse_sse(regenerated.text)[0]["turnId"]
    assert not switched(regenerated)
    # B's send goes on B's branch, shown first: its exchanges have siblings B never saw.
    sent = post_run(client, "three", context_id, after=shown_in_b[-1]["id"])
    assert switched(sent)
    b_user = parse_sse(sent.text)[0]["userTurnId"]
    # On from the branch shown: no switch, named or not.
    assert not switched(post_run(client, "four", context_id, after=None))
    shown = turns(client, context_id)[-1]["id"]
    assert not switched(post_run(client, "five", context_id, after=shown))
    # A regenerate of A's reply (not shown) shows A's branch first; of the reply shown, not.
    assert switched(regenerate(client, context_id, a_reply))
    assert not switched(regenerate(client, context_id, turns(client, context_id)[-1]["id"]))
    # An edit of a message of B's branch (not shown now) shows that branch first.
    edit = {"turnId": b_user, "message": {"text": "THREE"}}
    assert switched(client.post(url(context_id, "/edits"), json=edit, headers=ADA))
    edit = {"turnId": turns(client, context_id)[-2]["id"], "message": {"text": "3"}}
    assert not switched(client.post(url(context_id, "/edits"), json=edit, headers=ADA))
    assert texts(client, context_id) == ["one", "one #1", "two", "two #2", "3", "3 #10"]
    # A decision's run goes on where it asked.
    demo = send(client, "hello", agent="demo")[0]["contextId"]
    asked = send(client, "refund please", demo, agent="demo")
    interrupt = next(f for f in asked if f["type"] == "interrupt")["interrupt"]
    answer = {"interruptId": interrupt["interruptId"], "value": "approve"}
    assert not switched(
        client.post(url(demo, "/decisions", agent="demo"), json=answer, headers=ADA)
    )


class Holding(Numbered):
    """Numbered, but its answer to "long" ends only once the test lets it go."""

    let_go: ClassVar[asyncio.Event]

    async def run(self, run: Run, text: str) -> None:
        if text == "long":
            await type(self).let_go.wait()
        await super().run(run, text)


@contextlib.contextmanager
def holding() -> Iterator[TestClient]:
    Numbered.seen, Holding.runs = [], 0  # it counts its own runs
    Holding.let_go = asyncio.Event()
    with TestClient(app_for({"chat": Holding}, identify=by_header)) as client:
        yield client


def let_go(client: TestClient) -> None:
    assert client.portal is not None
    client.portal.call(Holding.let_go.set)


def test_a_regenerate_while_another_tabs_run_streams_is_busy_whatever_turn_it_names() -> None:
    with holding() as client:
        context_id = conversation(client, "one", "two")
        shown_in_b = turns(client, context_id)  # tab B shows this
        body = {"contextId": context_id, "message": {"text": "long"}}
        with client.stream("POST", "/agents/chat/runs", json=body, headers=ADA) as running:
            lines = running.iter_lines()
            assert "run_start" in "\n".join(iter(lambda: next(lines), ""))  # tab A's streams
            # As a send is: the hold's refusal first, whatever the turn named says.
            for turn_id in (shown_in_b[-1]["id"], shown_in_b[1]["id"], "turn-00ff00000000-a0"):
                assert error(regenerate(client, context_id, turn_id)) == (409, "context_busy")
            assert error(regenerate(client, context_id)) == (409, "context_busy")
            assert error(regenerate(client, context_id, "turn-1")) == (400, "invalid_request")
            let_go(client)
            assert '"done"' in "\n".join(lines)
        # Nothing of the refusals recorded.
        after = turns(client, context_id)
        assert [t["text"] for t in after] == ["one", "one #1", "two", "two #2", "long", "long #3"]
        assert [t["siblings"] for t in after] == [1] * 6 and Holding.runs == 3
        # Once it is over, the turn is checked as ever.
        assert error(regenerate(client, context_id, shown_in_b[-1]["id"])) == (
            409,
            "branch_moved",
        )


def test_an_edit_while_another_tabs_run_streams_is_busy_whatever_turn_it_names() -> None:
    with holding() as client:
        context_id = conversation(client, "one", "two")
        shown_in_b = turns(client, context_id)
        body = {"contextId": context_id, "message": {"text": "long"}}
        with client.stream("POST", "/agents/chat/runs", json=body, headers=ADA) as running:
            lines = running.iter_lines()
            assert "run_start" in "\n".join(iter(lambda: next(lines), ""))
            # As a send is: the hold's refusal first, whether the turn is there or not.
            for turn_id in (shown_in_b[2]["id"], "turn-00ff00000000-u0"):
                edit = {"turnId": turn_id, "message": {"text": "again"}}
                edited = client.post(url(context_id, "/edits"), json=edit, headers=ADA)
                assert error(edited) == (409, "context_busy"), turn_id
            let_go(client)
            assert '"done"' in "\n".join(lines)
        assert [t["siblings"] for t in turns(client, context_id)] == [1] * 6
        # Once it is over, the turn is checked as ever.
        edit = {"turnId": "turn-00ff00000000-u0", "message": {"text": "again"}}
        refused = client.post(url(context_id, "/edits"), json=edit, headers=ADA)
        assert error(refused) == (404, "turn_not_found")


def test_a_regenerate_of_a_turn_before_a_pending_decision_is_decision_pending(
    client: TestClient,
) -> None:
    context_id = send(client, "hello", agent="demo")[0]["contextId"]
    shown_in_b = client.get(url(context_id, agent="demo"), headers=ADA).json()["turns"]
    send(client, "refund please", context_id, agent="demo")  # tab A: the question waits
    before = client.get(url(context_id, agent="demo"), headers=ADA).json()
    for turn_id in (shown_in_b[-1]["id"], shown_in_b[0]["id"], "turn-00ff00000000-a0"):
        body = {"turnId": turn_id}
        refused = client.post(url(context_id, "/regenerate", agent="demo"), json=body, headers=ADA)
        assert error(refused) == (409, "decision_pending"), turn_id
        assert refused.json()["error"]["interruptId"] == before["pendingInterrupt"]["interruptId"]
    assert client.get(url(context_id, agent="demo"), headers=ADA).json() == before


def test_a_windowed_agent_continues_another_branch_with_that_branchs_history() -> None:
    class Windowed(Recent):  # counts its own runs, from 0
        pass

    Numbered.runs, Numbered.seen = 0, []
    app = app_for({"chat": Windowed}, identify=by_header)
    with TestClient(app) as client:
        context_id = conversation(client, *(f"m{n}" for n in range(6)))
        shown_in_b = turns(client, context_id)
        body = {"turnId": shown_in_b[2]["id"], "message": {"text": "M1"}}
        client.post(url(context_id, "/edits"), json=body, headers=ADA)
        cool(client, context_id)  # only the edited branch's window in hand after this
        send(client, "more on M1", context_id)
        response = post_run(client, "m6", context_id, after=shown_in_b[-1]["id"])
        assert parse_sse(response.text)[-1]["text"] == "m6 #9"
        seen = Numbered.seen[-1]
        assert seen[-5:] == ["m4", "m4 #5", "m5", "m5 #6", "m6"] and "M1" not in seen
        assert texts(client, context_id)[-4:] == ["m5", "m5 #6", "m6", "m6 #9"]
        assert len(turns(client, context_id)) == 14


# --- the same over a WebSocket ------------------------------------------------------------


def until_done(socket: Any) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while not frames or frames[-1]["type"] not in ("done", "rejected"):
        frames.append(json.loads(socket.receive_text()))
    return frames


def test_edit_and_regenerate_over_a_websocket(client: TestClient) -> None:
    context_id = conversation(client, "one", "two")
    user = turns(client, context_id)[2]["id"]
    with client.websocket_connect(
        "/agents/chat/ws", subprotocols=["thinwire.v1"], headers=ADA
    ) as socket:
        socket.send_text(
            json.dumps(
                {
                    "type": "edit",
                    "contextId": context_id,
                    "turnId": user,
                    "message": {"text": "TWO"},
                    "requestId": "r-edit",
                }
            )
        )
        edited = until_done(socket)
        assert edited[0]["requestId"] == "r-edit" and edited[-1]["text"] == "TWO #3"
        assert edited[0]["branchSwitched"] is False  # on the branch shown
        command = {"type": "regenerate", "contextId": context_id, "requestId": "r-again"}
        socket.send_text(json.dumps(command))
        again = until_done(socket)
        assert again[0]["requestId"] == "r-again" and again[-1]["text"] == "TWO #4"
        assert again[0]["branchSwitched"] is False
        reply = turns(client, context_id)[1]["id"]
        socket.send_text(
            json.dumps(
                {
                    "type": "edit",
                    "contextId": context_id,
                    "turnId": reply,
                    "message": {"text": "x"},
                    "requestId": "r-bad",
                }
            )
        )
        [rejected] = until_done(socket)
        assert (rejected["type"], rejected["code"], rejected["command"]) == (
            "rejected",
            "not_a_user_turn",
            "edit",
        )
        assert rejected["requestId"] == "r-bad"
    assert texts(client, context_id) == ["one", "one #1", "TWO", "TWO #4"]


def test_a_send_and_a_regenerate_name_the_turn_they_follow_over_a_websocket(
    client: TestClient,
) -> None:
    context_id = conversation(client, "one", "two")
    shown_in_b = turns(client, context_id)
    regenerate(client, context_id)  # tab A: "two #3", shown
    with client.websocket_connect(
        "/agents/chat/ws", subprotocols=["thinwire.v1"], headers=ADA
    ) as socket:
        command = {
            "type": "send",
            "contextId": context_id,
            "message": {"text": "three"},
            "afterTurnId": shown_in_b[-1]["id"],
            "requestId": "r-send",
        }
        socket.send_text(json.dumps(command))
        sent = until_done(socket)
        assert sent[0]["afterTurnId"] == shown_in_b[-1]["id"]
        assert sent[0]["branchSwitched"] is True  # B's branch, shown again
        assert Numbered.seen[-1][-3:] == ["two", "two #2", "three"]
        socket.send_text(json.dumps({**command, "requestId": "r-behind"}))
        [rejected] = until_done(socket)
        assert (rejected["code"], rejected["command"], rejected["requestId"]) == (
            "branch_moved",
            "send",
            "r-behind",
        )
        assert rejected["retryable"] is False
        regenerated = turns(client, context_id)[3]["id"]  # not shown in this tab
        client.post(
            url(context_id, "/branch"), json={"turnId": regenerated, "index": 1}, headers=ADA
        )
        command = {
            "type": "regenerate",
            "contextId": context_id,
            "turnId": sent[0]["turnId"],
            "requestId": "r-again",
        }
        socket.send_text(json.dumps(command))
        again = until_done(socket)
        assert again[0]["afterTurnId"] == shown_in_b[-1]["id"] and again[-1]["text"] == "three #5"
        assert again[0]["branchSwitched"] is True
        socket.send_text(json.dumps({**command, "turnId": shown_in_b[-1]["id"]}))
        [rejected] = until_done(socket)
        assert (rejected["code"], rejected["command"]) == ("branch_moved", "regenerate")
    assert texts(client, context_id) == ["one", "one #1", "two", "two #2", "three", "three #5"]


def rejection(socket: Any, request_id: str) -> dict[str, Any]:
    """The `rejected` frame of the command `request_id`; frames of other runs pass by."""
    while True:
        frame = json.loads(socket.receive_text())
        if frame["type"] == "rejected" and frame["requestId"] == request_id:
            return dict(frame)


def regenerations_refused(
    socket: Any, context_id: str, turn_ids: tuple[str, ...]
) -> list[dict[str, Any]]:
    """A regenerate of each turn over `socket`, and the `rejected` frame of each."""
    refused = []
    for index, turn_id in enumerate(turn_ids):
        command = {
            "type": "regenerate",
            "contextId": context_id,
            "turnId": turn_id,
            "requestId": f"r-{index}",
        }
        socket.send_text(json.dumps(command))
        refused.append(rejection(socket, f"r-{index}"))
    return refused


def test_a_regenerate_over_a_websocket_is_busy_before_its_turn_is_checked() -> None:
    with holding() as held:
        context_id = conversation(held, "one", "two")
        shown_in_b = turns(held, context_id)
        with held.websocket_connect(
            "/agents/chat/ws", subprotocols=["thinwire.v1"], headers=ADA
        ) as socket:
            long = {"type": "send", "contextId": context_id, "message": {"text": "long"}}
            socket.send_text(json.dumps({**long, "requestId": "r-long"}))
            assert json.loads(socket.receive_text())["type"] == "run_start"
            turn_ids = (shown_in_b[-1]["id"], "turn-00ff00000000-a0")
            for refused in regenerations_refused(socket, context_id, turn_ids):
                assert (refused["code"], refused["command"]) == ("context_busy", "regenerate")
            let_go(held)
            assert until_done(socket)[-1]["text"] == "long #3"
        assert [t["siblings"] for t in turns(held, context_id)] == [1] * 6


def test_a_regenerate_over_a_websocket_is_decision_pending_before_its_turn_is_checked(
    client: TestClient,
) -> None:
    demo = send(client, "hello", agent="demo")[0]["contextId"]
    shown_in_b = client.get(url(demo, agent="demo"), headers=ADA).json()["turns"]
    send(client, "refund please", demo, agent="demo")
    before = client.get(url(demo, agent="demo"), headers=ADA).json()
    with client.websocket_connect(
        "/agents/demo/ws", subprotocols=["thinwire.v1"], headers=ADA
    ) as socket:
        turn_ids = (shown_in_b[-1]["id"], "turn-00ff00000000-a0")
        for refused in regenerations_refused(socket, demo, turn_ids):
            assert (refused["code"], refused["interruptId"]) == (
                "decision_pending",
                before["pendingInterrupt"]["interruptId"],
            )
    assert client.get(url(demo, agent="demo"), headers=ADA).json() == before


# --- long conversations ----------------------------------------------------------------


class Recent(Numbered):
    """Reads only the latest messages, and says so."""

    history_window = 4


class Counting(MemoryStore):
    """Counts the exchanges each load reads."""

    loaded: ClassVar[list[int]] = []

    async def load_exchanges(self, context_id: str, positions: Any) -> Any:
        type(self).loaded.append(len(positions))
        return await super().load_exchanges(context_id, positions)


def test_an_agent_with_a_window_loads_only_the_latest_exchanges() -> None:
    Numbered.runs, Numbered.seen = 0, []
    app = app_for({"chat": Recent}, identify=by_header, store=Counting())
    with TestClient(app) as client:
        context_id = conversation(client, *(f"m{n}" for n in range(12)))
        registry = client.app.state.thinwire.contexts  # type: ignore[attr-defined]
        registry.forget_cached(server_context(client, context_id, "chat"))  # a cold send
        Counting.loaded.clear()
        send(client, "m12", context_id)
        assert Counting.loaded == [4]  # of twelve exchanges
        assert Numbered.seen[-1] == [
            "number the replies",
            "m8",
            "m8 #9",
            "m9",
            "m9 #10",
            "m10",
            "m10 #11",
            "m11",
            "m11 #12",
            "m12",
        ]
        assert len(turns(client, context_id)) == 26  # a read is the whole branch
        assert read_back_in_pages(client, context_id, 5) == turns(client, context_id)
        first = turns(client, context_id)[0]["id"]  # long out of the window
        body = {"turnId": first, "message": {"text": "M0"}}
        edited = parse_sse(client.post(url(context_id, "/edits"), json=body, headers=ADA).text)
        assert edited[-1]["text"] == "M0 #14"
        assert texts(client, context_id) == ["M0", "M0 #14"]


# --- turn ids the conversation never had --------------------------------------------------

#: Of a conversation of one exchange (`turn-000000000000-u0`, `-a0`): ids of a turn's form
#: that name no turn of it — a role or index its exchange never had, an exchange it never
#: had.
NEVER_HAD = (
    "turn-000000000000-a9",
    "turn-000000000000-u5",
    "turn-000000000001-u5",
    "turn-000000000002-a3",
)


@pytest.mark.parametrize("cold", [False, True], ids=["live", "cold"])
def test_every_route_refuses_a_turn_id_the_conversation_never_had(
    stored_client: TestClient, cold: bool
) -> None:
    client = stored_client
    context_id = conversation(client, "one")
    shown = turns(client, context_id)
    assert [t["id"] for t in shown] == ["turn-000000000000-u0", "turn-000000000000-a0"]
    runs = Numbered.runs

    def refused(response: Any) -> tuple[int, str]:
        if cold:
            cool(client, context_id)
        return error(response)

    for unknown in NEVER_HAD:
        if cold:
            cool(client, context_id)
        assert refused(post_run(client, "x", context_id, after=unknown)) == (
            404,
            "turn_not_found",
        ), unknown
        assert refused(regenerate(client, context_id, unknown)) == (404, "turn_not_found")
        assert refused(page(client, context_id, limit=1, before=unknown)) == (
            404,
            "turn_not_found",
        ), unknown
        branch = {"turnId": unknown, "index": 0}
        assert refused(client.post(url(context_id, "/branch"), json=branch, headers=ADA)) == (
            404,
            "turn_not_found",
        )
        edit = {"turnId": unknown, "message": {"text": "x"}}
        assert refused(client.post(url(context_id, "/edits"), json=edit, headers=ADA)) == (
            404,
            "turn_not_found",
        )
    with client.websocket_connect(
        "/agents/chat/ws", subprotocols=["thinwire.v1"], headers=ADA
    ) as socket:
        for unknown in NEVER_HAD:
            for command in (
                {"type": "send", "message": {"text": "x"}, "afterTurnId": unknown},
                {"type": "regenerate", "turnId": unknown},
                {"type": "edit", "turnId": unknown, "message": {"text": "x"}},
            ):
                if cold:
                    cool(client, context_id)
                socket.send_text(json.dumps({**command, "contextId": context_id}))
                [rejected] = until_done(socket)
                assert (rejected["code"], rejected["command"]) == (
                    "turn_not_found",
                    command["type"],
                ), unknown
    # Nothing recorded, no run started.
    assert Numbered.runs == runs and turns(client, context_id) == shown
    assert listed(client)["conversations"][0]["turnCount"] == 2


class Quiet(Numbered):
    """Numbers its replies, but says nothing to "hush": a reply the transcript does not
    keep."""

    async def run(self, run: Run, text: str) -> None:
        if text != "hush":
            await super().run(run, text)


def test_a_reply_that_showed_nothing_still_names_its_exchange() -> None:
    # A tab shows the reply its run announced until it reads the transcript again: its
    # next send, regenerate or page names it.
    Numbered.runs, Numbered.seen = 0, []
    with TestClient(app_for({"chat": Quiet}, identify=by_header)) as client:
        context_id = conversation(client, "one")
        quiet = send(client, "hush", context_id)
        announced, asked = quiet[0]["turnId"], quiet[0]["userTurnId"]
        assert [t["id"] for t in turns(client, context_id)][-1] == asked  # no reply kept
        sent = parse_sse(post_run(client, "two", context_id, after=announced).text)
        assert sent[0]["afterTurnId"] == asked and sent[-1]["text"] == "two #2"
        first_page = page(client, context_id, limit=1, before=announced)
        assert [t["text"] for t in first_page.json()["turns"]] == ["one", "one #1"]
        # One past the reply announced is no turn of it.
        past = announced[:-1] + str(int(announced[-1]) + 1)
        assert error(page(client, context_id, before=past)) == (404, "turn_not_found")


def test_a_turn_id_is_checked_by_reading_its_exchange_only() -> None:
    Numbered.runs, Numbered.seen = 0, []
    app = app_for({"chat": Recent}, identify=by_header, store=Counting())
    with TestClient(app) as client:
        context_id = conversation(client, *(f"m{n}" for n in range(12)))
        shown = turns(client, context_id)
        cool(client, context_id)
        Counting.loaded.clear()  # a cold read: the page, and the exchange its turn names
        assert page(client, context_id, limit=2, before=shown[10]["id"]).status_code == 200
        assert sorted(Counting.loaded) == [1, 2]
        cool(client, context_id)
        Counting.loaded.clear()  # a cold send: the agent's window, which holds its turn
        assert post_run(client, "m12", context_id, after=shown[-1]["id"]).status_code == 200
        assert Counting.loaded == [4]
