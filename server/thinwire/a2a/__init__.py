"""Every agent of an app is also an A2A agent (protocol 1.0, JSON-RPC binding).

    GET  /a2a/{agent}/.well-known/agent-card.json   the agent card (public)
    POST /a2a/{agent}                               JSON-RPC: SendMessage,
                                                    SendStreamingMessage, GetTask,
                                                    CancelTask, SubscribeToTask, ListTasks

It is one more face of the same agents and memory, beside the HTTP and WebSocket ones:
an A2A `contextId` is a thinwire context id, a task is a user message and the runs that
answer it (`tasks.py`), and every call goes through `AgentServer` with the principal the
app's `identify` finds. The server keeps the memory; a client sends only the new message,
and reads only public frames, reshaped as A2A events. docs/interop.md has the map.

The protocol is implemented here from its specification; the server needs no A2A
package. The tests drive it with the official `a2a-sdk` client.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from thinwire.a2a.card import A2A, Security, Skill, agent_card
from thinwire.a2a.rpc import rpc_endpoint
from thinwire.identity import anonymous
from thinwire.server import AgentServer

__all__ = ["A2A", "Security", "Skill", "a2a_routes"]

CARD_PATH = "/.well-known/agent-card.json"


def a2a_routes(server: AgentServer, options: A2A) -> list[BaseRoute]:
    if not isinstance(options, A2A):
        raise TypeError(f"a2a must be a thinwire.a2a.A2A, not {type(options).__name__}")
    if server.identify is anonymous and options.security is not None:
        raise ValueError("with thinwire.anonymous no credential is read: leave out A2A(security=)")

    async def card(request: Request) -> Response:
        name = server.agent_name(request.path_params["agent"])
        # The endpoint is where the card was fetched from, however the app is mounted.
        url = str(request.url.replace(query="", fragment="")).removesuffix(CARD_PATH)
        body = agent_card(name, server.agents[name], url, options).json_body()
        # The body names the host it was asked of, so a cache keeps one copy per host.
        return JSONResponse(body, headers={"Cache-Control": "max-age=300", "Vary": "Host"})

    return [
        Route("/a2a/{agent}" + CARD_PATH, card, methods=["GET"]),
        Route("/a2a/{agent}", rpc_endpoint(server, options), methods=["POST"]),
    ]
