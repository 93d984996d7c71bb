"""Reading requests strictly: bounded bodies, JSON only, typed errors for everything else."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from thinwire import wire
from thinwire.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType

M = TypeVar("M", bound=BaseModel)

__all__ = [
    "check_message",
    "check_protocol",
    "describe",
    "read_json",
    "read_model",
    "read_run_request",
]


def check_protocol(request: Request) -> None:
    """A client that names another protocol version gets a clear error, not a hang."""
    version = request.headers.get(wire.PROTOCOL_HEADER)
    if version is not None and version != wire.PROTOCOL_VERSION:
        raise BadRequest(
            "protocol_mismatch",
            f"client speaks thinwire protocol {version[:16]!r}; "
            f"this server speaks {wire.PROTOCOL_VERSION!r}",
        )


async def read_json(request: Request, max_bytes: int) -> Any:
    """The request body parsed as JSON, read no further than `max_bytes`."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaType("unsupported_media_type", "send the body as application/json")
    too_large = PayloadTooLarge("body_too_large", f"request body exceeds {max_bytes} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise too_large
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest("invalid_json", f"body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise BadRequest("invalid_json", "body is nested too deeply") from exc


def describe(error: ValidationError) -> str:
    """The first validation problem, without echoing the (possibly huge) input."""
    first = error.errors(include_input=False, include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    return f"{where}: {first['msg']}"


async def read_model(request: Request, model: type[M], max_bytes: int) -> M:
    """The JSON body validated as `model`; `invalid_request` when it does not fit."""
    body = await read_json(request, max_bytes)
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise BadRequest("invalid_request", describe(exc)) from exc


async def read_run_request(
    request: Request, *, max_body_bytes: int, max_message_bytes: int
) -> wire.RunRequest:
    run_request = await read_model(request, wire.RunRequest, max_body_bytes)
    check_message(run_request.message.text, max_message_bytes)
    return run_request


def check_message(text: str, max_bytes: int) -> None:
    """A user message must say something, be valid Unicode and fit in `max_bytes`."""
    if not text.strip():
        raise BadRequest("invalid_request", "message.text: must not be blank")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise BadRequest("invalid_request", "message.text: not valid Unicode") from exc
    if size > max_bytes:
        raise PayloadTooLarge("message_too_large", f"message.text exceeds {max_bytes} bytes")
