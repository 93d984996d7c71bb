"""Talking to a thinwire server as a client does, and writing down what it was told.

A send streams `POST /agents/{agent}/runs` to its `done` frame; a follow streams
`GET …/events`. Neither raises for what a server may do under fault — a refusal, a
dropped connection, a read that times out: each is recorded in the `Exchange`, for the
drill to judge. Every read is bounded (`TIMEOUT`), so a hang shows up as a failure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx

from chaos.outcome import DrillError

__all__ = ["TIMEOUT", "Exchange", "Frame", "OnFrame", "follow", "login", "send", "transcript"]

#: Longest wait for a connection, and between two pieces of a response.
TIMEOUT = httpx.Timeout(10.0, connect=5.0)

Frame = dict[str, Any]
OnFrame = Callable[[Frame], None]


@dataclass
class Exchange:
    """One request and what came back."""

    text: str  # the message sent (empty for a follow)
    context_id: str | None  # the conversation addressed; None for a new one
    started: float = field(default_factory=time.monotonic)
    ended: float = 0.0
    status: int | None = None
    code: str | None = None  # a JSON error's code
    retryable: bool | None = None
    retry_after: str | None = None
    body: str = ""  # the start of a non-stream body
    frames: list[Frame] = field(default_factory=list)
    failure: str | None = None  # a transport error or a timeout, in words

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    @property
    def done(self) -> Frame | None:
        return next((f for f in reversed(self.frames) if f.get("type") == "done"), None)

    @property
    def acknowledged(self) -> bool:
        """The server said the turn is complete and saved: `done`, stop reason `end`."""
        done = self.done
        return done is not None and done.get("stopReason") == "end"

    @property
    def run_context(self) -> str | None:
        """The conversation the run announced in `run_start`."""
        start = next((f for f in self.frames if f.get("type") == "run_start"), None)
        return None if start is None else str(start["contextId"])

    @property
    def streamed(self) -> str:
        """The reply as the client received it: its token deltas, joined."""
        return "".join(f["delta"] for f in self.frames if f.get("type") == "token")

    @property
    def error_frame(self) -> Frame | None:
        return next((f for f in self.frames if f.get("type") == "error"), None)

    @property
    def kind(self) -> str:
        """What happened, in a word or three: "ok", "503 store_unavailable", "cut"…"""
        if self.failure is not None:
            if self.failure.startswith("timed out"):
                return "timeout"
            return "cut" if self.frames else "no connection"
        if self.status != 200:
            return f"{self.status} {self.code or 'untyped'}"
        done = self.done
        if done is None:
            return "cut"
        if done.get("stopReason") == "end":
            return "ok"
        error = self.error_frame
        return f"done {done.get('stopReason')}" + (f" {error.get('code')}" if error else "")

    def describe(self) -> str:
        if self.failure is not None:
            got = f" after {len(self.frames)} frames" if self.frames else ""
            return f"{self.failure}{got}"
        if self.status != 200:
            return f"HTTP {self.status} {self.code or self.body[:120]!r}"
        done = self.done
        if done is None:
            return f"HTTP 200, stream ended after {len(self.frames)} frames without done"
        error = self.error_frame
        detail = f" ({error.get('code')})" if error else ""
        return f"HTTP 200, done {done.get('stopReason')}{detail}"


def read_frames(response: httpx.Response, exchange: Exchange, on_frame: OnFrame | None) -> None:
    block: list[str] = []
    for line in response.iter_lines():
        if line:
            block.append(line)
            continue
        data = [part[len("data: ") :] for part in block if part.startswith("data: ")]
        block = []
        if not data:
            continue  # a heartbeat comment or a retry hint
        frame = json.loads(data[0])
        exchange.frames.append(frame)
        if on_frame is not None:
            on_frame(frame)


def read_response(response: httpx.Response, exchange: Exchange, on_frame: OnFrame | None) -> None:
    exchange.status = response.status_code
    exchange.retry_after = response.headers.get("retry-after")
    if response.status_code == 200 and response.headers.get("content-type", "").startswith(
        "text/event-stream"
    ):
        read_frames(response, exchange, on_frame)
        return
    body = response.read()
    exchange.body = body[:300].decode(errors="replace")
    try:
        error = json.loads(body)["error"]
        exchange.code = error["code"]
        exchange.retryable = error.get("retryable")
    except (ValueError, KeyError, TypeError):
        pass  # not a typed error: the drill sees code None


def exchange(
    client: httpx.Client,
    method: str,
    url: str,
    record: Exchange,
    on_frame: OnFrame | None,
    **options: Any,
) -> Exchange:
    try:
        with client.stream(method, url, **options) as response:
            read_response(response, record, on_frame)
    except httpx.TimeoutException as exc:
        record.failure = f"timed out ({type(exc).__name__})"
    except httpx.HTTPError as exc:
        record.failure = f"{type(exc).__name__}: {exc}"
    except ValueError as exc:  # a data line that is not JSON
        record.failure = f"malformed frame: {exc}"
    record.ended = time.monotonic()
    return record


def send(
    client: httpx.Client,
    url: str,
    text: str,
    context_id: str | None = None,
    *,
    agent: str = "demo",
    on_frame: OnFrame | None = None,
) -> Exchange:
    """Send `text` (to a new conversation when `context_id` is None), read to the end."""
    body: dict[str, Any] = {"message": {"text": text}}
    if context_id is not None:
        body["contextId"] = context_id
    record = Exchange(text, context_id)
    return exchange(client, "POST", f"{url}/agents/{agent}/runs", record, on_frame, json=body)


def follow(
    client: httpx.Client,
    url: str,
    context_id: str,
    after: int,
    *,
    agent: str = "demo",
    on_frame: OnFrame | None = None,
    timeout: httpx.Timeout = TIMEOUT,
) -> Exchange:
    """Reattach to the conversation's latest run after frame `after` (`Last-Event-ID`)."""
    record = Exchange("", context_id)
    path = f"{url}/agents/{agent}/contexts/{context_id}/events"
    headers = {"Last-Event-ID": str(after)}
    return exchange(client, "GET", path, record, on_frame, headers=headers, timeout=timeout)


def login(client: httpx.Client, url: str, user: str) -> bool:
    """Sign `client` in as a demo user (its cookie jar keeps the signed cookie); "guest"
    stays without a cookie. False when the server did not answer."""
    if user == "guest":
        return True
    try:
        response = client.post(f"{url}/demo/login", json={"user": user})
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def transcript(
    client: httpx.Client, url: str, context_id: str, agent: str = "demo"
) -> dict[str, Any]:
    """The conversation's public transcript; DrillError when it cannot be read."""
    try:
        response = client.get(f"{url}/agents/{agent}/contexts/{context_id}")
    except httpx.HTTPError as exc:
        raise DrillError(f"reading {context_id}: {type(exc).__name__}: {exc}") from exc
    if response.status_code != 200:
        raise DrillError(f"reading {context_id}: HTTP {response.status_code} {response.text[:200]}")
    body: dict[str, Any] = response.json()
    return body
