from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from conftest import app_for, assert_no_canary, parse_sse, send, server_context
from thinwire import Agent, MemoryStore
from thinwire.demo import CANARIES, CANARY_PLACES, create_demo_app, read_canaries
from thinwire.testing.openai_stub import OpenAIStub, Stream, text, tool_calls


def test_first_frame_announces_a_minted_context_and_run(client: TestClient) -> None:
    frames = send(client, "hello there")
    first = frames[0]
    assert first["type"] == "run_start"
    assert re.fullmatch(r"ctx-[0-9a-f]{36}", first["contextId"])
    assert re.fullmatch(r"run-[0-9a-f]{24}", first["runId"])
    assert first["agent"] == "demo"


def test_every_frame_is_addressed_and_numbered(client: TestClient) -> None:
    frames = send(client, "hello there")
    assert {f["contextId"] for f in frames} == {frames[0]["contextId"]}
    assert {f["runId"] for f in frames} == {frames[0]["runId"]}
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert [f["_id"] for f in frames] == [str(f["seq"]) for f in frames]


def test_run_streams_thinking_tool_and_tokens_then_done(client: TestClient) -> None:
    frames = send(client, "count these four words")
    kinds = [f["type"] for f in frames]
    assert kinds[0] == "run_start" and kinds[-1] == "done"
    assert kinds.index("thinking") < kinds.index("tool_call") < kinds.index("tool_result")
    assert kinds.index("tool_result") < kinds.index("token")
    done = frames[-1]
    tokens = "".join(f["delta"] for f in frames if f["type"] == "token")
    assert done["text"] == tokens
    assert "4 words" in done["text"]
    assert done["toolCalls"] == ["count_words"]
    assert done["stopReason"] == "end"
    call = next(f for f in frames if f["type"] == "tool_call")
    result = next(f for f in frames if f["type"] == "tool_result")
    assert call["callId"] == result["callId"] and result["ok"] is True


def test_tool_frames_carry_no_arguments_or_output(client: TestClient) -> None:
    frames = send(client, "private words")
    for frame in frames:
        if frame["type"] in ("tool_call", "tool_result"):
            assert set(frame) <= {
                "type",
                "contextId",
                "runId",
                "seq",
                "_id",
                "callId",
                "name",
                "ok",
            }


def test_seq_keeps_growing_across_runs_of_one_context(client: TestClient) -> None:
    first = send(client, "one")
    second = send(client, "two", first[0]["contextId"])
    assert second[0]["seq"] == first[-1]["seq"] + 1
    assert second[0]["runId"] != first[0]["runId"]


def test_agent_remembers_the_conversation_on_the_server(client: TestClient) -> None:
    first = send(client, "my name is Ada")
    context_id = first[0]["contextId"]
    assert "start of our conversation" in first[-1]["text"]
    second = send(client, "what did I say?", context_id)
    assert second[0]["contextId"] == context_id
    assert "Earlier you told me “my name is Ada”" in second[-1]["text"]


def test_separate_conversations_do_not_share_memory(client: TestClient) -> None:
    send(client, "secret plan A")
    other = send(client, "hello")
    assert "start of our conversation" in other[-1]["text"]


def test_transcript_is_the_public_projection(client: TestClient) -> None:
    first = send(client, "first message")
    context_id = first[0]["contextId"]
    send(client, "second message", context_id)
    response = client.get(f"/agents/demo/contexts/{context_id}")
    assert response.status_code == 200
    body = response.json()
    assert body["contextId"] == context_id and body["agent"] == "demo"
    turns = body["turns"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    user, reply = turns[0], turns[1]
    assert {k: user[k] for k in ("role", "text", "toolCalls", "stopReason")} == {
        "role": "user",
        "text": "first message",
        "toolCalls": [],
        "stopReason": None,
    }
    assert reply["stopReason"] == "end"
    assert reply["text"] == first[-1]["text"]
    assert reply["toolCalls"] == ["count_words"]
    # What the reply showed while it streamed is kept: its thinking, its tools by name.
    thought = "".join(f["delta"] for f in first if f["type"] == "thinking")
    assert thought and reply["thinking"] == thought
    assert reply["activity"] == [{"callId": "call-1", "name": "count_words", "ok": True}]
    # Stable ids, named in the run's first frame; times, no model or tokens unless public.
    assert (first[0]["userTurnId"], first[0]["turnId"]) == (user["id"], reply["id"])
    assert len({t["id"] for t in turns}) == 4
    assert reply["meta"]["startedAt"] <= reply["meta"]["finishedAt"]
    assert reply["meta"]["model"] is None and reply["meta"]["usage"] is None
    assert {t["siblings"] for t in turns} == {1}
    assert set(body) == {
        "contextId",
        "agent",
        "title",
        "turns",
        "activeRunId",
        "pendingInterrupt",
        "hasEarlier",
    }
    assert body["title"] == "first message" and body["activeRunId"] is None


def test_server_keeps_canaries_but_never_sends_them(client: TestClient) -> None:
    first = send(client, "hi")
    context_id = first[0]["contextId"]
    context = server_context(client, context_id)
    # The canaries really are in the server-only places...
    assert CANARIES["state"] in context.state.values()
    assert CANARIES["system_prompt"] in context.history[0]["content"]
    assert any(CANARIES["tool_output"] in str(m.get("output")) for m in context.history)
    # ...and in nothing a client receives.
    run = client.post("/agents/demo/runs", json={"contextId": context_id, "message": {"text": "x"}})
    assert_no_canary(run.text + str(run.headers))
    transcript = client.get(f"/agents/demo/contexts/{context_id}")
    assert_no_canary(transcript.text + str(transcript.headers))


@pytest.mark.parametrize("model", [None, "stub-model"])
def test_the_documented_variables_choose_the_demos_canaries(
    model: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/server.md names …_PROMPT, …_STATE and …_TOOL; read when the app is built.
    chosen = {
        "PROMPT": "tw-chosen-prompt-1a",
        "STATE": "tw-chosen-state-2b",
        "TOOL": "tw-chosen-tool-3c",
    }
    for name, value in chosen.items():
        monkeypatch.setenv(f"THINWIRE_DEMO_CANARY_{name}", value)
    for name in ("OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)  # else the demo answers with a model
    with OpenAIStub() as stub:
        if model:
            monkeypatch.setenv("OPENAI_BASE_URL", stub.url)
            monkeypatch.setenv("OPENAI_API_KEY", "test")
        stub.push(
            Stream(tool_calls([("c1", "count_words", {"text": "hi there"})])), Stream(text("Two."))
        )
        app = create_demo_app(delay=0, store=MemoryStore(), data_dir=tmp_path, model=model)
        with TestClient(app) as client:
            frames = send(client, "count the words of hi there")
            context = server_context(client, frames[0]["contextId"])
    assert chosen["PROMPT"] in context.history[0]["content"]
    assert chosen["STATE"] in context.state.values()
    [counted] = [m for m in context.history if m["role"] == "tool"]
    assert chosen["TOOL"] in str(counted["output"])
    assert not any(value in str(frames) for value in chosen.values())
    if model:  # the model was told the chosen prompt, and read the chosen tool output
        assert chosen["PROMPT"] in stub.requests[0]["messages"][0]["content"]
        assert chosen["TOOL"] in stub.requests[1]["messages"][-1]["content"]


def test_each_place_has_a_variable_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THINWIRE_DEMO_CANARY_TOOL", "tw-short-name")
    monkeypatch.setenv("THINWIRE_DEMO_CANARY_TOOL_OUTPUT", "tw-place-name")
    monkeypatch.setenv("THINWIRE_DEMO_CANARY_LOG", "tw-log-line")
    canaries = read_canaries()
    assert canaries["tool_output"] == "tw-place-name" and canaries["log"] == "tw-log-line"
    assert set(canaries) == set(CANARY_PLACES)


def test_sse_response_is_not_cached_buffered_or_compressed(client: TestClient) -> None:
    response = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
    # no-transform: a proxy that compresses (Next.js's rewrites, say) would hold the
    # stream until it ends.
    assert response.headers["cache-control"] == "no-store, no-transform"
    assert response.headers["x-accel-buffering"] == "no"
    assert response.headers["thinwire-protocol"] == "1"


def test_a_stream_announces_its_heartbeat_interval(client: TestClient) -> None:
    """A client takes a stream silent past the interval (with a margin) as broken: a
    proxy may keep the connection of a server that died open."""
    frames = send(client, "hi")
    response = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
    assert response.headers["thinwire-heartbeat"] == "15"
    context_id = frames[0]["contextId"]
    replay = client.get(f"/agents/demo/contexts/{context_id}/events", params={"after": 0})
    assert replay.status_code == 200 and replay.headers["thinwire-heartbeat"] == "15"


@pytest.mark.parametrize(("interval", "announced"), [(2.5, "2.5"), (None, "0")])
def test_the_heartbeat_announced_is_the_servers(interval: float | None, announced: str) -> None:
    app = app_for({"demo": Agent}, heartbeat_interval=interval)
    with TestClient(app) as client:
        response = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
    assert response.status_code == 200
    assert response.headers["thinwire-heartbeat"] == announced  # 0: none, nothing to watch for


def test_every_answer_names_the_protocol_version(client: TestClient) -> None:
    for path in ("/healthz", "/readyz", "/openapi.json", "/agents/demo/contexts"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.headers["thinwire-protocol"] == "1", path


def test_demo_refund_asks_before_the_side_effect(client: TestClient, tmp_path: Path) -> None:
    frames = send(client, "I want a refund")
    request = frames[-2]["interrupt"]
    assert request["prompt"] == "Refund $40 on order 1234?"
    assert request["payload"] == {"order": "1234", "amount": "$40"}
    assert_no_canary(str(frames))
    ledger = tmp_path / "ledger.log"
    assert ledger.read_text().splitlines() == ["lookup_order 1234"]
    resumed = client.post(
        f"/agents/demo/contexts/{frames[0]['contextId']}/decisions",
        json={"interruptId": request["interruptId"], "value": "approve"},
    )
    assert parse_sse(resumed.text)[-1]["text"] == "Done — $40 is on its way back for order 1234."
    assert ledger.read_text().splitlines() == ["lookup_order 1234", "issue_refund 1234 40"]
