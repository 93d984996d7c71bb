"""The WebSocket transport: the same frames and the same commands as HTTP, one socket.

    client -> server   {"type": "send" | "attach" | "stop" | "decide" | "edit" |
                        "regenerate", ...}                                    (wire.Command)
    server -> client   frames of every run the socket follows, and `rejected` for a
                       command the server refused (the equivalent of an HTTP 4xx)

A socket may follow several contexts; frames carry their `contextId`. A command's
`requestId` comes back in the `run_start` of the run it started, or in the `rejected`
that refused it, so a client with several commands in flight knows which is which.
Closing the socket stops nothing: runs go on and can be attached again.

While a run the socket follows is quiet, the server sends `{"type": "heartbeat"}` after
`heartbeat_interval` seconds of silence, and never after more than `HEARTBEAT_SECONDS`
(even with heartbeats off): a socket has no header to name the interval in, so a client
takes a socket silent for twice `HEARTBEAT_SECONDS` while it follows a run as broken —
a half-open connection (a NAT that forgot it, a stuck proxy) shows nothing else.

Hostile input is answered, then the socket is closed with the code that says why —
binary data 1003, text that is not a JSON object 1007, a message over the size limit
1009, another protocol version 1002, no principal 4401, too many streams open for the
principal 4429 — and nobody else is affected. A JSON object that is no command (a field
wrong, or a type this server does not know) is only refused: the socket goes on.

A browser cannot put headers on a WebSocket: an app that authenticates with a header
opens it with a ticket (`POST /agents/{agent}/tickets`, then `…/ws?ticket=…`; see
`tickets.py`); otherwise the page's cookies identify it.
A cookie-authenticated socket from another site's page is refused at the handshake
(cross-site WebSocket hijacking): the Origin must be this host or an allowed one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, get_args

from pydantic import TypeAdapter, ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from thinwire import wire
from thinwire.browser import cross_site, refuse_handshake
from thinwire.direct import connection_dropper, message_writer
from thinwire.errors import (
    BadRequest,
    Forbidden,
    PayloadTooLarge,
    ThinwireError,
    TooManyRequests,
    Unauthorized,
)
from thinwire.ids import CONTEXT_ID
from thinwire.metrics import METRICS
from thinwire.parsing import check_data, check_message, describe, parse_json
from thinwire.runlog import Batch, Follower, FrameSource
from thinwire.server import AgentServer

__all__ = ["agent_socket"]

logger = logging.getLogger("thinwire.websocket")

SUBPROTOCOL = wire.WEBSOCKET_SUBPROTOCOL
#: Several frames to a message, one per line: preferred where the client offers it.
SUBPROTOCOL_LINES = wire.WEBSOCKET_SUBPROTOCOL_LINES
#: The longest a socket following a run stays silent: the interval a client assumes
#: (DEFAULT_HEARTBEAT_SECONDS in the client's silence.ts).
HEARTBEAT_SECONDS = 15.0
HEARTBEAT = wire.Heartbeat().model_dump_json()
#: Runs one socket may follow at once.
MAX_FOLLOWED = 32
COMMANDS: TypeAdapter[
    wire.SendCommand
    | wire.AttachCommand
    | wire.StopCommand
    | wire.DecideCommand
    | wire.EditCommand
    | wire.RegenerateCommand
] = TypeAdapter(wire.Command)


class Closing(Exception):
    """Answer with `rejected`, then close the socket with `code`."""

    def __init__(self, code: int, error: ThinwireError) -> None:
        self.code = code
        self.error = error


class Invalid(Exception):
    """A JSON object the server takes for no command (a field wrong, or a type it does not
    know, perhaps a newer client's): refused, and the socket goes on."""

    def __init__(self, error: ThinwireError, data: Mapping[str, Any]) -> None:
        self.error = error
        self.data = data


#: The commands' `type`s, which a refusal names.
COMMAND_TYPES: tuple[str, ...] = get_args(wire.CommandType)
REQUEST_ID = re.compile(wire.REQUEST_ID_PATTERN)


def agent_socket(server: AgentServer) -> Callable[[WebSocket], Any]:
    async def endpoint(websocket: WebSocket) -> None:
        if cross_site(websocket.scope, server.allowed_origins):
            refusal = Forbidden(
                "origin_not_allowed",
                "a page of another site may not open a socket with this site's credentials "
                "(create_app's allowed_origins does not list its origin)",
            )
            await refuse_handshake(websocket.scope, websocket.receive, websocket.send, refusal)
            return
        offered = websocket.scope.get("subprotocols", [])
        chosen = next((p for p in (SUBPROTOCOL_LINES, SUBPROTOCOL) if p in offered), None)
        await websocket.accept(subprotocol=chosen)
        session = Session(server, websocket, lines=chosen == SUBPROTOCOL_LINES)
        METRICS.stream_opened("websocket")
        try:
            if offered and chosen is None:
                raise Closing(
                    1002,
                    BadRequest("protocol_mismatch", f"this server speaks {SUBPROTOCOL}"),
                )
            agent_name = server.agent_name(websocket.path_params["agent"])
            try:
                principal = await principal_of(server, websocket, agent_name)
            except Unauthorized as exc:
                raise Closing(4401, exc) from exc
            try:
                close = server.streams.open(principal)  # an open socket is a stream too
            except TooManyRequests as exc:
                raise Closing(4429, exc) from exc
            try:
                await session.serve(agent_name, principal)
            finally:
                close()
        except Closing as closing:
            await session.reject(closing.error)
            await session.close(closing.code)
        except ThinwireError as exc:  # an unknown agent, or the app's identify failed
            await session.reject(exc)
            await session.close(4404 if exc.code == "agent_not_found" else 1011)
        except WebSocketDisconnect:
            pass
        finally:
            METRICS.stream_closed("websocket")
            session.end()

    return endpoint


async def principal_of(server: AgentServer, websocket: WebSocket, agent_name: str) -> str:
    """Who the socket acts for: the holder of its `?ticket=` (fetched over HTTP with the
    app's headers), else whoever `identify` finds (cookies)."""
    ticket = websocket.query_params.get("ticket")
    if ticket is None:
        return await server.principal(websocket)
    principal = await server.tickets.redeem(ticket, agent_name) if server.tickets else None
    if principal is None:
        raise Unauthorized("unauthenticated", "the ticket is not valid, used or expired")
    return principal


class Session:
    """One socket: its commands in, the frames of the runs it follows out."""

    def __init__(self, server: AgentServer, websocket: WebSocket, *, lines: bool = False) -> None:
        self.server = server
        self.websocket = websocket
        #: The client speaks `thinwire.v1.lines`: a batch of frames is one message.
        self.lines = lines
        self.followers: set[asyncio.Task[None]] = set()
        self.send_lock = asyncio.Lock()
        #: Writes a message to the connection itself, where the server allows (direct.py).
        self.direct = message_writer(websocket.scope)

    async def send(self, text: str) -> None:
        async with self.send_lock:
            await asyncio.wait_for(self.websocket.send_text(text), self.server.send_timeout)

    async def send_all(self, texts: list[str]) -> None:
        async with self.send_lock, asyncio.timeout(self.server.send_timeout):
            for text in self.messages(texts):
                await self.websocket.send_text(text)

    def send_batch(self, batch: Batch | None) -> Awaitable[None] | None:
        """A batch's frames (a message each, or one message of lines), or a heartbeat for
        None: written at once where they can be (None), else sent under the lock; timed by
        the pump."""
        if batch is None:
            texts: Sequence[str] = (HEARTBEAT,)
        elif len(batch) == 1:  # a model's token: the common case
            texts = (batch[0][1],)
        else:
            texts = self.messages([data for _, data in batch])
        direct = self.direct
        if direct is not None and not self.send_lock.locked():
            for i, text in enumerate(texts):
                if not direct(text):
                    return self.send_texts(texts[i:])
            return None
        return self.send_texts(texts)

    def messages(self, texts: Sequence[str]) -> Sequence[str]:
        if self.lines and len(texts) > 1:
            return ("\n".join(texts),)
        return texts

    async def send_texts(self, texts: Sequence[str]) -> None:
        async with self.send_lock:
            for text in texts:
                await self.websocket.send_text(text)

    async def reject(
        self, error: ThinwireError, command: wire.Command | Mapping[str, Any] | None = None
    ) -> None:
        """Answer a refused command (parsed, or the JSON object that was not one); every
        command gets an answer, whatever it held."""
        if isinstance(command, wire.WireModel):
            fields = command.model_dump(by_alias=True)
        else:
            fields = dict(command or {})
        kind, context_id, request_id = (
            fields.get(key) for key in ("type", "contextId", "requestId")
        )
        # Each echoed only when well formed: a hostile id (a lone surrogate, say) could
        # not even be encoded, and the command would go unanswered.
        frame = wire.RejectedFrame(
            code=error.code,
            message=error.message,
            retryable=error.retryable,
            command=kind if kind in COMMAND_TYPES else None,
            context_id=context_id if well_formed(CONTEXT_ID, context_id) else None,
            request_id=request_id if well_formed(REQUEST_ID, request_id) else None,
            interrupt_id=getattr(error, "interrupt_id", None),
        )
        with contextlib.suppress(Exception):
            await self.send(frame.model_dump_json(by_alias=True))

    async def close(self, code: int) -> None:
        with contextlib.suppress(Exception):  # the client may be gone already
            await self.websocket.close(code=code)

    async def serve(self, agent_name: str, principal: str) -> None:
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            try:
                command = self.parse(message)
            except Invalid as invalid:
                await self.reject(invalid.error, invalid.data)
                continue
            try:
                await self.handle(command, agent_name, principal)
            except ThinwireError as exc:
                await self.reject(exc, command)
            except Exception:
                reference = "err-" + secrets.token_hex(6)
                logger.exception("unexpected error on a WebSocket command (%s)", reference)
                error = ThinwireError("internal_error", f"Server error. Reference: {reference}.")
                await self.reject(error, command)

    def parse(self, message: Mapping[str, Any]) -> wire.Command:
        if message.get("bytes") is not None:
            raise Closing(1003, BadRequest("binary_not_supported", "send JSON text messages"))
        text: str = message.get("text") or ""
        if len(text) > self.server.max_body_bytes:  # chars <= bytes: a cheap first bound
            raise Closing(1009, PayloadTooLarge("body_too_large", "message too large"))
        try:
            data = parse_json(text)
        except BadRequest as exc:
            why = exc.message.removeprefix("body ")  # as HTTP says it, of a message
            raise Closing(1007, BadRequest("invalid_json", f"the message {why}")) from exc
        if not isinstance(data, dict):
            raise Closing(1007, BadRequest("invalid_json", "a command is a JSON object"))
        if data.get("type") not in COMMAND_TYPES:
            known = ", ".join(COMMAND_TYPES)
            raise Invalid(
                BadRequest("invalid_request", f"a command's type is one of {known}"), data
            )
        try:
            return COMMANDS.validate_python(data)
        except ValidationError as exc:
            raise Invalid(BadRequest("invalid_request", describe(exc, data)), data) from exc

    async def handle(self, command: wire.Command, agent_name: str, principal: str) -> None:
        server = self.server
        if isinstance(command, wire.StopCommand):
            await server.stop(await server.context(agent_name, command.context_id, principal))
            return
        if len(self.followers) >= MAX_FOLLOWED:
            # Each followed run costs a task; a flood of attaches must not grow them.
            METRICS.refused("too_many_streams")
            raise TooManyRequests("too_many_streams", f"follow at most {MAX_FOLLOWED} runs at once")
        # Counted before the command does anything: a refused follow starts no run.
        close = server.streams.open(principal)
        try:
            frames = await self.frames(command, agent_name, principal)
        except BaseException:
            close()
            raise
        self.forward(frames, close)

    async def frames(
        self,
        command: (
            wire.SendCommand
            | wire.AttachCommand
            | wire.DecideCommand
            | wire.EditCommand
            | wire.RegenerateCommand
        ),
        agent_name: str,
        principal: str,
    ) -> FrameSource:
        server = self.server
        if isinstance(command, wire.SendCommand):
            check_message(command.message.text, server.max_message_bytes)
            check_data(command.data, server.max_data_bytes)
            return await server.send(
                agent_name,
                principal,
                command.context_id,
                command.message.text,
                data=command.data,
                message_id=command.message_id,
                request_id=command.request_id,
                after_turn_id=command.after_turn_id,
            )
        context = await server.context(agent_name, command.context_id, principal)
        if isinstance(command, wire.DecideCommand):
            return await server.decide(
                context, command.interrupt_id, command.value, request_id=command.request_id
            )
        if isinstance(command, wire.EditCommand):
            check_message(command.message.text, server.max_message_bytes)
            check_data(command.data, server.max_data_bytes)
            return await server.edit(
                context,
                command.turn_id,
                command.message.text,
                data=command.data,
                message_id=command.message_id,
                request_id=command.request_id,
            )
        if isinstance(command, wire.RegenerateCommand):
            return await server.regenerate(
                context,
                turn_id=command.turn_id,
                message_id=command.message_id,
                request_id=command.request_id,
            )
        heartbeat = socket_heartbeat(server.heartbeat_interval)
        attached = await server.follow(context, command.after, heartbeat=heartbeat)
        if attached is None:
            raise ThinwireError("no_run", "there is no run to attach to")
        return attached

    def forward(self, frames: FrameSource, close: Callable[[], None]) -> None:
        """Send the frames as they come, in a task of their own; `close` ends the stream's
        count when it is over."""

        async def pump() -> None:
            try:
                # Whatever arrived since the last write goes out under one lock: a fast
                # run costs a lock per batch, not per frame. A live run's log is pumped
                # (see runlog.py): no task wake-up per frame, one timer for every socket.
                if isinstance(frames, Follower):
                    # Heartbeats come from the pump's one timer per event loop, after a
                    # silence only: no timer is set or cancelled per frame.
                    frames.heartbeat = socket_heartbeat(self.server.heartbeat_interval)
                    await frames.pump(self.send_batch, timeout=self.server.send_timeout)
                    return
                async for batch in frames.batches():
                    if batch is None:
                        await self.send(HEARTBEAT)
                    elif batch:
                        await self.send_all([data for _, data in batch])
            except TimeoutError:
                await self.drop_stalled()
            except Exception:  # the socket went away; the run goes on
                pass
            finally:
                close()

        task = asyncio.create_task(pump())
        self.followers.add(task)
        task.add_done_callback(self.followers.discard)

    async def drop_stalled(self) -> None:
        """A client that stopped reading would never read a close frame either: its
        connection is dropped, as a stalled SSE reader's is, which frees what the kernel
        buffers for it and ends the session (`receive` hears the disconnect), its streams
        with it. The client sees an abnormal closure (1006) and reattaches. Under a server
        this cannot reach, the socket is closed with 1013, as far as its buffer lets."""
        logger.warning("dropped a WebSocket that stopped reading")
        drop = connection_dropper(self.websocket.scope)
        if drop is not None:
            drop()
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.websocket.close(code=1013), self.server.send_timeout)

    def end(self) -> None:
        """Stop forwarding; the runs themselves go on."""
        for task in list(self.followers):
            task.cancel()


def socket_heartbeat(interval: float | None) -> float:
    """Seconds of a followed run's silence after which a socket gets a heartbeat."""
    return HEARTBEAT_SECONDS if interval is None else min(interval, HEARTBEAT_SECONDS)


def well_formed(pattern: re.Pattern[str], value: Any) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None
