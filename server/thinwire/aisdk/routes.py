"""The routes `useChat` calls, with `DefaultChatTransport({api: "/ai-sdk/{agent}/chat"})`:

    POST {api}                      send, answer an interrupt, regenerate: a UI message stream
    GET  {api}/{chatId}/stream      the SDK's resume: the run in progress, replayed from its
                                    start (the SDK's default, `resumeStreamIsReplay`); 204
                                    when nothing runs
    POST {api}/{chatId}/stop        thinwire's stop: the SDK's `stop()` only aborts its fetch
    GET  {api}/{chatId}/messages    the conversation so far, as `UIMessage`s (a reload)

Every route acts for the principal `identify` finds, as thinwire's own routes do, and
every refusal is thinwire's typed JSON error. An aborted fetch stops nothing: the run
goes on and the page can resume it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from thinwire.aisdk.chat_request import Answer, Regenerate, read_chat_request
from thinwire.aisdk.chunks import Chunks
from thinwire.aisdk.messages import ui_messages
from thinwire.aisdk.rewrites import check_regenerate, check_sent_once
from thinwire.aisdk.stream import ui_message_stream
from thinwire.boundary import PROTOCOL_HEADERS
from thinwire.contexts import Context
from thinwire.foreign_ids import ForeignIds
from thinwire.parsing import read_no_fields
from thinwire.routes import caller, counted
from thinwire.runlog import FrameSource
from thinwire.server import AgentServer, active_run_id

__all__ = ["ai_sdk_routes"]

#: The SDK mints chat ids in the browser; each names a conversation of the caller's.
CHATS = ForeignIds("thinwire.ai-sdk", "chat id")


def ai_sdk_routes(server: AgentServer) -> list[BaseRoute]:
    async def stream(
        principal: str,
        frames: Callable[[], Awaitable[FrameSource | None]],
        chunks: Chunks | None = None,
    ) -> Response:
        """As thinwire's own streams: counted among the principal's open streams from
        before the work starts until the response ends."""
        source, close = await counted(server, principal, frames)
        if source is None:
            close()
            return Response(status_code=204, headers=PROTOCOL_HEADERS)
        return ui_message_stream(
            source, chunks or Chunks(), send_timeout=server.send_timeout, on_close=close
        )

    async def chat(request: Request) -> Response:
        agent_name, principal = await caller(server, request)
        chat_id, asks = await read_chat_request(
            request,
            max_body_bytes=server.max_body_bytes,
            max_message_bytes=server.max_message_bytes,
        )
        if isinstance(asks, Answer):
            context = await CHATS.owned(server, agent_name, principal, chat_id)
            return await stream(
                principal,
                lambda: server.decide(context, asks.interrupt_id, asks.value),
                Chunks(continues_message=True),
            )
        if isinstance(asks, Regenerate):
            context = await CHATS.owned(server, agent_name, principal, chat_id)
            check_regenerate(context.record, asks)
            return await stream(principal, lambda: server.regenerate(context))
        sent_to = await CHATS.find(server, agent_name, principal, chat_id)
        if sent_to is not None:
            check_sent_once(sent_to.record, asks)
        return await stream(
            principal,
            lambda: CHATS.send(
                server, agent_name, principal, chat_id, asks.text, message_id=asks.message_id
            ),
        )

    async def resume(request: Request) -> Response:
        agent_name, principal = await caller(server, request)
        context = await CHATS.find(server, agent_name, principal, request.path_params["chat_id"])
        if context is None:
            return Response(status_code=204, headers=PROTOCOL_HEADERS)
        return await stream(principal, lambda: follow_running(server, context))

    async def stop(request: Request) -> Response:
        agent_name, principal = await caller(server, request)
        context = await CHATS.owned(server, agent_name, principal, request.path_params["chat_id"])
        await read_no_fields(request, server.max_body_bytes)
        return JSONResponse(await server.stop(context), headers=PROTOCOL_HEADERS)

    async def messages(request: Request) -> Response:
        agent_name, principal = await caller(server, request)
        chat_id = request.path_params["chat_id"]
        transcript = await CHATS.transcript(server, agent_name, principal, chat_id)
        return JSONResponse(ui_messages(transcript) if transcript else [], headers=PROTOCOL_HEADERS)

    api = "/ai-sdk/{agent}/chat"
    return [
        Route(api, chat, methods=["POST"]),
        Route(f"{api}/{{chat_id}}/stream", resume, methods=["GET"]),
        Route(f"{api}/{{chat_id}}/stop", stop, methods=["POST"]),
        Route(f"{api}/{{chat_id}}/messages", messages, methods=["GET"]),
    ]


async def follow_running(server: AgentServer, context: Context) -> FrameSource | None:
    """The run in progress from its first frame; None when none is (a finished run is
    in the messages already, and replaying it would show it twice)."""
    run_id = active_run_id(context)
    return None if run_id is None else await server.follow(context, 0, run_id=run_id)
