"""OpenAIChat: any OpenAI-compatible chat completions API (OpenAI, vLLM, llama.cpp's
server, Ollama, a LiteLLM proxy…), streamed through the official `openai` SDK.

    model = OpenAIChat("gpt-4.1-mini")                        # OPENAI_API_KEY, OPENAI_BASE_URL
    model = OpenAIChat("qwen3", base_url="http://127.0.0.1:8080/v1", api_key="none")

Content deltas become the reply, reasoning deltas (`reasoning_content` or `reasoning`,
as such servers send them) the thinking; tool call deltas split across chunks are put
back together. A failure before the first delta is tried again (`retries`, with
backoff); after it, the run fails. Every failure leaves as `ModelError`: a few words of
ours for the client, retryable where a retry could help; what the server said goes to
the log. A stopped run closes the HTTP request: the server sees the connection go.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from thinwire.errors import ModelError
from thinwire.models.base import Emitter, ModelTurn, ToolCall

__all__ = ["OpenAIChat"]

logger = logging.getLogger("thinwire.models")


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
    reads them); `parameters` go with every request (temperature, max_tokens…)."""

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

    @property
    def client(self) -> Any:
        if self._client is None:
            openai = require_openai()
            self._client = openai.AsyncOpenAI(**{"max_retries": 0, **self.client_options})
        return self._client

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
        request: dict[str, Any] = {
            "model": self.name,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            **self.parameters,
        }
        if tools:
            request["tools"] = list(tools)
        try:
            stream = await self.client.chat.completions.create(**request)
            try:
                async for chunk in stream:
                    await turn.add(chunk, emit)
            finally:
                await stream.close()  # also when the run is stopped: the request ends
        except openai.APIStatusError as exc:
            raise status_error(exc.status_code) from exc
        except openai.APITimeoutError as exc:
            raise ModelError("timed out", retryable=True) from exc
        except openai.APIConnectionError as exc:
            raise ModelError("unreachable", retryable=True) from exc
        except (openai.APIError, ValueError, KeyError, TypeError) as exc:
            raise ModelError("sent a malformed answer", retryable=False) from exc


def status_error(status: int) -> ModelError:
    if status in (401, 403):
        return ModelError("refused the credentials", retryable=False)
    if status == 429:
        return ModelError("rate limited", retryable=True)
    if status >= 500:
        return ModelError(f"server error {status}", retryable=True)
    return ModelError(f"refused the request ({status})", retryable=False)


class Assembly:
    """One streamed turn, put together chunk by chunk."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, int] | None = None
        #: A delta reached the user: trying again would show it twice.
        self.started = False

    async def add(self, chunk: Any, emit: Emitter) -> None:
        if chunk.usage is not None:
            self.usage = {
                "inputTokens": chunk.usage.prompt_tokens or 0,
                "outputTokens": chunk.usage.completion_tokens or 0,
            }
        for choice in chunk.choices[:1]:
            delta = choice.delta
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
            reasoning = reasoning_of(delta)
            if reasoning:
                self.started = True
                await emit.think(reasoning)
            if delta.content:
                self.started = True
                self.content.append(delta.content)
                await emit.say(delta.content)
            for part in delta.tool_calls or ():
                call = self.calls.setdefault(part.index, {"id": "", "name": "", "arguments": []})
                if part.id:
                    call["id"] = part.id
                if part.function is not None:
                    call["name"] += part.function.name or ""
                    call["arguments"].append(part.function.arguments or "")

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


def reasoning_of(delta: Any) -> str | None:
    """Reasoning as OpenAI-compatible servers send it: `reasoning_content` (DeepSeek,
    vLLM, llama.cpp) or `reasoning` (Ollama, OpenRouter), beside the content."""
    extra = getattr(delta, "model_extra", None) or {}
    for name in ("reasoning_content", "reasoning"):
        value = getattr(delta, name, None) or extra.get(name)
        if isinstance(value, str) and value:
            return value
    return None
