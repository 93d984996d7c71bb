"""The operator control API: read and patch AgentState, read its audit trail; find, read,
export and forget a person's conversations.

Mounted at `/admin` only when an operator token is configured, and authenticated by that
bearer token alone: the UI's credentials (cookies, `identify`) open nothing here, and the
token opens nothing outside it. Never used by the UI.

    GET   /admin/agents                                           the agents' names
    GET   /admin/metrics                                          this process's metrics,
                                                                  for Prometheus
    GET   /admin/agents/{agent}/contexts/{id}/state               state, writable keys, version
    PATCH /admin/agents/{agent}/contexts/{id}/state               {"state": {...}, "source"?}
    GET   /admin/agents/{agent}/contexts/{id}/state/{key}/history one key's audit trail
    GET   /admin/agents/{agent}/contexts/{id}/audit               the audit trail
    GET   /admin/agents/{agent}/contexts/{id}/usage               model tokens, in total and
                                                                  for the latest runs
    GET   /admin/agents/{agent}/contexts?owner=…                  a principal's conversations
    GET   /admin/agents/{agent}/contexts/{id}                     one: its record's metadata
                                                                  and (a page of) its transcript
    GET   /admin/agents/{agent}/contexts/{id}/export              all the store holds of it
    POST  /admin/agents/{agent}/contexts/{id}/stop                stop its run, or end the
                                                                  question it waits on, as
                                                                  its owner can
    DELETE /admin/agents/{agent}/contexts/{id}                    forget one, as its owner can

A patch is atomic: every key lands, or — one key no key name (400 `invalid_state_value`)
or not writable (403 `write_denied`), one value not JSON (400 `invalid_state_value`), a
stale `If-Match` version (412 `version_mismatch`), a run in progress (409
`context_busy`) or waiting for a decision (409 `decision_pending`) — none does. It is
durable before it is acknowledged, audited as `operator:<source>`. Audit trails are read
a page at a time (`limit`, `before`), as transcripts are. Each write that lands — a
patch, a stop that found a run, a forget — is logged on `thinwire.admin`: what, where,
the declared source and a fingerprint of the token, never a value or the owner.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from thinwire.contexts import Context, not_found
from thinwire.errors import BadRequest, NotFound, PreconditionFailed, Unauthorized, quoted
from thinwire.export import entry_json, export_document
from thinwire.ids import validate_context_id
from thinwire.metrics import CONTENT_TYPE, render
from thinwire.parsing import ascii_number, page_of, read_json, read_no_fields, validated
from thinwire.state import OPERATOR, SOURCE, check_key
from thinwire.stores.listing import page_size

if TYPE_CHECKING:
    from thinwire.server import AgentServer

__all__ = ["StatePatch", "is_operator", "operator_routes"]

logger = logging.getLogger("thinwire.admin")

MAX_PATCH_BYTES = 1024 * 1024
#: Audit entries in a page, unless the request asks for fewer or more (up to the most).
AUDIT_PAGE = 100
MAX_AUDIT_PAGE = 1000
#: Exchanges, and audit entries, an export reads from the store at a time.
EXPORT_PAGE = 50
NO_STORE = {"Cache-Control": "no-store"}

Handler = Callable[[Request], Awaitable[Response]]


class StatePatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: dict[str, Any] = Field(min_length=1, description="Keys to write, with their values.")
    source: str = Field(
        default="api",
        pattern=f"^{SOURCE}$",
        description="Who is writing, recorded in the audit trail as operator:<source>.",
    )

    @field_validator("source")
    @classmethod
    def named_alone(cls, source: str) -> str:
        if source.startswith(OPERATOR):  # it would be audited as operator:operator:…
            raise ValueError(f"the API puts {OPERATOR!r} before it: name the writer alone")
        return source


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


#: The query parameters a page of an audit trail takes.
AUDIT_QUERY = ("limit", "before")


def audit_page_of(request: Request) -> tuple[int, int | None]:
    """Which entries of an audit trail the request asks for: `?limit=` (the latest ones,
    `AUDIT_PAGE` by default), `?before=` an entry's `seq` (those before it). Nothing
    else: read as unasked, `?key=notes` would answer the whole trail as one key's."""
    other = next((name for name in request.query_params if name not in AUDIT_QUERY), None)
    if other is not None:
        raise BadRequest(
            "invalid_request",
            f"{quoted(other)}: an audit trail takes limit and before only "
            "(one key's trail is …/state/{key}/history)",
        )
    raw_limit, raw_before = request.query_params.get("limit"), request.query_params.get("before")
    limit = AUDIT_PAGE if raw_limit is None else ascii_number(raw_limit, MAX_AUDIT_PAGE)
    if not limit:
        raise BadRequest(
            "invalid_request", f"limit: a whole number of entries from 1 to {MAX_AUDIT_PAGE}"
        )
    before = None if raw_before is None else ascii_number(raw_before, 2**62)
    if raw_before is not None and not before:
        raise BadRequest("invalid_request", "before: an entry's seq, a whole number from 1")
    return limit, before


def given_once(request: Request) -> None:
    """Refuse a query parameter given twice: read as the last alone, `?owner=a&owner=b`
    would list (and an erasure forget) b's conversations, whatever the a meant."""
    counts = Counter(name for name, _ in request.query_params.multi_items())
    repeated = sorted(name for name, count in counts.items() if count > 1)
    if repeated:
        raise BadRequest(
            "invalid_request", f"{quoted(repeated[0])} is given more than once: give it once"
        )


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
    return JSONResponse(body, headers={"ETag": f'"{body["version"]}"', **NO_STORE})


def operator_token(request: Request, tokens: Sequence[str]) -> str | None:
    """The operator's bearer token the request carries (each compared in constant time),
    if it carries one; never one without one configured."""
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    # The scheme is case-insensitive (RFC 9110): "bearer" is as good as "Bearer".
    if scheme.lower() != "bearer":
        return None
    matches = [hmac.compare_digest(given.encode(), token.encode()) for token in tokens]
    return next((token for token, match in zip(tokens, matches, strict=True) if match), None)


def is_operator(request: Request, tokens: Sequence[str]) -> bool:
    return operator_token(request, tokens) is not None


def fingerprint(token: str) -> str:
    """What the log calls a token by: enough to tell one from the one it replaced, and no
    way back to it (the start of its SHA-256)."""
    return hashlib.sha256(token.encode()).hexdigest()[:8]


def fingerprint_of(request: Request) -> str:
    """The fingerprint of the token that opened this request."""
    named: str = request.state.operator_fingerprint
    return named


def operator_routes(server: AgentServer, tokens: Sequence[str]) -> list[BaseRoute]:
    registry = server.contexts

    def authenticated(handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            token = operator_token(request, tokens)
            if token is None:
                raise Unauthorized("unauthorized", "the operator API needs its bearer token")
            given_once(request)
            request.state.operator_fingerprint = fingerprint(token)
            return await handler(request)

        return guarded

    def agent_of(request: Request) -> str:
        agent_name: str = request.path_params["agent"]
        if agent_name not in registry.agents:
            raise NotFound("agent_not_found", f"no agent named {quoted(agent_name)}")
        return agent_name

    async def find(request: Request) -> Context:
        agent_name = agent_of(request)
        context_id = validate_context_id(request.path_params["context_id"])
        return await registry.get_for_operator(agent_name, context_id)

    async def agents(request: Request) -> Response:
        """The agents' names: what a request for a person's data goes over."""
        return JSONResponse({"agents": list(registry.agents)}, headers=NO_STORE)

    async def metrics(request: Request) -> Response:
        """This process's counters and gauges, in Prometheus's text format (`metrics.py`)."""
        return Response(render(server), media_type=CONTENT_TYPE, headers=NO_STORE)

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
        return JSONResponse({"owner": owner, **page}, headers=NO_STORE)

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

    async def export(request: Request) -> Response:
        """Everything the store holds of the conversation, as one JSON document: read as
        stored (a run in progress adds its turns when it ends), a page at a time."""
        context = await find(request)
        record = await registry.store.load(context.id)
        if record is None:  # forgotten since
            raise not_found(context.id)
        document = export_document(registry.store, record, EXPORT_PAGE)
        headers = {"ETag": f'"{record.version}"', **NO_STORE}
        return StreamingResponse(document, media_type="application/json", headers=headers)

    async def forget(request: Request) -> Response:
        """Every trace of the conversation gone from the store, as its owner's forget.
        The log keeps that it was (its audit trail goes with it)."""
        context = await find(request)
        await server.forget(context)
        logger.info(
            "%s %s: operator forgot the conversation (token %s)",
            context.agent_name,
            context.id,
            fingerprint_of(request),
        )
        return Response(status_code=204)

    async def stop(request: Request) -> Response:
        """The owner's stop: what is left while a patch is `context_busy` or
        `decision_pending`, short of forgetting the conversation."""
        context = await find(request)
        await read_no_fields(request, server.max_body_bytes)
        result = await server.stop(context)
        if result["stopping"]:  # a stop of nothing changed nothing: nothing to log
            logger.info(
                "%s %s: operator stopped run %s (token %s)",
                context.agent_name,
                context.id,
                result["runId"],
                fingerprint_of(request),
            )
        return JSONResponse(result, headers=NO_STORE)

    async def read_state(request: Request) -> Response:
        return versioned(state_json(await find(request)))

    async def patch_state(request: Request) -> Response:
        context = await find(request)
        expected = parse_if_match(request)
        patch = validated(StatePatch, await read_json(request, MAX_PATCH_BYTES))
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
            source = f"{OPERATOR}{patch.source}"
            context.state.update_all(patch.state, source=source)
            await registry.save(context)
        logger.info(
            "%s %s: operator patched %s (source %s, token %s)",
            context.agent_name,
            context.id,
            ", ".join(sorted(patch.state)),
            source,
            fingerprint_of(request),
        )
        body = state_json(context)
        body["updatedKeys"] = sorted(patch.state)
        return versioned(body)

    async def trail(request: Request, key: str | None = None) -> dict[str, Any]:
        """A page of the context's audit trail (of one key's entries), oldest first."""
        context = await find(request)
        if key is not None:
            check_key(key)  # a key no write could have: 400, not an empty trail
        limit, before = audit_page_of(request)
        page = await registry.store.audit_page(context.id, limit=limit, key=key, before=before)
        return {
            "entries": [entry_json(entry, seq) for seq, entry in page.entries],
            "hasEarlier": page.more,
        }

    async def key_history(request: Request) -> Response:
        key: str = request.path_params["key"]
        return JSONResponse({"key": key, **await trail(request, key)}, headers=NO_STORE)

    async def audit(request: Request) -> Response:
        return JSONResponse(await trail(request), headers=NO_STORE)

    async def usage(request: Request) -> Response:
        context = await find(request)
        return JSONResponse({"contextId": context.id, **context.record.usage})

    base = "/agents/{agent}/contexts/{context_id}"
    return [
        Route("/agents", authenticated(agents), methods=["GET"]),
        Route("/metrics", authenticated(metrics), methods=["GET"]),
        Route("/agents/{agent}/contexts", authenticated(owned_by), methods=["GET"]),
        Route(base, authenticated(read), methods=["GET"]),
        Route(f"{base}/export", authenticated(export), methods=["GET"]),
        Route(f"{base}/stop", authenticated(stop), methods=["POST"]),
        Route(base, authenticated(forget), methods=["DELETE"]),
        Route(f"{base}/usage", authenticated(usage), methods=["GET"]),
        Route(f"{base}/state", authenticated(read_state), methods=["GET"]),
        Route(f"{base}/state", authenticated(patch_state), methods=["PATCH"]),
        Route(f"{base}/state/{{key}}/history", authenticated(key_history), methods=["GET"]),
        Route(f"{base}/audit", authenticated(audit), methods=["GET"]),
    ]
