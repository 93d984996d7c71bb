"""The conversation record: everything the server remembers about one context, and the
verbs that change it, each transition written once.

    start_run ──▶ end_turn(stop_reason, text)            a run ends (end, stopped, error)
        │    └──▶ suspend(checkpoint, …)                 it waits for a person
        │              └──▶ resume(interrupt_id)         a decision, then start_run again
        │              └──▶ end_waiting_run()            a stop while it waits
        └──▶ end_killed_run()                            its process died mid-run

A send appends an exchange to the branch shown; `start_run(…, fork=position)` starts it
beside `position` instead (a regenerated reply, an edited message: see `branches.py`).
The record itself is small — run state, AgentState, the preamble, the lines — and the
exchanges, nearly all of a long conversation, are loaded as text when a run or a read
needs them and written one by one when they change (`exchanges.py`).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from thinwire import wire
from thinwire.branches import TURN_ID, Lines, Position, Window, parse_turn_id, turn_id
from thinwire.errors import Conflict, NotFound
from thinwire.exchanges import Exchange, History, Message
from thinwire.jsontext import dumps
from thinwire.runstate import ActiveRun, Checkpoint, LastRun

__all__ = [
    "ANSWERED_KEPT",
    "SENDS_KEPT",
    "SEQ_LEASE",
    "TITLE_LENGTH",
    "ActiveRun",
    "Checkpoint",
    "ContextRecord",
    "LastRun",
    "Shown",
    "TranscriptView",
    "branch_turns",
    "json_array",
    "public_turn",
    "shortened",
    "with_siblings",
]

#: Frame seqs a run may use before its start is saved again. A killed run's context
#: resumes numbering past the lease, so no seq a client may have seen is ever reused.
SEQ_LEASE = 1_000_000
#: How many answered interrupt ids a context remembers.
ANSWERED_KEPT = 100
#: How many message ids (of the latest sends) a context remembers, to tell a retry.
SENDS_KEPT = 100
#: How many runs' token usage a context keeps (the totals count every run).
USAGE_KEPT = 200
#: The longest title; a title made from the first message is cut shorter.
TITLE_LENGTH = 200
AUTO_TITLE = 60
TitleSource = Literal["auto", "agent", "user"]
TITLE_SOURCES: tuple[TitleSource, ...] = ("auto", "agent", "user")
PREVIEW = 120
#: Characters, at most, of the model name usage is counted under (a metrics label too).
MODEL_NAME_LENGTH = 120


def public_turn(role: str, text: str, **fields: Any) -> dict[str, Any]:
    """A transcript turn, built through its wire model: the transcript holds nothing a
    client may not see, so it can be sent as it is stored."""
    turn = wire.TranscriptTurn.model_validate(
        {"role": role, "text": text, "toolCalls": [], **fields}
    )
    return turn.model_dump(by_alias=True)


@dataclass
class Shown:
    """What a run showed besides its text: its thinking, its tools, its public meta."""

    thinking: str = ""
    activity: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def plain(text: str) -> str:
    """One line of plain text: no control characters, no bidi controls that could make
    it read as another."""
    return " ".join(without_controls(text).split())


def without_controls(text: str) -> str:
    """Text as a person may be shown it: its lines and spaces, but no other control
    characters and no bidi controls (an override before "0001$" makes it read "$1000")."""
    return "".join(c for c in text if not hidden(c))


def visible(text: str) -> bool:
    """Whether a reader sees anything in it: not only spaces and format characters (a
    zero-width space, a byte order mark)."""
    return any(unicodedata.category(c)[0] not in "CZ" for c in text)


def shortened(text: str, length: int) -> str:
    """A title: plain text (`plain`) at most `length` long, cut between characters a
    reader sees, not inside one (an emoji of several code points, a letter and its
    accent)."""
    text = plain(text)
    if len(text) <= length:
        return text
    end = length - 1
    while end > 0 and (joins(text[end]) or text[end - 1] == ZWJ):
        end -= 1
    return text[:end].rstrip() + "…"


ZWJ = "\u200d"


def hidden(c: str) -> bool:
    return (unicodedata.category(c) == "Cc" and not c.isspace()) or c in BIDI_CONTROLS


#: Embeddings, overrides, isolates and marks: they reorder the text around them.
BIDI_CONTROLS = frozenset(
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
)


def joins(c: str) -> bool:
    """Whether `c` belongs to the character before it: a mark, a joiner, a variation
    selector, a skin tone."""
    return (
        c == ZWJ
        or unicodedata.category(c) in ("Mn", "Mc", "Me")
        or "\ufe00" <= c <= "\ufe0f"
        or "\U0001f3fb" <= c <= "\U0001f3ff"
    )


class ContextRecord:
    """Everything the server remembers about one conversation."""

    def __init__(
        self,
        id: str,
        agent: str,
        owner: str,
        version: int = 0,
        history: list[Message] | None = None,
        state: dict[str, Any] | None = None,
        transcript: list[dict[str, Any]] | None = None,
        last_seq: int = 0,
        active_run: ActiveRun | None = None,
        last_run: LastRun | None = None,
        checkpoint: Checkpoint | None = None,
        answered: list[str] | None = None,
        sends: dict[str, str] | None = None,
        usage: dict[str, Any] | None = None,
        created_at: float = 0.0,
        updated_at: float = 0.0,
        *,
        title: str | None = None,
        title_source: TitleSource | None = None,
        preamble: list[Message] | None = None,
        lines: Lines | None = None,
        turn_count: int = 0,
        preview: str = "",
    ) -> None:
        self.id = id
        self.agent = agent
        self.owner = owner
        #: Bumped by every successful save; the compare-and-set token.
        self.version = version
        #: AgentState: key -> JSON value (per conversation, whatever the branch).
        self.state: dict[str, Any] = {} if state is None else state
        #: Highest frame seq that may have been sent for this context.
        self.last_seq = last_seq
        self.active_run = active_run
        self.last_run = last_run
        #: The run waiting for a person, if any.
        self.checkpoint = checkpoint
        #: Ids of interrupts already answered (the latest ones), to tell "answered" from
        #: "unknown".
        self.answered: list[str] = [] if answered is None else answered
        #: The client's message id of each of the latest sends -> the run it started.
        self.sends: dict[str, str] = {} if sends is None else sends
        #: Model tokens, server-only: {"total": {model: counts}, "runs": [latest runs]}.
        self.usage: dict[str, Any] = {"total": {}, "runs": []} if usage is None else usage
        self.created_at = created_at
        self.updated_at = updated_at
        self.title = title
        #: Who named it: "auto" (from the first message), "agent" or "user" — each may
        #: rename what one before it named, not what one after it did.
        self.title_source = title_source
        #: Messages before the first exchange: the system prompt.
        self.preamble: list[Message] = [] if preamble is None else preamble
        self.lines = lines or Lines()
        #: Turns on the branch shown, and the start of its latest text: for the list.
        self.turn_count = turn_count
        self.preview = preview
        #: The exchanges in hand, by position: the branch shown once loaded.
        self.exchanges: dict[Position, Exchange] = {}
        #: Exchanges a verb made or changed since the last save: the only ones a save
        #: looks at, so saving a long conversation costs what changed, not its length.
        self.touched: dict[Position, Exchange] = {}
        #: Every exchange was dropped (a clear): the store drops its copies at the save.
        self.cleared = False
        #: The depth from which the branch shown is in hand (0: all of it; None: none of
        #: it, as loaded). An agent that reads only the latest messages gets only those.
        self.held_from: int | None = 0
        #: The branch shown in hand, in order, once built (dropped when it changes).
        self._branch: list[Exchange] | None = None
        self._weight = 0
        if history is not None or transcript is not None:
            self.replace(history or [], transcript or [])

    # --- the branch shown ----------------------------------------------------------------

    def missing(self, last: int | None = None) -> list[Position]:
        """Positions of the branch shown (its `last` exchanges only, when given) not in
        hand: what to load before using it."""
        return [p for p in self.lines.positions(start=self._start(last)) if p not in self.exchanges]

    def _start(self, last: int | None) -> int:
        return 0 if last is None else max(0, self.lines.depth - last)

    def held(self, exchanges: Iterable[Exchange], last: int | None = None) -> None:
        """The exchanges `missing(last)` named are loaded: keep them in hand."""
        self.hold(exchanges)
        start = self._start(last)
        self.held_from = start if self.held_from is None else min(self.held_from, start)

    def _whole(self) -> None:
        if self.held_from != 0:
            raise LookupError(f"{self.id}: its branch is not all loaded (see Store.load_branch)")

    def hold(self, exchanges: Iterable[Exchange]) -> None:
        """Keep these exchanges (loaded from the store, or new) in hand."""
        for exchange in exchanges:
            previous = self.exchanges.get(exchange.position)
            self._weight -= previous.counted if previous else 0
            self.exchanges[exchange.position] = exchange
            exchange.counted = exchange.weight
            self._weight += exchange.counted
        self._branch = None

    def branch(self) -> list[Exchange]:
        """The exchanges of the branch shown in hand (from `held_from`), in order."""
        if self._branch is None:
            if self.held_from is None:
                raise LookupError(f"{self.id}: its branch is not loaded (see Store.load_branch)")
            positions = self.lines.positions(start=self.held_from)
            self._branch = [self.exchanges[p] for p in positions]
        return self._branch

    def _new_exchange(self, *, fork: Position | None) -> Exchange:
        """A new exchange after the leaf (or beside `fork`, with the whole branch in
        hand); it becomes the leaf."""
        if fork is not None:
            self._whole()
        elif self.held_from is None:
            raise LookupError(f"{self.id}: its branch is not loaded (see Store.load_branch)")
        position = self.lines.fork_beside(fork) if fork else self.lines.append()
        exchange = Exchange(position, changed=True)
        branch = self._branch
        self.hold([exchange])
        self.touched[position] = exchange
        if branch is not None and fork is None:  # an append: the branch grows by one
            branch.append(exchange)
            self._branch = branch
        return exchange

    @property
    def history(self) -> History:
        """The agent's internal messages (system prompt, user, tool, assistant)."""
        return History(self.preamble, self.branch())

    @history.setter
    def history(self, messages: list[Message]) -> None:
        self.replace(messages, self.transcript)

    @property
    def transcript(self) -> list[dict[str, Any]]:
        """The public turns of the branch shown."""
        turns: list[dict[str, Any]] = json.loads(json_array(self.transcript_turns()))
        return turns

    def transcript_turns(self) -> list[bytes]:
        """The public turns of the branch shown, as JSON (`branch_turns`)."""
        self._whole()
        window = self.lines.window()
        assert window is not None
        return branch_turns(window, [e.turns_json().encode() for e in self.branch()])

    @property
    def status(self) -> wire.ConversationStatus:
        if self.checkpoint is not None:
            return "waiting"
        return "running" if self.active_run is not None else "idle"

    def replace(self, history: Sequence[Message], transcript: Sequence[dict[str, Any]]) -> None:
        """Make the conversation these messages and turns, as one line (a migration of a
        record kept whole, a test)."""
        from thinwire.legacy import exchanges_of

        preamble, exchanges = exchanges_of(history, transcript)
        self.clear()
        self.preamble = list(preamble)
        for messages, turns in exchanges:
            exchange = self._new_exchange(fork=None)
            exchange.messages.extend(messages)
            exchange.turns.extend(with_ids(turns, exchange.position))
        self.recount()

    def recount(self) -> None:
        """The list's figures from the branch shown, after it changed: its turns counted
        in each exchange's text, and the latest text found from the end."""
        self._whole()
        branch = self.branch()
        self.turn_count = sum(e.turn_count for e in branch)
        self.preview = ""
        for exchange in reversed(branch):
            latest = next((t["text"] for t in reversed(exchange.turns) if t.get("text")), "")
            if latest:
                self.preview = shortened(latest, PREVIEW)
                return

    def _counted_turn(self, text: str) -> None:
        """A turn joined the end of the branch shown."""
        self.turn_count += 1
        if text:
            self.preview = shortened(text, PREVIEW)

    def clear(self) -> None:
        """Forget the conversation but its preamble (the system prompt); state and id
        stay."""
        self.lines.clear()
        self.exchanges, self.touched, self._branch, self._weight = {}, {}, [], 0
        self.held_from = 0
        self.cleared = True
        self.turn_count, self.preview = 0, ""
        if self.title_source == "auto":  # the start of a message that is gone now
            self.title = self.title_source = None

    @property
    def latest_exchange(self) -> Exchange | None:
        """The last exchange of the branch shown, when it is in hand."""
        leaf = self.lines.leaf
        return self.exchanges.get(leaf) if leaf is not None else None

    def has_user_turn(self, message_id: str) -> bool:
        """Whether `message_id` is the id of one of the conversation's user turns, on any
        branch: a message a client has from the server (a transcript, a snapshot)."""
        if not TURN_ID.fullmatch(message_id):
            return False
        position, role, _ = parse_turn_id(message_id)
        return role == "u" and self.lines.holds(position)

    def show(self, position: Position) -> None:
        """Show the branch through the exchange at `position`: load it before use."""
        self._whole()
        self.lines.show(position)
        self.held_from = None if self.missing() else 0
        self._branch = None

    def may_name(self, source: TitleSource) -> bool:
        current = self.title_source
        return current is None or TITLE_SOURCES.index(source) >= TITLE_SOURCES.index(current)

    def name(self, title: str, source: TitleSource) -> None:
        """Title the conversation, unless someone who outranks `source` did."""
        if self.may_name(source):
            self.title = shortened(title, AUTO_TITLE if source == "auto" else TITLE_LENGTH)
            self.title_source = source

    # --- run state ----------------------------------------------------------------------

    @property
    def pending_interrupt(self) -> dict[str, Any] | None:
        """The public request of the decision the conversation waits for, if any."""
        return self.checkpoint.interrupt if self.checkpoint else None

    @property
    def running_exchange(self) -> Exchange:
        """The exchange the run in progress writes: the branch's last."""
        assert self.lines.leaf is not None
        exchange = self.exchanges[self.lines.leaf]
        self.touched[exchange.position] = exchange
        return exchange

    def start_run(
        self,
        run_id: str,
        text: str | None,
        *,
        data: dict[str, Any] | None = None,
        message_id: str | None = None,
        fork: Position | None = None,
        at: float = 0.0,
        resumed: Checkpoint | None = None,
    ) -> int | None:
        """A run starts `at`, on the user's `text` (None: it continues the last exchange,
        after the decision `resumed` waited for) with the page's `data`, sent as
        `message_id`; in a new exchange after the last, or beside `fork`. Returns the first
        seq of the run before, whose frames the store may now drop."""
        previous = self.last_run
        if text is not None:
            exchange = self._new_exchange(fork=fork)
            position = exchange.position
            message: Message = {"role": "user", "content": text}
            if data:
                message["data"] = data
            exchange.messages.append(message)
            turn = public_turn("user", text, id=turn_id(position, "user", 0))
            turn["meta"]["startedAt"] = turn["meta"]["finishedAt"] = at
            exchange.turns.append(turn)
            if self.title is None:
                self.name(text, "auto")
            if fork is None:
                self._counted_turn(text)
            else:
                self.recount()
            if message_id is not None:
                self.sends[message_id] = run_id
                for oldest in list(self.sends)[: max(0, len(self.sends) - SENDS_KEPT)]:
                    del self.sends[oldest]
        kept = resumed.kept if resumed is not None else None
        self.active_run = ActiveRun(run_id, self.last_seq + SEQ_LEASE, at, kept)
        self.last_run = LastRun(run_id, self.last_seq + 1)
        return previous.first_seq if previous else None

    def next_turn_ids(self) -> tuple[str, str | None, str | None]:
        """The ids of the reply the running run writes, of the user's turn it answers
        (None when it continues a reply, after a decision), and of the turn its first new
        turn follows (None for the first, or an exchange before that is not in hand)."""
        exchange = self.running_exchange
        replies = sum(1 for t in exchange.turns if t["role"] == "assistant")
        user = turn_id(exchange.position, "user", 0) if replies == 0 else None
        return turn_id(exchange.position, "assistant", replies), user, self._turn_before(exchange)

    def _turn_before(self, exchange: Exchange) -> str | None:
        if exchange.turns and exchange.turns[-1]["role"] == "assistant":
            return str(exchange.turns[-1]["id"])  # continuing a reply: the one it continues
        position = exchange.position
        parent = self.lines.parent_line(position)
        before = (
            None if parent is None else self.exchanges.get(Position(parent, position.depth - 1))
        )
        return str(before.turns[-1]["id"]) if before is not None and before.turns else None

    def end_turn(
        self,
        stop_reason: wire.StopReason,
        text: str,
        tool_calls: Sequence[str] = (),
        *,
        said_before: str = "",
        shown: Shown | None = None,
    ) -> None:
        """The run ends: its reply joins the history (with what it said before a
        suspension, `said_before`) and, unless it showed nothing, the transcript."""
        exchange = self.running_exchange
        exchange.changed = True
        exchange.messages.append(
            {"role": "assistant", "content": said_before + text, "stopReason": stop_reason}
        )
        if text or tool_calls or stop_reason != "end":
            self._add_reply(exchange, stop_reason, text, tool_calls, shown)
        self.active_run = None

    def _add_reply(
        self,
        exchange: Exchange,
        stop_reason: wire.StopReason,
        text: str,
        tool_calls: Sequence[str],
        shown: Shown | None,
        asked: dict[str, Any] | None = None,
    ) -> None:
        shown = shown or Shown()
        reply_id, _, _ = self.next_turn_ids()
        exchange.turns.append(
            public_turn(
                "assistant",
                text,
                id=reply_id,
                toolCalls=list(tool_calls),
                stopReason=stop_reason,
                thinking=shown.thinking,
                activity=shown.activity,
                meta=shown.meta,
                asked=asked,
            )
        )
        self._counted_turn(text)

    def add_usage(self, run_id: str, usage: Mapping[str, Mapping[str, int]], at: float) -> None:
        """Count a run's model tokens (per model: calls, inputTokens, outputTokens)."""
        total = self.usage["total"]
        for model, counts in usage.items():
            kept = total.setdefault(model, {"calls": 0, "inputTokens": 0, "outputTokens": 0})
            for name, count in counts.items():
                kept[name] = kept.get(name, 0) + count
        runs = [*self.usage["runs"], {"runId": run_id, "at": at, "models": dict(usage)}]
        self.usage["runs"] = runs[-USAGE_KEPT:]

    def suspend(
        self,
        checkpoint: Checkpoint,
        text: str,
        tool_calls: Sequence[str],
        *,
        rollback_to: int,
        shown: Shown | None = None,
    ) -> None:
        """The run asks a person. Its resume replays it from its start, so its exchange's
        messages go back to the first `rollback_to` (the steps are in the checkpoint's
        journal)."""
        exchange = self.running_exchange
        exchange.changed = True
        del exchange.messages[rollback_to:]
        self.checkpoint = checkpoint
        # The public request only, as its `interrupt` frame carried it: the transcript
        # keeps the question after it stops being pending.
        asked = {"request": checkpoint.interrupt, "status": "waiting"}
        self._add_reply(exchange, "interrupted", text, tool_calls, shown, asked)
        self.active_run = None

    def waiting_for(self, interrupt_id: str) -> Checkpoint:
        """The checkpoint waiting for `interrupt_id`, or `interrupt_answered` /
        `interrupt_not_found`."""
        checkpoint = self.checkpoint
        if checkpoint is None or checkpoint.interrupt_id != interrupt_id:
            if interrupt_id in self.answered:
                raise Conflict(
                    "interrupt_answered",
                    "that question was answered already (in another tab, say)",
                )
            raise NotFound("interrupt_not_found", "no such question waits for an answer")
        return checkpoint

    def resume(self, interrupt_id: str, decision: Any = None) -> Checkpoint:
        """The pending interrupt `interrupt_id` is answered with `decision`: the
        checkpoint, to replay. The reply that asked keeps the answer (the user's own
        input, public to them)."""
        checkpoint = self.waiting_for(interrupt_id)
        self.checkpoint = None
        self.answered = [*self.answered, interrupt_id][-ANSWERED_KEPT:]
        self._settle_asked(interrupt_id, {"status": "answered", "decision": decision})
        return checkpoint

    def _settle_asked(self, interrupt_id: str, outcome: dict[str, Any]) -> None:
        """The reply that asked `interrupt_id` learns how that ended."""
        exchange = self.running_exchange
        exchange.changed = True
        for turn in reversed(exchange.turns):
            asked = turn.get("asked")
            if asked is not None and asked["request"]["interruptId"] == interrupt_id:
                asked.update(outcome)
                return

    def end_waiting_run(self) -> Checkpoint:
        """A stop while the run waits for a person: the reply that asked ends there, as
        stopped, unanswered, and the history keeps what the run did and said, as after a
        stop at any other point (its AgentState is the caller's to bring back)."""
        checkpoint = self.checkpoint
        assert checkpoint is not None
        self.checkpoint = None
        if self.last_run is not None:  # a reattach must not show the question again
            self.last_run = LastRun(self.last_run.run_id, self.last_run.first_seq, True)
        exchange = self.running_exchange
        exchange.changed = True
        if checkpoint.kept is not None:
            exchange.messages.extend(checkpoint.kept["messages"])
        replies = [turn for turn in exchange.turns if turn["role"] == "assistant"]
        replies[-1]["stopReason"] = "stopped"
        self._settle_asked(checkpoint.interrupt_id, {"status": "stopped"})
        said = "".join(turn["text"] for turn in replies)  # across its earlier resumes too
        exchange.messages.append({"role": "assistant", "content": said, "stopReason": "stopped"})
        return checkpoint

    def end_killed_run(
        self,
        text: str = "",
        calls: Sequence[Mapping[str, Any]] = (),
        *,
        thinking: str = "",
        at: float | None = None,
        stop_reason: wire.StopReason = "interrupted",
    ) -> ActiveRun:
        """The process running the active run died: its turn ends as interrupted (or
        `stopped`, when a stop was asked for and could not reach it), with
        what it had shown (`text`, `calls`, `thinking`), finished `at` (when that was found),
        and frame numbering resumes past anything it could have sent. A run resuming
        after a decision keeps what the run that asked had done by then, as a stop while
        it waited would (its AgentState is the caller's to bring back, from `kept`).

        The tool calls its frames showed (`calls`: name, and `ok` as far as a result was
        shown) are its turn's activity and are named in its history message: what the
        run recorded of them was never saved, and a model must still learn they ran."""
        active = self.active_run
        assert active is not None
        said_before = ""
        if active.kept is not None:
            exchange = self.running_exchange
            exchange.messages.extend(active.kept["messages"])
            said_before = "".join(t["text"] for t in exchange.turns if t["role"] == "assistant")
        self.end_turn(
            stop_reason,
            text,
            [call["name"] for call in calls],
            said_before=said_before,
            shown=Shown(
                thinking=thinking,
                activity=[dict(call) for call in calls],
                meta={"finishedAt": at},
            ),
        )
        if calls:
            summary = self.running_exchange.messages[-1]
            summary["calls"] = [{"name": call["name"], "ok": call["ok"]} for call in calls]
        self.last_seq = max(self.last_seq, active.seq_lease)
        return active

    # --- storage ------------------------------------------------------------------------

    def changed_exchanges(self) -> list[Exchange]:
        """What a save writes: the exchanges that changed (all in hand after a clear)."""
        if self.cleared:
            return list(self.exchanges.values())
        return [e for e in self.touched.values() if e.changed]

    def saved(self, *, compact: bool = True) -> None:
        """The store holds what is in hand: nothing changed any more. With `compact` (a
        context at rest) the exchanges that did are held as text from here on (see
        `Exchange.compact`)."""
        for exchange in self.touched.values():
            exchange.changed = False
            if compact:
                exchange.compact()
            weight = exchange.weight
            self._weight += weight - exchange.counted
            exchange.counted = weight
        self.touched = {}
        self.cleared = False

    @property
    def weight(self) -> int:
        """Roughly the bytes this record holds, for a cache that counts them (as of the
        last save or load: a run's growth is counted when it is saved)."""
        return 2048 + 64 * len(self.preamble) + self._weight

    def rest_json(self) -> dict[str, Any]:
        """Everything but the exchanges."""
        return {
            "state": self.state,
            "lastSeq": self.last_seq,
            "activeRun": self.active_run.to_json() if self.active_run else None,
            "lastRun": self.last_run.to_json() if self.last_run else None,
            "suspended": self.checkpoint.to_json() if self.checkpoint else None,
            "answered": self.answered,
            "sends": self.sends,
            "usage": self.usage,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "title": self.title,
            "titleSource": self.title_source,
            "preamble": self.preamble,
            "branches": self.lines.to_json(),
            "turnCount": self.turn_count,
            "preview": self.preview,
        }

    @classmethod
    def from_json(
        cls, *, id: str, agent: str, owner: str, version: int, data: dict[str, Any]
    ) -> ContextRecord:
        """A record from `rest_json`'s fields. A record written whole by an earlier
        version (with "history" and "transcript") is turned into exchanges: the next
        save stores them as such."""
        active, last, checkpoint = data["activeRun"], data.get("lastRun"), data.get("suspended")
        record = cls(
            id=id,
            agent=agent,
            owner=owner,
            version=version,
            state=data["state"],
            last_seq=data["lastSeq"],
            active_run=ActiveRun.from_json(active) if active else None,
            last_run=LastRun.from_json(last) if last else None,
            checkpoint=Checkpoint.from_json(checkpoint) if checkpoint else None,
            answered=data.get("answered", []),
            sends=data.get("sends", {}),
            usage=data.get("usage"),
            created_at=data["createdAt"],
            updated_at=data["updatedAt"],
            title=data.get("title"),
            title_source=data.get("titleSource"),
            preamble=data.get("preamble", []),
            lines=Lines.from_json(data.get("branches")),
            turn_count=data.get("turnCount", 0),
            preview=data.get("preview", ""),
        )
        record.held_from = 0 if record.lines.leaf is None else None  # nothing in hand yet
        if "history" in data:
            record.replace(data["history"], data.get("transcript", []))
            first_user = next((m for m in record.history if m.get("role") == "user"), None)
            if first_user is not None and record.title is None:
                record.name(first_user.get("content", ""), "auto")
        return record

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ContextRecord):
            return NotImplemented

        def whole(record: ContextRecord) -> tuple[Any, ...]:
            return (
                record.id,
                record.agent,
                record.owner,
                record.version,
                record.rest_json(),
                list(record.history),
                record.transcript,
            )

        return whole(self) == whole(other)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"ContextRecord(id={self.id!r}, agent={self.agent!r}, version={self.version})"


def with_ids(turns: Iterable[dict[str, Any]], position: Position) -> list[dict[str, Any]]:
    """Turns as the current wire model has them, with their ids in `position`."""
    out = []
    replies = 0
    for turn in turns:
        fields = {k: v for k, v in turn.items() if k not in ("id", "role", "text")}
        role = turn.get("role", "assistant")
        if role == "user":
            fields["id"] = turn_id(position, "user", 0)
        else:
            fields["id"] = turn_id(position, "assistant", replies)
            replies += 1
        out.append(public_turn(role, turn.get("text", ""), **fields))
    return out


def branch_turns(window: Window, texts: Iterable[bytes]) -> list[bytes]:
    """The public turns of a page of a branch, as the items of one JSON array (see
    `json_array`), from each exchange's turns as stored (`texts`: a JSON array, UTF-8,
    per exchange of `window` in order). Only the turns of an exchange with siblings are
    decoded, to say how many and which."""
    items = [text.strip()[1:-1].strip() for text in texts]
    for depth, (count, index) in window.forks.items():  # a branch has one exchange a depth
        items[depth - window.start] = with_siblings(items[depth - window.start], count, index)
    return items


def json_array(items: Sequence[bytes], before: bytes = b"", after: bytes = b"") -> bytes:
    """A JSON array of `items` (each one or more JSON values joined by commas; empty ones
    are left out), between `before` and `after`: the items are copied once, where a `+`
    of long bytes would copy them at every step."""
    return b"".join((before, b"[", b",".join(filter(None, items)), b"]", after))


def with_siblings(items: bytes, count: int, index: int) -> bytes:
    """An exchange's turns (what is between their array's brackets) told how many
    siblings their exchange has and which it is."""
    decoded = json.loads(b"[" + items + b"]")
    for turn in decoded:
        turn["siblings"], turn["siblingIndex"] = count, index
    return dumps(decoded)[1:-1].encode()


@dataclass(frozen=True)
class TranscriptView:
    """What reading a conversation back needs, and no more: a store can load it without
    the history, which is most of a long conversation's record."""

    agent: str
    owner: str
    title: str | None
    #: The turns of the page read (`Page`; the branch shown by default), as the items of a
    #: JSON array (`json_array`): the turns of an exchange or of several, UTF-8, ready to
    #: be sent. None when the page's `before` is no exchange of the conversation.
    turns: list[bytes] | None
    active_run: ActiveRun | None
    #: The public request of the interrupt the conversation waits for, if any.
    pending_interrupt: dict[str, Any] | None
    #: Exchanges precede the page.
    has_earlier: bool = False

    @classmethod
    def of(cls, record: ContextRecord, window: Window | None, turns: list[bytes]) -> TranscriptView:
        """The view of a record read without its exchanges, with the `turns` of `window`
        (the page asked for; None when it is not there)."""
        return cls(
            agent=record.agent,
            owner=record.owner,
            title=record.title,
            turns=None if window is None else turns,
            active_run=record.active_run,
            pending_interrupt=record.pending_interrupt,
            has_earlier=window is not None and window.has_earlier,
        )
