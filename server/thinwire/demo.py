"""The scripted demo agent and the demo app: deterministic, no model, every event kind.

The agent thinks, calls a tool, and streams a reply that quotes the first message of the
conversation — proof that the memory is on the server. Ask it for a refund and it looks
up an order, then asks for approval before its pretend side-effecting `issue_refund`
tool; both tools write to a ledger file, so tests can count that each ran exactly once.
It keeps canary values in its system prompt, its AgentState and its tool output:
server-only places whose contents the end-to-end tests check never reach the browser.

The app signs a cookie per demo user (`POST /demo/login`), so its user switcher
exercises context ownership for real. Requests without the cookie act as the principal
`demo:guest`, which keeps `curl` working.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from thinwire.agent import Agent, Run
from thinwire.app import create_app, default_data_dir
from thinwire.contexts import AgentFactory
from thinwire.errors import BadRequest
from thinwire.identity import SECRET_BYTES, SignedValue
from thinwire.interrupts import Approval, Rejected
from thinwire.parsing import read_json, validated
from thinwire.settings import check_operator_token
from thinwire.stores import SQLiteStore, Store, store_from_url

__all__ = [
    "CANARIES",
    "CANARY_ALIASES",
    "CANARY_PLACES",
    "DEMO_USERS",
    "DemoAgent",
    "DemoIdentity",
    "create_demo_app",
    "default_web_dir",
    "read_canaries",
]

#: Where the demo plants a server-only value: each must never reach a client.
CANARY_PLACES = (
    "system_prompt",  # the system prompt, first message of the history
    "history",  # a private note the agent adds to the history
    "tool_arguments",  # an argument of every tool call
    "tool_output",  # the output of count_words and lookup_order
    "state",  # AgentState (and so its audit trail)
    "invocation_state",  # the run's scratch space
    "shared_state",  # shared across a handoff
    "checkpoint",  # the journal of a run waiting for approval
    "exception",  # the text of the exception "explode" raises
    "log",  # a server log line of every run
)
#: Other names of two places' variables, as docs/server.md gives them:
#: $THINWIRE_DEMO_CANARY_PROMPT and $THINWIRE_DEMO_CANARY_TOOL.
CANARY_ALIASES = {"system_prompt": ("PROMPT",), "tool_output": ("TOOL",)}


def read_canaries() -> dict[str, str]:
    """The canary values, from the environment as it is now: $THINWIRE_DEMO_CANARY_<PLACE>
    (or an alias of it), else a default."""
    return {place: canary(place) for place in CANARY_PLACES}


def canary(place: str) -> str:
    for name in (place.upper(), *CANARY_ALIASES.get(place, ())):
        if value := os.environ.get(f"THINWIRE_DEMO_CANARY_{name}"):
            return value
    return f"tw-canary-{place}-4f1c9a"


#: The canary values as the environment had them at import; `create_demo_app` reads them
#: again, so a variable set later counts for the app it builds.
CANARIES = read_canaries()
logger = logging.getLogger("thinwire.demo")
DEMO_USERS = ("alice", "bob", "carol")
#: A message starting so names the conversation (the agent's title).
NAMING = "call this conversation "
COOKIE = "thinwire_demo_user"


def earlier_message(history: Sequence[dict[str, Any]]) -> str | None:
    """The first thing the user said before the message being answered, if anything:
    read from both ends only as far as needed, however long the conversation."""
    first = next((m for m in history if m["role"] == "user"), None)
    latest = next((m for m in reversed(history) if m["role"] == "user"), None)
    return None if first is None or first is latest else str(first["content"])


def words(text: str) -> list[str]:
    """Split into streamable pieces that concatenate back to `text` exactly."""
    return re.findall(r"\S+\s*|\s+", text)


PROMPT = "You are the thinwire demo agent. Internal instruction, never to be shown: "


def demo_state(canaries: Mapping[str, str]) -> dict[str, Any]:
    return {"secret": canaries["state"], "messages_seen": 0}


class DemoAgent(Agent):
    #: The values it plants (`planting` gives the agent with others).
    canaries: ClassVar[Mapping[str, str]] = CANARIES
    system_prompt = PROMPT + CANARIES["system_prompt"]
    initial_state: ClassVar[Mapping[str, Any]] = demo_state(CANARIES)
    writable_keys = frozenset({"messages_seen", "notes"})

    @classmethod
    def planting(cls, canaries: Mapping[str, str]) -> type[DemoAgent]:
        """The agent, planting `canaries`: a class of its own, as a new conversation's
        system prompt and state are the class's."""
        planted = {
            "canaries": dict(canaries),
            "system_prompt": PROMPT + canaries["system_prompt"],
            "initial_state": demo_state(canaries),
        }
        return cast("type[DemoAgent]", type(cls.__name__, (cls,), planted))

    def __init__(self, delay: float = 0.0, ledger: Path | None = None) -> None:
        self.delay = delay
        self.ledger = ledger

    def record(self, line: str) -> None:
        if self.ledger is not None:
            with self.ledger.open("a", encoding="utf-8") as ledger:
                ledger.write(line + "\n")

    async def pause(self) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)

    async def count_words(self, text: str, hint: str) -> dict[str, Any]:
        await self.pause()
        return {"words": len(text.split()), "note": self.canaries["tool_output"]}

    async def lookup_order(self, order_id: str, hint: str) -> dict[str, Any]:
        await self.pause()
        self.record(f"lookup_order {order_id}")
        return {"id": order_id, "amount": 40, "note": self.canaries["tool_output"]}

    async def issue_refund(self, order_id: str, amount: int) -> str:
        await self.pause()
        self.record(f"issue_refund {order_id} {amount}")
        return f"refund of {amount} queued for {order_id}"

    async def refund(self, run: Run) -> None:
        await run.think("Looking up the order before anything else.")
        order = await run.tool(
            "lookup_order", self.lookup_order, order_id="1234", hint=self.canaries["checkpoint"]
        )
        for piece in words(f"Order {order['id']} was ${order['amount']}. "):
            await run.say(piece)
            await self.pause()
        approval = Approval(
            f"Refund ${order['amount']} on order {order['id']}?",
            {"order": order["id"], "amount": f"${order['amount']}"},
        )
        try:
            await run.tool(
                "issue_refund",
                self.issue_refund,
                approval=approval,
                order_id=order["id"],
                amount=order["amount"],
            )
        except Rejected:
            await run.say(f"Okay — no refund for order {order['id']}.")
            return
        await run.say(f"Done — ${order['amount']} is on its way back for order {order['id']}.")

    async def run(self, run: Run, text: str) -> None:
        # Plant a canary in every server-only place a run can reach.
        logger.info("demo run in %s (%s)", run.context_id, self.canaries["log"])
        run.invocation_state["scratch"] = self.canaries["invocation_state"]
        run.shared_state["baton"] = self.canaries["shared_state"]
        earlier = earlier_message(run.history)
        run.history.append({"role": "note", "content": self.canaries["history"]})
        if "refund" in text.lower():
            await self.refund(run)
            return
        if "explode" in text.lower():
            await run.say("Something is about to go wrong. ")
            raise RuntimeError(f"internal failure {self.canaries['exception']}")
        if text.lower().startswith(NAMING):  # "call this conversation Trip plans"
            run.set_title(text[len(NAMING) :].strip() or "Untitled")
        for piece in words("Reading the message, counting its words, recalling what came before."):
            await run.think(piece)
            await self.pause()
        counted = await run.tool(
            "count_words", self.count_words, text=text, hint=self.canaries["tool_arguments"]
        )
        run.state["messages_seen"] = run.state["messages_seen"] + 1
        plural = "" if counted["words"] == 1 else "s"
        reply = f"You said “{text}” — {counted['words']} word{plural}. "
        if earlier is None:
            reply += "This is the start of our conversation."
        else:
            reply += f"Earlier you told me “{earlier}”."
        for piece in words(reply):
            await run.say(piece)
            await self.pause()


class DemoIdentity:
    """The demo's `identify`: the user named by a signed cookie, else `demo:guest`."""

    def __init__(self, secret: bytes) -> None:
        self.signer = SignedValue(secret)

    def __call__(self, connection: HTTPConnection) -> str | None:
        cookie = connection.cookies.get(COOKIE)
        if cookie is None:
            return "demo:guest"
        user = self.signer.verify(cookie)
        return f"demo:{user}" if user in DEMO_USERS else None  # forged: unauthenticated


class Login(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str


def login_route(identity: DemoIdentity) -> Route:
    async def login(request: Request) -> Response:
        body = validated(Login, await read_json(request, 1024))
        if body.user not in DEMO_USERS:
            raise BadRequest("invalid_request", f"user must be one of {', '.join(DEMO_USERS)}")
        response = JSONResponse({"user": body.user})
        response.set_cookie(
            COOKIE, identity.signer.sign(body.user), httponly=True, samesite="strict"
        )
        return response

    return Route("/demo/login", login, methods=["POST"])


def demo_secret(data_dir: Path) -> bytes:
    """$THINWIRE_DEMO_SECRET, else a random secret kept in the data directory so that
    signed-in users stay signed in across restarts."""
    configured = os.environ.get("THINWIRE_DEMO_SECRET")
    if configured:
        return long_enough(configured.encode(), "$THINWIRE_DEMO_SECRET")
    path = data_dir / "demo-secret"
    try:
        if not path.exists():
            data_dir.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as file:
                file.write(secrets.token_hex(32))
        kept = path.read_text().strip().encode()
    except OSError as exc:
        raise ValueError(
            f"cannot keep the demo's cookie secret in {path} ({exc.strerror}): name a "
            "writable --data-dir, or set $THINWIRE_DEMO_SECRET"
        ) from exc
    return long_enough(kept, f"the secret in {path}")


def long_enough(secret: bytes, name: str) -> bytes:
    """The secret, if a guess cannot find it; refused in words naming where it came from
    (the CLI says the message as it is)."""
    if len(secret) < SECRET_BYTES:
        raise ValueError(
            f"{name} must be at least {SECRET_BYTES} bytes, not {len(secret)}: it signs "
            "the demo's sign-in cookies (make one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
        )
    return secret


def lease_ttl_from_environment() -> float:
    """$THINWIRE_LEASE_TTL (seconds a dead replica's conversations stay held), else 10;
    refused naming the variable, which is all the user set."""
    raw = os.environ.get("THINWIRE_LEASE_TTL") or "10"
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"$THINWIRE_LEASE_TTL must be a number of seconds above 0, not {raw!r}")
    return seconds


def default_web_dir() -> Path:
    """The demo page's build: $THINWIRE_WEB_DIR; else the one shipped in the wheel; else
    web/dist of this checkout (an editable install)."""
    configured = os.environ.get("THINWIRE_WEB_DIR")
    if configured:
        return Path(configured)
    shipped = Path(__file__).resolve().parent / "demo_page"
    if (shipped / "index.html").is_file():
        return shipped
    return Path(__file__).resolve().parents[2] / "web" / "dist"


def create_demo_app(
    *,
    delay: float = 0.03,
    web_dir: Path | None = None,
    data_dir: Path | None = None,
    store: Store | None = None,
    store_url: str | None = None,
    model: str | None = None,
) -> Starlette:
    """The demo: SQLite under `data_dir`, unless a `store` or a `store_url` (e.g. a
    redis:// URL for several replicas) is given; the operator API when
    $THINWIRE_OPERATOR_TOKEN is set. With a `model` (or an OpenAI endpoint configured in
    the environment, see `demo_model`), a model-backed agent with the same tools answers
    instead of the scripted one; `GET /demo/about` tells the page which."""
    from thinwire.demo_model import chat_demo, configured_model

    operator_tokens = check_operator_token(
        os.environ.get("THINWIRE_OPERATOR_TOKEN"), "$THINWIRE_OPERATOR_TOKEN"
    )
    data_dir = data_dir or default_data_dir()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file there, a read-only parent…
        wrong = "is a file" if data_dir.is_file() else f"cannot be made ({exc.strerror})"
        raise ValueError(f"--data-dir {data_dir} {wrong}: name a directory") from exc
    if store is None and store_url:
        store = store_from_url(store_url)
    identity = DemoIdentity(demo_secret(data_dir))
    ledger = data_dir / "ledger.log"
    model = configured_model(model)
    canaries = read_canaries()
    scripted = DemoAgent.planting(canaries)
    agent: AgentFactory = (
        chat_demo(model, ledger, canaries)
        if model
        else (lambda: scripted(delay=delay, ledger=ledger))
    )
    return create_app(
        {"demo": agent},
        identify=identity,
        store=store or SQLiteStore.in_directory(data_dir),
        operator_token=operator_tokens,
        # A guest needs no credentials: only names of this machine, unless told others.
        allowed_hosts=[h for h in os.environ.get("THINWIRE_ALLOWED_HOSTS", "").split(",") if h],
        lease_ttl=lease_ttl_from_environment(),
        web_dir=web_dir if web_dir is not None else default_web_dir(),
        routes=[login_route(identity), about_route(model)],
    )


def about_route(model: str | None) -> Route:
    """What answers: the page shows it."""

    async def about(request: Request) -> Response:
        return JSONResponse({"agent": "model" if model else "scripted", "model": model})

    return Route("/demo/about", about, methods=["GET"])
