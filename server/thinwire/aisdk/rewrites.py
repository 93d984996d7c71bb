"""The SDK's two ways of rewriting a chat's past, and what thinwire takes of them.

`useChat` edits a sent message (`sendMessage({ text, messageId })`) and regenerates a
reply (`regenerate({ messageId })`) by cutting its own list back first, then asking the
server to answer from there. thinwire answers what that list now shows, or refuses
before anything is stored, so the page and the server never disagree until a reload:

- a user message under an id the conversation has is an edit (`invalid_request`, as the
  SDK's `messageId` makes one): an earlier message's, or one a reload gave its turn id.
  The latest send's id with the latest send's text is a retry, whose first run streams
  again; with another text it is an edit, never a retry;
- a regenerate names the latest reply (the first turn of the last exchange: the page's
  last message, one reply that waited for a decision included), or nothing. Any other
  message the SDK would cut the list back to, the server keeps.
"""

from __future__ import annotations

from thinwire.aisdk.chat_request import Regenerate, Say, edit_refused
from thinwire.branches import turn_id
from thinwire.errors import BadRequest
from thinwire.records import ContextRecord

__all__ = ["check_regenerate", "check_sent_once"]


def check_sent_once(record: ContextRecord, say: Say) -> None:
    """`invalid_request` for a message sent again as anything but a retry."""
    if say.message_id is not None and sent_before(record, say.message_id, say.text):
        raise edit_refused()


def sent_before(record: ContextRecord, message_id: str, text: str) -> bool:
    run_id = record.sends.get(message_id)
    if run_id is None:
        return record.has_user_turn(message_id)  # a reload's message
    latest = record.last_run is not None and record.last_run.run_id == run_id
    return not latest or latest_message(record) not in (None, text)


def latest_message(record: ContextRecord) -> str | None:
    """The text the latest exchange answers; None when it is not in hand."""
    exchange = record.latest_exchange
    if exchange is None or not exchange.messages:
        return None
    first = exchange.messages[0]
    return str(first["content"]) if first.get("role") == "user" else None


def check_regenerate(record: ContextRecord, regenerate: Regenerate) -> None:
    """`invalid_request` for a regenerate that names a message other than the latest
    reply: the SDK would cut its list back to before it, the server would not."""
    leaf = record.lines.leaf
    if regenerate.message_id is None or leaf is None:
        return  # nothing named; or nothing to regenerate, which `regenerate` says
    if regenerate.message_id != turn_id(leaf, "assistant", 0):
        raise BadRequest(
            "invalid_request",
            "regenerate answers the latest message again: name its reply, or no message",
        )
