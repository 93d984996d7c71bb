"""Text a stream carried in pieces, joined back: what a leak check must search besides
the raw bytes, since a secret sent a character at a time is never whole in any of them.

A recorded source (a response body, a fetch as the page read it, a WebSocket's received
messages) is read for the JSON objects it carries — the whole of it, each SSE event's
data, or each line (the `thinwire.v1.lines` subprotocol, NDJSON) — and their deltas are
joined:

    thinwire frames   `token` and `thinking` deltas of each run, by runId, in seq order —
                      across every source, so a run read over a reload is joined whole
    AI SDK, AG-UI     any event's string `delta` (text-delta, reasoning-delta,
                      TEXT_MESSAGE_CONTENT, REASONING_MESSAGE_CONTENT, THINKING_*…), by
                      the message (or tool call) it belongs to, in order, per source
    A2A               artifact updates' text parts (appended, or a new version when not),
                      and status messages' text parts (thinking), by task, per source

What cannot be read as JSON is left to the raw search; nothing here raises.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["joined_streams", "objects_in"]

#: The thinwire frames whose deltas add up to a text.
DELTA_FRAMES = ("token", "thinking")
#: Where an interop event names the message its delta belongs to, first found first.
MESSAGE_KEYS = ("messageId", "toolCallId", "id")


def parsed(text: str) -> Any:
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def dicts(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, dict)]
    return []


def objects_in(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects `text` carries, in order."""
    whole = parsed(text)
    if whole is not None:
        yield from dicts(whole)
        return
    data: list[str] = []
    for line in text.splitlines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if data:  # the event's data ends at a blank line (or any other field)
            yield from event_objects(data)
            data = []
        yield from dicts(parsed(line))
    if data:
        yield from event_objects(data)


def event_objects(data: list[str]) -> list[dict[str, Any]]:
    """One SSE event's data lines: one JSON value, or — an event cut and glued to the
    next in a recording — a value on each line."""
    joined = parsed("\n".join(data))
    if joined is not None or len(data) == 1:
        return dicts(joined)
    return [found for line in data for found in dicts(parsed(line))]


def text_parts(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(
        part["text"]
        for part in parts
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    )


class Joiner:
    """Takes every source's objects; `channels()` are the texts they add up to."""

    def __init__(self) -> None:
        #: (kind, runId) -> seq -> delta: a frame replayed in two sources counts once.
        self.runs: dict[tuple[str, str], dict[int, str]] = {}
        #: channel name -> pieces, in order.
        self.pieces: dict[str, list[str]] = {}
        #: channel name -> versions of an A2A artifact, each its parts appended.
        self.artifacts: dict[str, list[str]] = {}

    def take(self, source: str, event: dict[str, Any]) -> None:
        delta = event.get("delta")
        if isinstance(delta, str):
            run, seq = event.get("runId"), event.get("seq")
            if event.get("type") in DELTA_FRAMES and isinstance(run, str) and isinstance(seq, int):
                self.runs.setdefault((event["type"], run), {})[seq] = delta
                return
            message = next((event[k] for k in MESSAGE_KEYS if isinstance(event.get(k), str)), None)
            name = f"{source}: the deltas of {message or event.get('type')}, joined"
            self.pieces.setdefault(name, []).append(delta)
            return
        self.take_a2a(source, event)

    def take_a2a(self, source: str, event: dict[str, Any]) -> None:
        result = event.get("result", event)  # a JSON-RPC response, or the event itself
        if not isinstance(result, dict):
            return
        kind = result.get("kind")  # A2A 0.3 names the event inside it
        artifact_update = result.get("artifactUpdate") or (
            result if kind == "artifact-update" else None
        )
        status_update = result.get("statusUpdate") or (result if kind == "status-update" else None)
        if isinstance(artifact_update, dict) and isinstance(artifact_update.get("artifact"), dict):
            artifact = artifact_update["artifact"]
            name = (
                f"{source}: artifact {artifact.get('artifactId')} of task "
                f"{artifact_update.get('taskId')}, its appended parts joined"
            )
            versions = self.artifacts.setdefault(name, [])
            text = text_parts(artifact.get("parts"))
            if artifact_update.get("append") and versions:
                versions[-1] += text
            else:
                versions.append(text)
        elif isinstance(status_update, dict) and isinstance(status_update.get("status"), dict):
            message = status_update["status"].get("message")
            if isinstance(message, dict):
                name = f"{source}: status messages of task {status_update.get('taskId')}, joined"
                self.pieces.setdefault(name, []).append(text_parts(message.get("parts")))

    def channels(self) -> dict[str, str]:
        joined = {
            f"{kind} deltas of {run}, joined in seq order": "".join(
                deltas[seq] for seq in sorted(deltas)
            )
            for (kind, run), deltas in self.runs.items()
        }
        joined.update((name, "".join(pieces)) for name, pieces in self.pieces.items())
        joined.update((name, "\n".join(versions)) for name, versions in self.artifacts.items())
        return joined


def joined_streams(sources: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Source name -> what it delivered, message by message (one text for a body) ⇒
    channel name -> a text its deltas add up to."""
    joiner = Joiner()
    for source, messages in sources.items():
        for message in messages:
            try:
                events = list(objects_in(message))
            except Exception:  # unreadable (nested too deep, say): searched raw only
                continue
            for event in events:
                try:
                    joiner.take(source, event)
                except Exception:  # an object of an unexpected shape: the raw search has it
                    continue
    return joiner.channels()
