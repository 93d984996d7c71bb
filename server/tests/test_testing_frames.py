"""`thinwire.testing.frames_of`: a run's stream read as a client reads it, each frame
checked against the wire schema."""

from __future__ import annotations

import json

import httpx2 as httpx
import pytest
from starlette.testclient import TestClient

from conftest import app_for
from thinwire import Agent, Run
from thinwire.testing import FrameError, frames_of

TOKEN = {"contextId": "ctx-1", "runId": "run-1", "seq": 3, "type": "token", "delta": "hi"}


class Echo(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.think("Repeating. ")
        await run.say(text)


def event(frame: dict[str, object], seq: int = 1) -> str:
    return f"id: {seq}\ndata: {json.dumps(frame)}\n\n"


def test_reads_a_runs_frames_in_order_from_the_response() -> None:
    with TestClient(app_for({"demo": Echo})) as client:
        response = client.post("/agents/demo/runs", json={"message": {"text": "ping"}})
    frames = frames_of(response)
    assert [f["type"] for f in frames] == ["run_start", "thinking", "token", "done"]
    assert [f["seq"] for f in frames] == [1, 2, 3, 4]
    assert frames[-1]["text"] == "ping"
    assert frames_of(response.text) == frames == frames_of(response.content)


def test_leaves_out_heartbeats_and_reads_crlf_and_split_data() -> None:
    body = ": heartbeat\n\n" + event(TOKEN).replace("\n", "\r\n") + ": heartbeat\n\n"
    assert frames_of(body) == [TOKEN]
    split = json.dumps(TOKEN, indent=1)  # a data field over several lines
    body = "id: 3\n" + "".join(f"data: {line}\n" for line in split.split("\n")) + "\n"
    assert frames_of(body) == [TOKEN]


@pytest.mark.parametrize(
    ("frame", "complaint"),
    [
        ({**TOKEN, "arguments": {"card": "4242"}}, "arguments"),  # a field the wire has not
        ({**TOKEN, "type": "secret"}, "secret"),  # a type the wire has not
        ({key: value for key, value in TOKEN.items() if key != "delta"}, "delta"),
        ({**TOKEN, "seq": "4"}, "seq"),  # a number, not a string that reads as one
        ({**TOKEN, "seq": 4.0}, "seq"),
        ({**TOKEN, "seq": True}, "seq"),
    ],
)
def test_a_frame_the_schema_does_not_allow_fails(frame: dict[str, object], complaint: str) -> None:
    with pytest.raises(FrameError, match=complaint):
        frames_of(event(TOKEN) + event(frame, 4))


def test_an_event_that_is_not_json_fails() -> None:
    with pytest.raises(FrameError, match=r"not a thinwire frame: \{nope"):
        frames_of("id: 1\ndata: {nope\n\n")


def test_a_response_that_is_not_a_stream_fails_with_its_status_and_body() -> None:
    with TestClient(app_for({"demo": Echo})) as client:
        blank = client.post("/agents/demo/runs", json={"message": {"text": " "}})
        context_id = frames_of(client.post("/agents/demo/runs", json={"message": {"text": "hi"}}))[
            0
        ]["contextId"]
        transcript = client.get(f"/agents/demo/contexts/{context_id}")
    assert blank.status_code == 400
    with pytest.raises(FrameError, match=r"the response is 400: .*must not be blank"):
        frames_of(blank)
    with pytest.raises(FrameError, match=r"the body is JSON: .*invalid_request"):
        frames_of(blank.text)  # its text alone says as much
    with pytest.raises(FrameError, match=r"the response is application/json: .*turns"):
        frames_of(transcript)  # a 200, but not a stream


def test_a_stream_of_only_heartbeats_is_no_frames() -> None:
    assert frames_of(": heartbeat\n\n") == [] == frames_of("")


RUN = {"message": {"text": "ping"}}


def test_reads_a_streamed_response_to_its_end() -> None:
    with TestClient(app_for({"demo": Echo})) as client:
        with client.stream("POST", "/agents/demo/runs", json=RUN) as response:
            frames = frames_of(response)
        with client.stream("POST", "/agents/demo/runs", json=RUN) as begun:
            next(begun.iter_lines())  # read in part: frames_of cannot have the rest
            with pytest.raises(FrameError, match=r"cannot read \(.*\): read it first"):
                frames_of(begun)
    assert [f["type"] for f in frames] == ["run_start", "thinking", "token", "done"]


@pytest.mark.anyio
async def test_an_async_streamed_response_is_read_first_with_aread() -> None:
    app = app_for({"demo": Echo})
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
        client.stream("POST", "/agents/demo/runs", json=RUN) as response,
    ):
        with pytest.raises(FrameError, match=r"await response\.aread\(\)"):
            frames_of(response)
        await response.aread()
        assert [f["type"] for f in frames_of(response)][-1] == "done"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
