"""An OpenAI-compatible chat completions server for tests, offline: it replays scripted
chunk streams on a loopback port (a free one, or `OpenAIStub(port=…)`), so a `ChatAgent`
(or anything on the official SDK) is tested through the real client, not a mock of it.

    with OpenAIStub() as stub:
        stub.push(Stream([*reasoning("Let me see. "), *text("Hello!", pieces=3), usage(12, 3)]))
        model = OpenAIChat("stub-model", base_url=stub.url, api_key="test")
        ...
        stub.requests[0]["messages"]   # what the model was sent

Each request takes the next pushed reply: a `Stream` of chunks (optionally cut, slowed,
held open until the client goes, or ended without its finish; `error_event` is a chunk
that reports an error, as some servers send one mid-stream), a `Fail` (an HTTP error),
`Garbage` (a chunk that is not JSON, after the chunks given: with `together`, all in one
write), or a `Body` (a 200 that is no stream at all). A stream ends as a real server's
does: its last choice chunk has a `finish_reason` (added where the chunks give none), a
usage chunk may follow, then `[DONE]`. `closed_early` counts streams the client closed
before their end.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from thinwire.testing.server import free_port

__all__ = [
    "Body",
    "Fail",
    "Garbage",
    "OpenAIStub",
    "Stream",
    "error_event",
    "finish",
    "reasoning",
    "text",
    "tool_calls",
    "usage",
]


@dataclass
class Stream:
    chunks: list[dict[str, Any]]
    #: Seconds between chunks.
    delay: float = 0.0
    #: Drop the connection after this many chunks (no [DONE]).
    cut_after: int | None = None
    #: After the chunks, keep the stream open until the client closes it.
    hold: bool = False
    #: End the body after the chunks, cleanly but with no `finish_reason` added and no
    #: [DONE]: a stream a proxy cut off (at its timeout, say) as if it were whole.
    unfinished: bool = False


@dataclass
class Fail:
    status: int
    message: str = "upstream says no: secret-upstream-detail"


@dataclass
class Garbage:
    """Some chunks, then a line that is not JSON."""

    chunks: list[dict[str, Any]] = field(default_factory=list)
    #: Write the chunks and the bad line at once, so the client reads them in one piece
    #: (written one by one, they may arrive together or not).
    together: bool = False


@dataclass
class Body:
    """A 200 whose body is no stream: a proxy's JSON error, the HTML page of a wrong
    base_url, a whole completion not streamed."""

    #: Sent as it is when a str, else as JSON.
    content: Any
    content_type: str = "application/json"


Reply = Stream | Fail | Garbage | Body


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "stub-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def split(value: str, pieces: int) -> list[str]:
    size = max(1, -(-len(value) // max(1, pieces)))
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


def text(value: str, pieces: int = 1) -> list[dict[str, Any]]:
    """Content deltas of `value`, in `pieces` chunks."""
    return [chunk({"content": piece}) for piece in split(value, pieces)]


def reasoning(
    value: str, pieces: int = 1, field_name: str = "reasoning_content"
) -> list[dict[str, Any]]:
    """Reasoning deltas, as `reasoning_content` (vLLM, DeepSeek) or `reasoning` (Ollama)."""
    return [chunk({field_name: piece}) for piece in split(value, pieces)]


def tool_calls(
    calls: Iterable[tuple[str, str, dict[str, Any] | str]], pieces: int = 3
) -> list[dict[str, Any]]:
    """`(id, name, arguments)` calls, each call's arguments split over `pieces` chunks,
    the calls interleaved as parallel calls arrive."""
    chunks = []
    parts = []
    for index, (call_id, name, arguments) in enumerate(calls):
        body = arguments if isinstance(arguments, str) else json.dumps(arguments)
        pieces_of = split(body, pieces)
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": pieces_of[0]},
        }
        parts.append(
            [first] + [{"index": index, "function": {"arguments": p}} for p in pieces_of[1:]]
        )
    for round_ in range(max((len(p) for p in parts), default=0)):
        for calls_parts in parts:
            if round_ < len(calls_parts):
                chunks.append(chunk({"tool_calls": [calls_parts[round_]]}))
    return chunks


def finish(reason: str = "stop") -> dict[str, Any]:
    return chunk({}, finish_reason=reason)


def error_event(
    message: str = "upstream says no: secret-upstream-detail",
    *,
    type: str | None = None,
    code: int | str | None = None,
) -> dict[str, Any]:
    """An error reported inside the stream, with HTTP 200 sent already, as vLLM, LiteLLM or
    OpenRouter report one (an overloaded model, say): `{"error": {message, type, code}}`."""
    return {"error": {"message": message, "type": type, "code": code}}


def finished(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chunks as a server ends a whole answer: where no choice has a `finish_reason`,
    a chunk with one ("tool_calls" after tool calls, else "stop") after the last choice
    chunk, before the usage chunks that follow it."""
    choices = [choice for item in chunks for choice in item.get("choices") or ()]
    if any(choice.get("finish_reason") for choice in choices):
        return chunks
    calls = any((choice.get("delta") or {}).get("tool_calls") for choice in choices)
    end = len(chunks)
    while end and chunks[end - 1].get("choices") == []:
        end -= 1
    return [*chunks[:end], finish("tool_calls" if calls else "stop"), *chunks[end:]]


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "stub-model",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class StreamReply:
    """Streams a reply's chunks as SSE; notes when the client leaves before the end."""

    def __init__(self, stub: OpenAIStub, reply: Stream | Garbage) -> None:
        self.stub = stub
        self.reply = reply

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        reply = self.reply
        chunks = reply.chunks
        if isinstance(reply, Stream) and not (reply.hold or reply.unfinished):
            chunks = finished(chunks)
        if isinstance(reply, Stream) and reply.cut_after is not None:
            chunks = chunks[: reply.cut_after]
        bodies = [f"data: {json.dumps(item)}\n\n".encode() for item in chunks]
        if isinstance(reply, Garbage):
            bodies.append(b"data: {not json\n\n")
            if reply.together:
                bodies = [b"".join(bodies)]
        for body in bodies:
            if isinstance(reply, Stream) and reply.delay:
                await asyncio.sleep(reply.delay)
            await send({"type": "http.response.body", "body": body, "more_body": True})
        if isinstance(reply, Stream) and reply.cut_after is not None:
            return  # without finishing the body: the connection drops
        if isinstance(reply, Stream) and reply.hold:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.stub.closed_early += 1
            return
        if isinstance(reply, Stream) and reply.unfinished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


def refusal(messages: list[dict[str, Any]]) -> str | None:
    """Why the chat API would refuse these messages, if it would."""
    unanswered = unanswered_calls(messages)
    if unanswered:
        return f"tool_call_ids did not have response messages: {', '.join(unanswered)}"
    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and not (
            message.get("content") or message.get("tool_calls")
        ):
            return f"messages[{index}]: an assistant message needs content or tool_calls"
    return None


def unanswered_calls(messages: list[dict[str, Any]]) -> list[str]:
    """The ids of tool calls not answered by the tool messages right after their assistant
    message, as the chat API requires."""
    unanswered: list[str] = []
    pending: list[str] = []
    for message in messages:
        if message.get("role") == "tool":
            if message.get("tool_call_id") in pending:
                pending.remove(message["tool_call_id"])
            continue
        unanswered += pending
        pending = [call["id"] for call in message.get("tool_calls") or []]
    return unanswered + pending


class OpenAIStub:
    """The stub, listening on 127.0.0.1:`port` — a free port unless given: a fixed one is
    where a model address set beforehand points (a server's `OPENAI_BASE_URL`), or the
    port of a stub stopped, to start it again."""

    def __init__(self, port: int | None = None) -> None:
        self.replies: deque[Reply] = deque()
        #: Every request's JSON body, in order.
        self.requests: list[dict[str, Any]] = []
        #: Streams the client closed before their end (a stopped run).
        self.closed_early = 0
        self.port = port or free_port()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL, as `base_url` of the SDK takes it."""
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def _completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        refused = refusal(body.get("messages", []))
        if refused:  # as OpenAI refuses it: a conversation no later send can mend
            return JSONResponse({"error": {"message": refused, "type": "invalid_request"}}, 400)
        if not self.replies:
            return JSONResponse({"error": {"message": "the stub has no reply left"}}, 500)
        reply = self.replies.popleft()
        if isinstance(reply, Fail):
            error = {"error": {"message": reply.message, "type": "stub", "code": reply.status}}
            return JSONResponse(error, reply.status)
        if isinstance(reply, Body):
            content = reply.content if isinstance(reply.content, str) else json.dumps(reply.content)
            return Response(content, media_type=reply.content_type)
        return StreamReply(self, reply)  # type: ignore[return-value]

    def __enter__(self) -> OpenAIStub:
        app = Starlette(routes=[Route("/v1/chat/completions", self._completions, methods=["POST"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        # Bound here, so a port in use is this call's error, not the server thread's.
        listening = socket.socket()
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listening.bind(("127.0.0.1", self.port))
        except OSError as exc:
            listening.close()
            raise RuntimeError(
                f"the OpenAI stub could not listen on port {self.port}: {exc.strerror}"
            ) from exc
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [listening]}, daemon=True
        )
        self._thread.start()
        for _ in range(500):
            if self._server.started:
                return self
            threading.Event().wait(0.01)
        raise RuntimeError("the OpenAI stub did not start")

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(10)
