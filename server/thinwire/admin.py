"""The operator control API: read and patch AgentState, read its audit trail; find, read
and forget a person's conversations.

Mounted at `/admin` only when an operator token is configured, and authenticated by that
bearer token alone: the UI's credentials (cookies, `identify`) open nothing here, and the
token opens nothing outside it. Never used by the UI.

    GET   /admin/agents/{agent}/contexts/{id}/state               state, writable keys, version
    PATCH /admin/agents/{agent}/contexts/{id}/state               {"state": {...}, "source"?}
    GET   /admin/agents/{agent}/contexts/{id}/state/{key}/history one key's audit trail
    GET   /admin/agents/{agent}/contexts/{id}/audit               the whole audit trail
    GET   /admin/agents/{agent}/contexts/{id}/usage               model tokens, in total and
                                                                  for the latest runs
    GET   /admin/agents/{agent}/contexts?owner=…                  a principal's conversations
    GET   /admin/agents/{agent}/contexts/{id}                     one: its record's metadata
                                                                  and (a page of) its transcript
    DELETE /admin/agents/{agent}/contexts/{id}                    forget one, as its owner can

A patch is atomic: every key lands, or — one key not writable (403 `write_denied`), one
value not JSON (400 `invalid_state_value`), a stale `If-Match` version (412
`version_mismatch`), a run in progress (409 `context_busy`) or waiting for a decision
(409 `decision_pending`) — none does. It is durable
before it is acknowledged, audited as `operator:<source>`.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from thinwire.contexts import Context
from thinwire.errors import BadRequest, NotFound, PreconditionFailed, Unauthorized
from thinwire.ids import validate_context_id
from thinwire.parsing import ascii_number, describe, page_of, read_json
from thinwire.state import SOURCE
from thinwire.stores import AuditEntry
from thinwire.stores.listing import page_size

if TYPE_CHECKING:
    from thinwire.server import AgentServer

__all__ = ["StatePatch", "is_operator", "operator_routes"]

MAX_PATCH_BYTES = 1024 * 1024

Handler = Callable[[Request], Awaitable[Response]]


class StatePatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: dict[str, Any] = Field(min_length=1, description="Keys to write, with their values.")
    source: str = Field(
        default="api",
        pattern=f"^{SOURCE}$",
        description="Who is writing, recorded in the audit trail as operator:<source>.",
    )


class IfMatch(NamedTuple):
    """The versions an `If-Match` accepts, and the weak tags it named, which match none."""

    versions: frozenset[int]
    weak: tuple[str, ...] = ()

    def named(self) -> str:
        return ", ".join([*(str(v) for v in sorted(self.versions)), *self.weak])


def parse_if_match(request: Request) -> IfMatch | None:
    """What `If-Match` accepts (RFC 9110: one tag, or a list of them — several headers
    make one list); None for any version (`*`, or no header). It compares strongly: a
    weak tag (`W/"3"`) matches no version."""
    headers = request.headers.getlist("if-match")
    if not headers or (len(headers) == 1 and headers[0].strip() == "*"):
        return None
    versions, weak = set(), []
    for tag in ",".join(headers).split(","):
        tag = tag.strip()
        if not tag:  # an empty list element, which a list may have (RFC 9110 5.6.1)
            continue
        version = ascii_number(tag.removeprefix("W/").strip('"'), 2**62)
        if version is None:
            raise BadRequest(
                "invalid_request", 'If-Match must name context versions, e.g. "3" or "3", "4"'
            )
        if tag.startswith("W/"):
            weak.append(tag)
        else:
            versions.add(version)
    if not versions and not weak:
        raise BadRequest(
            "invalid_request", 'If-Match must name context versions, e.g. "3" or "3", "4"'
        )
    return IfMatch(frozenset(versions), tuple(weak))


def entry_json(entry: AuditEntry) -> dict[str, Any]:
    return {
        "key": entry.key,
        "value": entry.value,
        "time": entry.time,
        "source": entry.source,
        "version": entry.version,
        "runId": entry.run_id,
    }


def state_json(context: Context) -> dict[str, Any]:
    writable = context.state.writable_keys
    return {
        "contextId": context.id,
        "agent": context.agent_name,
        "owner": context.record.owner,
        "version": context.record.version,
        # As saved with that version: a running run's writes land when it ends.
        "state": context.record.state,
        "writableKeys": None if writable is None else sorted(writable),
    }


def versioned(body: dict[str, Any]) -> Response:
    return JSONResponse(body, headers={"ETag": f'"{body["version"]}"', "Cache-Control": "no-store"})


def is_operator(request: Request, tokens: Sequence[str]) -> bool:
    """Whether the request carries one of the operator's bearer tokens (each compared in
    constant time); never true without one configured."""
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    # The scheme is case-insensitive (RFC 9110): "bearer" is as good as "Bearer".
    if scheme.lower() != "bearer":
        return False
    matches = [hmac.compare_digest(given.encode(), token.encode()) for token in tokens]
    return any(matches)


def operator_routes(server: AgentServer, tokens: Sequence[str]) -> list[BaseRoute]:
    registry = server.contexts

    def authenticated(handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if not is_operator(request, tokens):
                raise Unauthorized("unauthorized", "the operator API needs its bearer token")
            return await handler(request)

        return guarded

    def agent_of(request: Request) -> str:
        agent_name: str = request.path_params["agent"]
        if agent_name not in registry.agents:
            raise NotFound("agent_not_found", f"no agent named {agent_name[:64]!r}")
        return agent_name

    async def find(request: Request) -> Context:
        agent_name = agent_of(request)
        context_id = validate_context_id(request.path_params["context_id"])
        return await registry.get_for_operator(agent_name, context_id)

    async def owned_by(request: Request) -> Response:
        """A page of one principal's conversations, as that principal's list shows them:
        what a request for a person's data starts from."""
        agent_name = agent_of(request)
        owner = request.query_params.get("owner", "")
        if not owner:
            raise BadRequest(
                "invalid_request", "owner: the principal, as identify names it (user:ada)"
            )
        limit = page_size(request.query_params.get("limit"))
        cursor = request.query_params.get("cursor") or None
        page = await server.conversations(agent_name, owner, limit, cursor)
        return JSONResponse({"owner": owner, **page}, headers={"Cache-Control": "no-store"})

    async def read(request: Request) -> Response:
        """The conversation as its owner reads it (the branch shown, paged alike), with
        what only the record says: owner, version, times, status."""
        context = await find(request)
        record = context.record
        shown = json.loads(await server.transcript(context, page_of(request)))
        turns = shown.pop("turns")
        return versioned(
            {
                **shown,
                "owner": record.owner,
                "version": record.version,
                "createdAt": record.created_at,
                "updatedAt": record.updated_at,
                "status": record.status,
                "turns": turns,
            }
        )

    async def forget(request: Request) -> Response:
        """Every trace of the conversation gone from the store, as its owner's forget."""
        await server.forget(await find(request))
        return Response(status_code=204)

    async def read_state(request: Request) -> Response:
        return versioned(state_json(await find(request)))

    async def patch_state(request: Request) -> Response:
        context = await find(request)
        expected = parse_if_match(request)
        try:
            patch = StatePatch.model_validate(await read_json(request, MAX_PATCH_BYTES))
        except ValidationError as exc:
            raise BadRequest("invalid_request", describe(exc)) from exc
        async with registry.hold(context, "operator"):
            if expected is not None and context.record.version not in expected.versions:
                strongly = " (If-Match compares strongly: a weak tag never matches)"
                raise PreconditionFailed(
                    "version_mismatch",
                    f"context is at version {context.record.version}, not {expected.named()}"
                    + (strongly if expected.weak else ""),
                )
            # WriteDenied (403), StateValueError (400) and VersionConflict (409) are in the
            # exception tree, and leave as the typed errors they are.
            context.state.update_all(patch.state, source=f"operator:{patch.source}")
            await registry.save(context)
        body = state_json(context)
        body["updatedKeys"] = sorted(patch.state)
        return versioned(body)

    async def key_history(request: Request) -> Response:
        context = await find(request)
        key: str = request.path_params["key"]
        entries = await registry.store.audit(context.id, key)
        return JSONResponse({"key": key, "entries": [entry_json(e) for e in entries]})

    async def audit(request: Request) -> Response:
        context = await find(request)
        entries = await registry.store.audit(context.id)
        return JSONResponse({"entries": [entry_json(e) for e in entries]})

    async def usage(request: Request) -> Response:
        context = await find(request)
        return JSONResponse({"contextId": context.id, **context.record.usage})

    base = "/agents/{agent}/contexts/{context_id}"
    return [
        Route("/agents/{agent}/contexts", authenticated(owned_by), methods=["GET"]),
        Route(base, authenticated(read), methods=["GET"]),
        Route(base, authenticated(forget), methods=["DELETE"]),
        Route(f"{base}/usage", authenticated(usage), methods=["GET"]),
        Route(f"{base}/state", authenticated(read_state), methods=["GET"]),
        Route(f"{base}/state", authenticated(patch_state), methods=["PATCH"]),
        Route(f"{base}/state/{{key}}/history", authenticated(key_history), methods=["GET"]),
        Route(f"{base}/audit", authenticated(audit), methods=["GET"]),
    ]
