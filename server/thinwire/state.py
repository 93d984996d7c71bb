"""AgentState: a per-context key-value store of JSON values, with an allow-list and an audit.

- Values must be JSON. A value JSON cannot represent exactly (datetime, set, bytes, tuple,
  NaN, an object) is refused when it is written, never stringified on the way to storage.
- A key is a name the operator API's URLs can hold (`KEY_NAME`), checked on every write
  (and, by the agent, for `initial_state`); a value is at most `max_value_bytes` as JSON.
- `writable_keys` is an allow-list checked on every write, the agent's own included; None
  means every key is writable. `initial_state` is the only way around it.
- Every write is recorded as an audit entry `(key, value, time, source)` naming the
  writer, and reaches the store in the same atomic save as the value itself.
- Reads return copies, so changing a value in place cannot skip the audit: build the new
  value and assign it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import replace
from typing import Any

from thinwire.errors import StateValueError, WriteDenied, quoted
from thinwire.jsontext import dumps, encodable, replace_unencodable
from thinwire.jsonvalues import JSONValue, check_json, copy_json
from thinwire.stores.base import AuditEntry

__all__ = [
    "AgentState",
    "StateValueError",
    "WriteDenied",
    "check_json",
    "check_key",
    "check_source",
    "copy_json",
]

#: What a key may be: one segment of the operator API's URLs
#: (`…/state/{key}/history`), which `.` and `..` cannot be (a client resolves them away).
KEY_NAME = re.compile(r"(?!\.\.?$)[A-Za-z0-9_.:@-]{1,128}")
#: What names the writer of a write, in the audit trail; the operator API's rule too.
SOURCE = r"[A-Za-z0-9_.@:-]{1,64}"
#: The writers only the operator API names (`operator:<source>`).
OPERATOR = "operator:"


def check_key(key: object, where: str = "AgentState") -> None:
    """Raise `StateValueError` unless `key` is a key name (`KEY_NAME`)."""
    if not isinstance(key, str):
        raise StateValueError(f"{where} keys are strings, not {type(key).__name__}")
    if not KEY_NAME.fullmatch(key):
        raise StateValueError(
            f"{where} key {quoted(key)} is not a key name: 1 to 128 of A-Z a-z 0-9 _ . : @ -, "
            "other than . and .., so that the operator API's URLs can name it"
        )


def check_source(source: object) -> None:
    """Refuse a writer an agent names (`run.state.set(…, source=…)`) that the operator
    API's rule refuses, or that would pass for the operator API."""
    if not isinstance(source, str):
        raise TypeError(f"a write's source is a str, not {type(source).__name__}")
    if not re.fullmatch(SOURCE, source):
        raise ValueError(
            f"source={source!r}: a write's source is 1 to 64 of A-Z a-z 0-9 _ . @ : -, "
            "as the operator API's is"
        )
    if source.startswith(OPERATOR):
        raise ValueError(
            f"source={source!r}: {OPERATOR!r} names the operator API's writes in the audit "
            "trail; an agent's may not"
        )


class AgentState(MutableMapping[str, JSONValue]):
    """Server-only key-value state of one context. Never serialised onto the wire.

    `state[key] = value` records the write under this view's `source`;
    `state.set(key, value, source="ops-anna")` names another writer.
    """

    def __init__(
        self,
        initial: Mapping[str, JSONValue] | None = None,
        *,
        writable_keys: Iterable[str] | None = None,
        source: str = "agent",
        max_value_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.writable_keys = None if writable_keys is None else frozenset(writable_keys)
        self.source = source
        #: The most a value written may take, as JSON in UTF-8 (None: no limit).
        self.max_value_bytes = max_value_bytes
        #: The run writing through this view, while one does: named in the audit trail.
        self.run_id: str | None = None
        self._clock = clock
        self._data: dict[str, JSONValue] = {}
        self._pending: list[AuditEntry] = []
        #: The writes a resumed run's replay makes again (see `expect_replay`).
        self._replayed: list[AuditEntry] = []
        # What a store kept, or `initial_state`: its keys are not checked here, so that a
        # key an older version let in still loads (and can be deleted).
        for key, value in (initial or {}).items():
            if not isinstance(key, str):
                raise StateValueError(f"AgentState keys are strings, not {type(key).__name__}")
            check_json(value, f"AgentState[{key!r}]")
            self._data[key] = copy_json(value)

    def _check_value(self, key: str, value: object) -> None:
        check_json(value, f"AgentState[{key!r}]")
        limit = self.max_value_bytes
        if limit is not None and not isinstance(value, int | float | None):
            text = dumps(value)
            size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
            if size > limit:
                raise StateValueError(
                    f"AgentState[{key!r}] is {size} bytes as JSON, over the limit of "
                    f"{limit} (max_state_value_bytes): keep large data elsewhere and its "
                    "reference in AgentState"
                )

    def denied(self, keys: Iterable[str]) -> set[str]:
        """The keys among `keys` that may not be written."""
        if self.writable_keys is None:
            return set()
        return set(keys) - self.writable_keys

    def update_all(self, changes: Mapping[str, JSONValue], *, source: str | None = None) -> None:
        """Write several keys at once: all of them, or — on any refusal — none. A key
        that is no key name is refused as such before the allow-list is asked about it."""
        for key in changes:
            check_key(key)
        denied = self.denied(changes)
        if denied:
            raise WriteDenied(denied, self.writable_keys or ())
        for key, value in changes.items():
            self._check_value(key, value)
        now = self._clock()
        for key, value in changes.items():
            self._data[key] = copy_json(value)
            self._audit(key, copy_json(value), now, source or self.source)

    def set(self, key: str, value: JSONValue, *, source: str | None = None) -> None:
        self.update_all({key: value}, source=source)

    def __getitem__(self, key: str) -> JSONValue:
        return copy_json(self._data[key])

    def __setitem__(self, key: str, value: JSONValue) -> None:
        self.set(key, value)

    def __delitem__(self, key: str) -> None:
        """Deleting a key is audited as writing null to it."""
        if self.denied([key]):
            raise WriteDenied([key], self.writable_keys or ())
        del self._data[key]
        self._audit(key, None, self._clock(), self.source)

    def _audit(self, key: str, value: JSONValue, at: float, source: str) -> None:
        replayed = self._replayed
        if replayed:
            first = replayed[0]
            if (first.key, first.value, first.source) == (key, value, source):
                self._pending.append(replayed.pop(0))  # as it was first written
                return
            replayed.clear()  # the replay went another way: its writes are its own
        self._pending.append(AuditEntry(key, value, at, source, run_id=self.run_id))

    def expect_replay(self, kept: Mapping[str, Any]) -> None:
        """A run resumes by replay: the writes the run that asked had made (`kept`, from
        `with_writes`), made again in the same order, keep their first time and run."""
        self._replayed = [
            AuditEntry(key, value, at, source, run_id=run_id)
            for key, value, at, source, run_id in kept["audit"]
        ]

    def end_replay(self) -> None:
        """The replay is over: a write from here on is a new one, whatever it writes."""
        self._replayed = []

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"AgentState(keys={sorted(self._data)})"

    def to_json(self) -> dict[str, JSONValue]:
        """A copy of every value, for storage."""
        return copy_json(self._data)  # type: ignore[no-any-return]

    def restore(self, snapshot: Mapping[str, JSONValue]) -> None:
        """Go back to `snapshot` (from `to_json`), forgetting the writes since."""
        self._data = copy_json(dict(snapshot))
        self._pending, self._replayed = [], []

    def with_writes(self) -> dict[str, Any]:
        """Every value and the writes not yet saved (their audit entries), as JSON: what
        `restore_with_writes` brings back."""
        audit = [[e.key, copy_json(e.value), e.time, e.source, e.run_id] for e in self._pending]
        return {"state": self.to_json(), "audit": audit}

    def restore_with_writes(self, kept: Mapping[str, Any]) -> None:
        """Go back to what `with_writes` kept, its writes unsaved again, each with its own
        time, writer and run."""
        self.restore(kept["state"])
        self._pending = [
            AuditEntry(key, value, at, source, run_id=run_id)
            for key, value, at, source, run_id in kept["audit"]
        ]

    def storable_writes(self) -> bool:
        """Whether a store can write the writes not yet saved. If not (text UTF-8 cannot
        carry, which a write's checks refuse: one they missed), that text is replaced
        (U+FFFD) in them and in the values, so that the save cannot fail for it."""
        if encodable([(e.key, e.value, e.source) for e in self._pending]):
            return True
        self._data = replace_unencodable(self._data)
        self._pending = [
            replace(
                entry,
                key=replace_unencodable(entry.key),
                value=replace_unencodable(entry.value),
                source=replace_unencodable(entry.source),
            )
            for entry in self._pending
        ]
        return False

    def take_audit(self) -> list[AuditEntry]:
        """The writes not yet saved, handed to the store with the next save."""
        pending, self._pending = self._pending, []
        return pending
