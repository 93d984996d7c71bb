"""OpenAIChat: any OpenAI-compatible chat completions API (OpenAI, vLLM, llama.cpp's
server, Ollama, a LiteLLM proxy…), streamed through the official `openai` SDK.

    model = OpenAIChat("gpt-4.1-mini")                        # OPENAI_API_KEY, OPENAI_BASE_URL
    model = OpenAIChat("qwen3", base_url="http://127.0.0.1:8080/v1", api_key="none")

Content deltas become the reply, reasoning deltas (`reasoning_content` or `reasoning`,
as such servers send them) the thinking; tool call deltas split across chunks are put
back together. The stream's bytes are parsed here, as server-sent events of plain JSON,
rather than as the SDK's chunk objects, which cost ten times what thinwire spends on the
token itself. An answer is whole once a choice gives its `finish_reason`: a response
that ends before (a stream cut cleanly, a body that is no stream) is a failure, and its
tool calls never run. A failure before the first delta is tried again (`retries`, with
backoff); after it, the run fails. Every failure leaves as `ModelError`: a few words of
ours for the client, retryable where a retry could help; what the server said goes to
the log. A stopped run closes the HTTP request: the server sees the connection go.

The SDK's aiohttp client is used where it is installed (`thinwire[openai]` brings it):
a stream is an HTTP chunk per token, and httpx, the SDK's default, reads each in pure
Python at about three times aiohttp's cost (46 against 28 µs of server CPU per token in
`make bench`). An `http_client` of the user's own (`OpenAIChat(…, http_client=…)`) is
used as given.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, NoReturn

from pydantic_core import from_json

from thinwire.errors import ModelError
from thinwire.models.base import Emitter, ModelTurn, ToolCall

__all__ = ["OpenAIChat"]

logger = logging.getLogger("thinwire.models")

#: Where the SDK sends requests when neither `base_url` nor $OPENAI_BASE_URL names another.
OPENAI_ENDPOINT = "https://api.openai.com/v1"
#: Where the SDK finds credentials: these options, else these environment variables.
CREDENTIAL_OPTIONS = ("api_key", "admin_api_key", "workload_identity", "provider")
CREDENTIAL_VARIABLES = ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY")

#: Seconds the model's server may stay silent, before its first chunk and between two,
#: before the call fails "(timed out)" (the SDK's own 600 would hold a chat at
#: "streaming" for half an hour, with the retries). Two minutes, as a reasoning model
#: that hides its reasoning (OpenAI's o-series) sends nothing until it answers, often for
#: a minute or more. Connecting keeps the SDK's 5 s.
READ_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 5.0


def require_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ImportError(
            'OpenAIChat needs the openai SDK: pip install "thinwire[openai]"'
        ) from exc
    return openai


class OpenAIChat:
    """A model behind the chat completions API. `client_options` go to `AsyncOpenAI`
    (base_url, api_key, timeout…; unset ones are read from the environment as the SDK
    reads them, but for the timeout: `READ_TIMEOUT_S`); `parameters` go with every
    request (temperature, max_tokens…)."""

    def __init__(
        self,
        name: str,
        *,
        retries: int = 2,
        backoff: float = 0.5,
        parameters: dict[str, Any] | None = None,
        **client_options: Any,
    ) -> None:
        self.name = name
        self.retries = retries
        self.backoff = backoff
        self.parameters = parameters or {}
        self.client_options = client_options
        self._client: Any = None
        #: Its missing key was logged (`check_key`): once is enough.
        self._key_checked = False

    @property
    def client(self) -> Any:
        if self._client is None:
            openai = require_openai()
            timeout = http_library(openai).Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
            options = {"max_retries": 0, "timeout": timeout, **self.client_options}
            if "http_client" not in options and (http_client := aiohttp_client(openai)):
                options["http_client"] = http_client
            self._client = openai.AsyncOpenAI(**options)
        return self._client

    @property
    def endpoint(self) -> str:
        """Where its requests go: `base_url`, else $OPENAI_BASE_URL, else OpenAI's."""
        given = self.client_options.get("base_url") or os.environ.get("OPENAI_BASE_URL")
        return str(given or OPENAI_ENDPOINT)

    def finds_key(self) -> bool:
        """Whether the SDK will find credentials, given or in its environment variables:
        without, it makes no request at all."""
        options = self.client_options
        return any(options.get(name) for name in CREDENTIAL_OPTIONS) or any(
            os.environ.get(name) for name in CREDENTIAL_VARIABLES
        )

    def check_key(self, agent: str) -> None:
        """Warn, once, when the SDK would find no key: every message of `agent` would
        fail. Not refused, as an error would be: the app may be made before the key is
        set (a test's, say)."""
        if self.finds_key() or self._key_checked:
            return
        self._key_checked = True
        logger.warning(
            "%s answers with the model %s at %s, but no API key is set: every message will "
            "fail (set $OPENAI_API_KEY, or api_key=; a local server that takes any key: "
            "OPENAI_API_KEY=none)",
            agent,
            self.name,
            self.endpoint,
        )

    async def aclose(self) -> None:
        """Close the client (its connections); the next call makes a new one."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], emit: Emitter
    ) -> ModelTurn:
        attempt = 0
        while True:
            turn = Assembly()
            try:
                await self._stream(messages, tools, emit, turn)
                return turn.result()
            except ModelError as exc:
                if turn.started or not exc.retryable or attempt >= self.retries:
                    raise
                logger.info("model %s: %s, trying again", self.name, exc.reason)
                await asyncio.sleep(self.backoff * 2**attempt)
                attempt += 1

    async def _stream(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        emit: Emitter,
        turn: Assembly,
    ) -> None:
        openai = require_openai()
        timeout_error, transport_error = http_errors(openai)
        # The body goes as `extra_body`, JSON as it is: given as parameters, the SDK walks
        # every message against its types (~2 ms a call for six messages, more with the
        # history), and chat messages and tools as JSON have nothing for it to change.
        body: dict[str, Any] = {
            "messages": list(messages),
            "stream_options": {"include_usage": True},
            **self.parameters,
        }
        if tools:
            body["tools"] = list(tools)
        try:
            client = self.client
        except openai.OpenAIError as exc:  # the SDK's "Missing credentials"
            if self.finds_key():
                raise
            raise ModelError("has no API key", retryable=False) from exc
        answering = False  # the model's server has begun its answer
        try:
            create = client.chat.completions.with_streaming_response.create
            # Leaving the block closes the response, also when the run is stopped: the
            # model's server sees the request end.
            async with create(
                model=self.name, messages=[], stream=True, extra_body=body
            ) as response:
                answering = True
                reader = EventReader()
                async for chunk in body_of(response.http_response):
                    for event in reader.feed(chunk):
                        await turn.add(event, emit)
                    if reader.done:
                        break
                if turn.finish_reason is None:
                    unfinished(reader, response.http_response.headers.get("content-type", ""))
        except openai.APIStatusError as exc:
            raise status_error(exc.status_code) from exc
        except (openai.APITimeoutError, timeout_error) as exc:
            # The SDK's aiohttp client reports a refused connection as a timeout.
            reason = "unreachable" if refused(exc) else "timed out"
            raise ModelError(reason, retryable=True) from exc
        except (openai.APIConnectionError, transport_error) as exc:
            reason = "its stream broke off" if answering else "unreachable"
            raise ModelError(reason, retryable=True) from exc
        except StreamError as exc:
            raise stream_error(exc.error) from exc
        except BrokenOff as exc:
            raise ModelError("its stream broke off", retryable=True) from exc
        except (openai.APIError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError("sent a malformed answer", retryable=False) from exc


#: Seconds a pooled connection to the model's server may sit idle before it is dropped:
#: under the 5 s after which many servers (uvicorn's default) close one, so a request
#: never goes out on a connection the server is closing. httpx checks a connection before
#: reusing it; aiohttp does not, and its request would fail before the model answered.
KEEPALIVE_S = 4.0


def aiohttp_client(openai: Any) -> Any | None:
    """The SDK's aiohttp client (openai 1.89 and later, with its `aiohttp` extra), or None
    where it is not installed."""
    factory = getattr(openai, "DefaultAioHttpClient", None)
    if factory is None:
        return None
    default = openai.DEFAULT_CONNECTION_LIMITS
    limits = http_library(openai).Limits(
        max_connections=default.max_connections,
        max_keepalive_connections=default.max_keepalive_connections,
        keepalive_expiry=KEEPALIVE_S,
    )
    try:
        return factory(limits=limits)
    except RuntimeError:  # the SDK says its aiohttp extra is missing
        return None


def body_of(response: Any) -> AsyncIterator[bytes]:
    """The response's body as it comes: undecoded when it is sent as it is (a model's
    stream, nearly always), which spares the HTTP library a layer per chunk."""
    if response.headers.get("content-encoding", "identity") == "identity":
        return response.aiter_raw()  # type: ignore[no-any-return]
    return response.aiter_bytes()  # type: ignore[no-any-return]


def http_library(openai: Any) -> Any:
    """The HTTP library the SDK is built on: httpx, or httpx2 in later SDKs."""
    client_class = openai.DefaultAsyncHttpxClient.__mro__[1]
    return sys.modules[client_class.__module__.partition(".")[0]]


def http_errors(openai: Any) -> tuple[type[Exception], type[Exception]]:
    """(timeout, transport) errors of the SDK's HTTP library: read past the SDK's chunk
    objects, a stream raises them as they are."""
    http = http_library(openai)
    return http.TimeoutException, http.TransportError


#: The most of a body that is no stream kept to read it (a whole completion, an error),
#: and of that, the most the log shows.
HEAD_BYTES = 64 * 1024
LOGGED_BYTES = 2000


class EventReader:
    """The JSON of each server-sent event in a response's bytes, fed as they come (cut
    anywhere), until `[DONE]`: a data field may span lines, and lines may end in LF, CRLF
    or CR. An event that reports an error raises it (`StreamError`). One pass over the
    bytes, without the HTTP library's text and line iterators: a model's stream is a
    chunk per token."""

    def __init__(self) -> None:
        self.pending = b""
        self.data: list[bytes] = []
        self.after_cr = False
        #: `[DONE]` was read: what comes after it is not read.
        self.done = False
        #: Events read.
        self.events = 0
        #: The body's first bytes, while they hold no event: what a server sent in place
        #: of a stream, for the log.
        self.head = b""

    def feed(self, chunk: bytes) -> Iterator[dict[str, Any]]:
        """The events this chunk completes, read as they are taken: a read may hold
        several, and those before a malformed one are the model's answer all the same —
        they reach the user before it raises."""
        if not chunk or self.done:
            return
        if not self.events and len(self.head) < HEAD_BYTES:
            self.head += chunk
        if self.after_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]  # the LF of a CRLF cut between two chunks
        self.after_cr = chunk[-1:] == b"\r"
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = (self.pending + chunk).split(b"\n")
        self.pending = lines.pop()
        data = self.data
        for line in lines:
            if line.startswith(b"data:"):
                data.append(line[6:] if line.startswith(b"data: ") else line[5:])
                continue
            if line or not data:
                continue  # a comment, another field, or a blank line between events
            text = b"\n".join(data)
            data.clear()
            if text == b"[DONE]":
                self.done = True
                break
            event = from_json(text)  # pydantic-core's parser: half json's time
            if not isinstance(event, dict):
                raise ValueError("an event that is not a JSON object")
            if event.get("error") is not None:
                raise StreamError(event["error"])
            self.events += 1
            yield event


def unfinished(reader: EventReader, content_type: str) -> NoReturn:
    """Raise why a response that ended with no choice's `finish_reason` is no answer: an
    error sent in place of a stream (`StreamError`: a proxy's JSON body), something else
    that is no stream (a wrong base_url's HTML page, a completion not streamed), or a
    stream cut off (`BrokenOff`), if cleanly: a proxy's timeout, say."""
    if not reader.events:
        try:
            body = from_json(reader.head)
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("error") is not None:
            raise StreamError(body["error"])
        if "text/event-stream" not in content_type:
            sent = reader.head[:LOGGED_BYTES]
            raise ValueError(f"a body of {content_type or 'no type'}, not a stream: {sent!r}")
    raise BrokenOff(f"the stream ended after {reader.events} events, none with a finish_reason")


class BrokenOff(Exception):
    """A stream that ended before the model finished its answer."""


class StreamError(Exception):
    """An error event in the stream (`data: {"error": {...}}`), as vLLM, LiteLLM or
    OpenRouter send one when the model fails mid-answer (overloaded, say)."""

    def __init__(self, error: Any) -> None:
        super().__init__(f"the stream reported an error: {error!r}")
        self.error = error


def refused(exc: BaseException) -> bool:
    """Whether a connection refused or reset is behind `exc`."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionError):
            return True
        cause = cause.__cause__
    return False


def status_error(status: int) -> ModelError:
    if status in (401, 403):
        return ModelError("refused the credentials", retryable=False)
    if status == 429:
        return ModelError("rate limited", retryable=True)
    if status >= 500:
        return ModelError(f"server error {status}", retryable=True)
    return ModelError(f"refused the request ({status})", retryable=False)


#: Words of an error event's code, type or message (lowercase, letters only) that say
#: trying again could help, and what we call each.
PASSING = (
    (("ratelimit", "toomanyrequests"), "rate limited"),
    (("overloaded",), "overloaded"),
    (("servererror", "unavailable"), "server error"),
)


def stream_error(error: Any) -> ModelError:
    """An error event, mapped as an HTTP error is: by its code where that is a status
    (429, 503…), else by what its code, type or message says; none of its text is ours
    to show."""
    if not isinstance(error, dict):
        error = {"message": error}
    code = error.get("code")
    if str(code).isdigit() and 400 <= int(code) < 600:
        return status_error(int(code))
    said = "".join(
        c
        for c in " ".join(str(error.get(key, "")) for key in ("code", "type", "message")).lower()
        if c.isalpha()
    )
    for words, reason in PASSING:
        if any(word in said for word in words):
            return ModelError(reason, retryable=True)
    return ModelError("reported an error", retryable=False)


class Assembly:
    """One streamed turn, put together chunk by chunk."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, int] | None = None
        #: A delta reached the user: trying again would show it twice.
        self.started = False

    async def add(self, chunk: dict[str, Any], emit: Emitter) -> None:
        usage = chunk.get("usage")
        if usage:
            self.usage = {
                "inputTokens": usage.get("prompt_tokens") or 0,
                "outputTokens": usage.get("completion_tokens") or 0,
            }
        for choice in (chunk.get("choices") or ())[:1]:
            delta = choice.get("delta") or {}
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            reasoning = reasoning_of(delta)
            if reasoning:
                self.started = True
                await emit.think(reasoning)
            content = delta.get("content")
            if content:
                self.started = True
                self.content.append(content)
                await emit.say(content)
            for part in delta.get("tool_calls") or ():
                call = self.calls.setdefault(part["index"], {"id": "", "name": "", "arguments": []})
                if part.get("id"):
                    call["id"] = part["id"]
                function = part.get("function")
                if function:
                    call["name"] += function.get("name") or ""
                    call["arguments"].append(function.get("arguments") or "")

    def result(self) -> ModelTurn:
        calls: list[ToolCall] = [
            {
                "id": call["id"] or f"call_{index}",
                "name": call["name"],
                "arguments": "".join(call["arguments"]),
            }
            for index, call in sorted(self.calls.items())
        ]
        return {
            "content": "".join(self.content),
            "toolCalls": calls,
            "finishReason": self.finish_reason,
            "usage": self.usage,
        }


def reasoning_of(delta: dict[str, Any]) -> str | None:
    """Reasoning as OpenAI-compatible servers send it: `reasoning_content` (DeepSeek,
    vLLM, llama.cpp) or `reasoning` (Ollama, OpenRouter), beside the content."""
    for name in ("reasoning_content", "reasoning"):
        value = delta.get(name)
        if isinstance(value, str) and value:
            return value
    return None
