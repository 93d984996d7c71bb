"""The turn ids a client sends back — a send's `afterTurnId`, a regenerate's, an edit's
and a branch switch's `turnId`, a page's `before` — checked whole, the same way for
every one of them: the lines know which exchanges a conversation has, but only an
exchange's turns say which ids it gave (`turn-…-a9` names the exchange of `turn-…-a0`
and no turn of it). The check reads that one exchange's turns, never the rest of a long
conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from thinwire.branches import Position, branch_moved, parse_turn_id
from thinwire.errors import NotFound

if TYPE_CHECKING:
    from thinwire.records import ContextRecord
    from thinwire.stores import Store

__all__ = ["ending_exchange", "exchange_of", "names_turn", "no_such_turn"]


def no_such_turn() -> NotFound:
    return NotFound("turn_not_found", "no such turn in this conversation")


def names_turn(turns: Sequence[Mapping[str, Any]], turn_id: str) -> bool:
    """Whether `turn_id` names a turn of the exchange whose turns these are: one of them,
    or the reply its latest run announced (`run_start`'s `turnId`) and did not keep,
    having shown nothing — a client shows that one as its last turn until it reads the
    transcript again."""
    if not turns:  # none: not even the user's message (an exchange the store lost)
        return False
    if any(turn.get("id") == turn_id for turn in turns):
        return True
    _, role, index = parse_turn_id(turn_id)
    replies = sum(1 for turn in turns if turn.get("role") == "assistant")
    return role == "a" and index == replies


async def exchange_of(
    store: Store, context_id: str, turn_id: str, record: ContextRecord | None = None
) -> Position:
    """The exchange of a turn of the conversation, on whichever branch; `turn_not_found`
    for any other id. With the live `record`, an exchange in hand is read as it is and one
    its lines do not hold is not looked for; without, the caller knows the lines hold it."""
    position, _, _ = parse_turn_id(turn_id)
    exchange = None if record is None else record.exchanges.get(position)
    turns: list[dict[str, Any]] = []
    if exchange is not None:
        turns = exchange.turns
    elif record is None or record.lines.holds(position):  # from the store, that one only
        stored = await store.load_turns(context_id, [position])
        turns = json.loads(stored[position]) if position in stored else []
    if not names_turn(turns, turn_id):
        raise no_such_turn()
    return position


async def ending_exchange(store: Store, record: ContextRecord, turn_id: str) -> Position:
    """The exchange of `turn_id`, the last turn a client shows, if it still ends a branch
    (`Lines.check_ends_branch`): `branch_moved` when a clear dropped it (its turns are
    gone: which ids it gave is not known any more) or the conversation went on from it,
    `turn_not_found` when the conversation never had that turn."""
    position, _, _ = parse_turn_id(turn_id)
    if record.lines.dropped(position):
        raise branch_moved()
    await exchange_of(store, record.id, turn_id, record)
    record.lines.check_ends_branch(position)
    return position
