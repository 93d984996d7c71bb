"""Exchanges, and a conversation's history made of them.

An exchange is one user message and what answered it: the messages its runs added to
the history, and its public turns. Both are kept as JSON text and decoded only when
used, so a long conversation costs a send the exchanges its agent reads, not all of
them, and a save writes the exchange that changed, not the conversation.

`History` is what `run.history` is: a list of the conversation's messages — the
preamble (the system prompt), then each exchange's on the branch shown — that decodes
an exchange the first time one of its messages is read. Messages of past exchanges are
read-only (a run appends to its own exchange); reading from the end, as a model's
window does, decodes only the exchanges it reaches. A message added to it must be a JSON
object: anything else is refused where the agent adds it (`StateValueError`), rather
than failing the save at the end of the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, MutableSequence
from typing import Any, overload

from thinwire.branches import Position
from thinwire.errors import StateValueError
from thinwire.jsontext import dumps
from thinwire.jsonvalues import a_value_of, check_json

__all__ = ["Exchange", "History"]

Message = dict[str, Any]

#: Said when a message added to `run.history` holds a value of another type.
HISTORY_RULE = "run.history holds JSON values only"


def checked(message: object, index: int) -> Message:
    """`message`, added to the history at `index`, if it is a JSON object."""
    if not isinstance(message, dict):
        raise StateValueError(
            f"run.history[{index}] is {a_value_of(message)}; "
            "run.history holds messages that are JSON objects (dicts) only"
        )
    check_json(message, f"run.history[{index}]", rule=HISTORY_RULE)
    return message


class Exchange:
    """One exchange: where it is, its messages and its public turns (each held as the
    list or as its JSON text), and whether it changed since it was stored."""

    __slots__ = (
        "_messages",
        "_messages_json",
        "_size",
        "_turns",
        "_turns_json",
        "changed",
        "counted",
        "position",
    )

    def __init__(
        self,
        position: Position,
        *,
        messages: list[Message] | None = None,
        turns: list[dict[str, Any]] | None = None,
        messages_json: str | None = None,
        turns_json: str | None = None,
        size: int | None = None,
        changed: bool = False,
    ) -> None:
        self.position = position
        self._messages = messages if messages is not None or messages_json is not None else []
        self._messages_json = messages_json if messages is None else None
        self._turns = turns if turns is not None or turns_json is not None else []
        self._turns_json = turns_json if turns is None else None
        self._size = size or 0
        #: It differs from what the store holds: the next save writes it.
        self.changed = changed
        #: Its weight as its record last counted it (see `ContextRecord.weight`).
        self.counted = 0

    @property
    def size(self) -> int:
        """How many messages it holds (known without decoding them)."""
        return len(self._messages) if self._messages is not None else self._size

    @property
    def messages(self) -> list[Message]:
        if self._messages is None:
            self._messages = json.loads(self._messages_json or "[]")
            self._messages_json = None
        return self._messages

    @property
    def turns(self) -> list[dict[str, Any]]:
        if self._turns is None:
            self._turns = json.loads(self._turns_json or "[]")
            self._turns_json = None
        return self._turns

    @property
    def turn_count(self) -> int:
        """How many public turns it holds. Held as text, they are counted in it: every
        turn has one `"role":"` key, which no string value can hold unescaped."""
        if self._turns is None:
            return (self._turns_json or "").count('"role":"')
        return len(self._turns)

    def messages_json(self) -> str:
        if self._messages is None:
            return self._messages_json or "[]"
        return dumps(self._messages)

    def turns_json(self) -> str:
        if self._turns is None:
            return self._turns_json or "[]"
        return dumps(self._turns)

    def compact(self) -> None:
        """Hold the text instead of the lists: what the store writes, a fraction of the
        memory, nothing for the garbage collector to walk."""
        if self._messages is not None:
            self._size = len(self._messages)
            self._messages_json, self._messages = dumps(self._messages), None
        if self._turns is not None:
            self._turns_json, self._turns = dumps(self._turns), None

    @property
    def weight(self) -> int:
        """Roughly the bytes it holds, for a cache that counts them."""
        if self._messages is None and self._turns is None:
            return len(self._messages_json or "") + len(self._turns_json or "") + 200
        return 4 * (len(self.messages_json()) + len(self.turns_json())) + 200


class History(MutableSequence[Message]):
    """The messages of a conversation's branch: `preamble`, then each exchange's, the
    last exchange (the running one) writable."""

    def __init__(self, preamble: list[Message], exchanges: list[Exchange]) -> None:
        self.preamble = preamble
        self.exchanges = exchanges
        #: Messages before the running exchange: they do not change, so counted once.
        self._past: int | None = None

    # --- where an index is -------------------------------------------------------------

    def __len__(self) -> int:
        if self._past is None:
            self._past = len(self.preamble) + sum(e.size for e in self.exchanges[:-1])
        return self._past + (self.exchanges[-1].size if self.exchanges else 0)

    def _locate(self, index: int) -> tuple[list[Message], int, Exchange | None]:
        """The list holding message `index` (negative counts from the end), the index in
        it, and its exchange (None for the preamble); walks from the nearer end."""
        length = len(self)
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError("history index out of range")
        if index < len(self.preamble):
            return self.preamble, index, None
        if index >= length // 2:  # from the end, decoding only what it passes
            end = length
            for exchange in reversed(self.exchanges):
                begin = end - exchange.size
                if index >= begin:
                    return exchange.messages, index - begin, exchange
                end = begin
        begin = len(self.preamble)
        for exchange in self.exchanges:
            if index < begin + exchange.size:
                return exchange.messages, index - begin, exchange
            begin += exchange.size
        raise IndexError("history index out of range")  # pragma: no cover

    def _writable(self, exchange: Exchange | None) -> Exchange:
        if exchange is None or exchange is not self.exchanges[-1]:
            raise TypeError("the messages of past exchanges are read-only; append new ones")
        exchange.changed = True
        return exchange

    # --- reading -----------------------------------------------------------------------

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        messages, at, _ = self._locate(index)
        return messages[at]

    def __iter__(self) -> Iterator[Message]:
        yield from self.preamble
        for exchange in self.exchanges:
            yield from exchange.messages

    def __reversed__(self) -> Iterator[Message]:
        for exchange in reversed(self.exchanges):
            yield from reversed(exchange.messages)
        yield from reversed(self.preamble)

    # --- writing (the running exchange only) ------------------------------------------

    @overload
    def __setitem__(self, index: int, value: Message) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Iterable[Message]) -> None: ...

    def __setitem__(self, index: int | slice, value: Any) -> None:
        if isinstance(index, slice):
            raise TypeError("assign messages one at a time")
        messages, at, exchange = self._locate(index)
        message = checked(value, index if index >= 0 else index + len(self))
        self._writable(exchange)
        messages[at] = message

    @overload
    def __delitem__(self, index: int) -> None: ...

    @overload
    def __delitem__(self, index: slice) -> None: ...

    def __delitem__(self, index: int | slice) -> None:
        if isinstance(index, slice):
            for at in sorted(range(*index.indices(len(self))), reverse=True):
                del self[at]
            return
        messages, at, exchange = self._locate(index)
        self._writable(exchange)
        del messages[at]

    def insert(self, index: int, value: Message) -> None:
        length = len(self)
        if index < 0:
            index = max(0, index + length)
        message = checked(value, min(index, length))
        running = self._writable(self.exchanges[-1] if self.exchanges else None)
        first = length - running.size
        if index < first:
            raise TypeError("the messages of past exchanges are read-only; append new ones")
        running.messages.insert(index - first, message)

    def append(self, value: Message) -> None:
        message = checked(value, len(self))
        running = self._writable(self.exchanges[-1] if self.exchanges else None)
        running.messages.append(message)

    def __repr__(self) -> str:
        return f"History({len(self)} messages in {len(self.exchanges)} exchanges)"
