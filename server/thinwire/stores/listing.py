"""A principal's conversations, most recently active first: what each store indexes per
owner and agent, and the opaque cursor of its pages (keyset: `updatedAt`, then id)."""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from typing import Any

from thinwire import wire
from thinwire.errors import BadRequest
from thinwire.ids import CONTEXT_ID
from thinwire.parsing import ascii_number
from thinwire.records import ContextRecord

__all__ = ["Cursor", "Summary", "decode_cursor", "encode_cursor", "page_size"]

#: Conversations in a page of the list, unless the client asks for fewer or more.
DEFAULT_PAGE = 20
MAX_PAGE = 100


def page_size(limit: str | None) -> int:
    """A list request's `limit` query parameter: 1 to `MAX_PAGE`, `DEFAULT_PAGE` if none."""
    size = ascii_number(limit or str(DEFAULT_PAGE), MAX_PAGE)
    if not size:
        raise BadRequest("invalid_request", f"limit: a whole number from 1 to {MAX_PAGE}")
    return size


@dataclass(frozen=True)
class Summary:
    """One conversation as the list shows it (`wire.ConversationSummary`)."""

    context_id: str
    title: str | None
    created_at: float
    updated_at: float
    turn_count: int
    preview: str
    status: wire.ConversationStatus

    @classmethod
    def of(cls, record: ContextRecord) -> Summary:
        return cls(
            context_id=record.id,
            title=record.title,
            created_at=record.created_at,
            updated_at=record.updated_at,
            turn_count=record.turn_count,
            preview=record.preview,
            status=record.status,
        )

    def to_wire(self) -> dict[str, Any]:
        """As `wire.ConversationSummary` serialises it (built directly: a page is fifty
        of them, and the OpenAPI conformance tests hold the shape)."""
        return {
            "contextId": self.context_id,
            "title": self.title,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "turnCount": self.turn_count,
            "preview": self.preview,
            "status": self.status,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "createdAt": self.created_at,
            "turnCount": self.turn_count,
            "preview": self.preview,
            "status": self.status,
        }

    @classmethod
    def from_json(cls, context_id: str, updated_at: float, data: dict[str, Any]) -> Summary:
        return cls(
            context_id=context_id,
            title=data["title"],
            created_at=data["createdAt"],
            updated_at=updated_at,
            turn_count=data["turnCount"],
            preview=data["preview"],
            status=data["status"],
        )


@dataclass(frozen=True)
class Cursor:
    """Where a page ends: the next starts after this `(updated_at, context_id)`."""

    updated_at: float
    context_id: str

    def before(self, updated_at: float, context_id: str) -> bool:
        """Whether a conversation comes after the cursor, newest first."""
        return (updated_at, context_id) < (self.updated_at, self.context_id)


def encode_cursor(summary: Summary) -> str:
    raw = json.dumps([summary.updated_at, summary.context_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(value: str) -> Cursor:
    """A cursor of the shape a page ends with: a finite time and a context id. It is not
    signed — a list is its owner's alone, and a cursor of theirs they made up pages their
    own list from where it says — so its shape is what is checked: anything else is a 400
    (a time that is no finite number would reach the store's query)."""
    try:
        updated_at, context_id = json.loads(
            base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)),
            parse_constant=refuse_constant,  # NaN, Infinity
        )
        if isinstance(updated_at, bool) or not isinstance(updated_at, int | float):
            raise ValueError(value)
        updated_at = float(updated_at)  # OverflowError past a float's range
        if not math.isfinite(updated_at) or not isinstance(context_id, str):
            raise ValueError(value)
        if not CONTEXT_ID.fullmatch(context_id):
            raise ValueError(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise BadRequest("invalid_request", "cursor: not a valid cursor") from exc
    return Cursor(updated_at, context_id)


def refuse_constant(name: str) -> float:
    raise ValueError(name)
