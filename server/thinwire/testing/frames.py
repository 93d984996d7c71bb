"""A run's frames in a test, read as a client reads them.

    response = client.post("/agents/librarian/runs", json={"message": {"text": "tides"}})
    frames = frames_of(response)
    assert [f["type"] for f in frames][-1] == "done"

Each frame is checked strictly against the wire schema as it is read, so a test that
reads its frames with `frames_of` also fails if one carries a field the schema does not
allow, or a value of another type (a seq of "4"). A response that is not a stream at all
(a 400 for a blank message, say) fails too, with its status and body, rather than
reading as a stream of no frames. A streamed response (`client.stream(...)`) is read to
its end first.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError

from thinwire import wire

__all__ = ["FrameError", "frames_of"]

_FRAME: TypeAdapter[wire.Frame] = TypeAdapter(wire.Frame)


class FrameError(AssertionError):
    """An event of the stream is not a frame of the wire schema."""


class HasText(Protocol):
    @property
    def text(self) -> str: ...


def not_a_stream(body: object, text: str) -> str | None:
    """Why `body` is not an event stream, if it is not: an error status, another content
    type, or text that is JSON (an event's lines start with a field name or a colon)."""
    status = getattr(body, "status_code", None)
    headers = getattr(body, "headers", None)
    kind = headers.get("content-type", "") if headers is not None else None
    if isinstance(status, int) and not 200 <= status < 300:
        return f"the response is {status}"
    if kind is not None and not kind.startswith("text/event-stream"):
        return f"the response is {kind or 'of no content type'}"
    if text.lstrip().startswith(("{", "[")):
        return "the body is JSON"
    return None


def text_of(response: HasText) -> str:
    """A response's text; a streamed one (`client.stream(...)`, which httpx does not read
    until asked) read to its end first."""
    try:
        return response.text
    except RuntimeError as unread:  # httpx's ResponseNotRead
        read = getattr(response, "read", None)
        if read is None:
            raise
        try:
            read()
        except RuntimeError as exc:  # an async client's stream, or one read in part
            raise FrameError(
                f"a streamed response frames_of cannot read ({exc}): read it first, "
                "whole — `await response.aread()` for an async client's"
            ) from unread
        return response.text


def frames_of(body: str | bytes | HasText) -> list[dict[str, Any]]:
    """The frames of a `text/event-stream` body (a response, or its text), in order, as
    their JSON objects; heartbeats and other comments left out. A streamed response
    (`client.stream(...)`) is read to its end; an async client's must be read first
    (`await response.aread()`), or `FrameError` says so. Raises `FrameError` for
    an event that is not a frame the wire schema allows (an unknown type, a missing or
    extra field), and for a body that is not an event stream: an error response (its
    status and body said), another content type, JSON."""
    if isinstance(body, bytes):
        text = body.decode()
    elif isinstance(body, str):
        text = body
    else:
        text = text_of(body)
    problem = not_a_stream(body, text)
    if problem is not None:
        raise FrameError(f"not a stream of frames: {problem}: {text[:500]}")
    frames = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = [
            line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
        ]
        if not data:
            continue  # a heartbeat, or the blank end of the body
        raw = "\n".join(data)
        try:
            frame = json.loads(raw)
            _FRAME.validate_python(frame, strict=True)  # as JSON decodes it: no coercion
        except (ValueError, ValidationError) as exc:
            raise FrameError(f"not a thinwire frame: {raw[:200]}\n{exc}") from None
        frames.append(frame)
    return frames
