"""Reading requests strictly: bounded bodies, JSON only, typed errors for everything else."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails
from starlette.requests import ClientDisconnect, Request

from thinwire import wire
from thinwire.branches import Page, is_turn_id
from thinwire.errors import (
    QUOTED,
    BadRequest,
    PayloadTooLarge,
    RequestTimeout,
    UnsupportedMediaType,
    quoted,
)
from thinwire.jsontext import dumps
from thinwire.records import visible

M = TypeVar("M", bound=BaseModel)

__all__ = [
    "ascii_number",
    "check_data",
    "check_message",
    "check_protocol",
    "describe",
    "page_of",
    "parse_json",
    "query_value",
    "read_json",
    "read_model",
    "read_no_fields",
    "read_run_request",
    "validated",
]


#: Characters, at most, of a message that describes a request's problem.
MAX_MESSAGE = 400

DIGITS = re.compile(r"[0-9]{1,16}")
#: Seconds a request body may take to arrive.
BODY_TIMEOUT = 10.0


def ascii_number(raw: str, maximum: int) -> int | None:
    """`raw` as a whole number if it is ASCII digits only (not a superscript "²") and at most
    `maximum`; None otherwise."""
    if not DIGITS.fullmatch(raw):
        return None
    value = int(raw)
    return value if value <= maximum else None


def query_value(request: Request, name: str) -> str | None:
    """The query parameter `name`; None when it is not given. Given twice it is refused:
    read as the last alone, `?limit=1&limit=1000` is what neither half asked for."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise BadRequest("invalid_request", f"{quoted(name)} is given more than once: give it once")
    return values[0] if values else None


def page_of(request: Request) -> Page:
    """Which exchanges of a transcript the request asks for: `?limit=` (the last ones;
    all by default), `?before=` a turn's id (those leading to its exchange)."""
    raw_limit, raw_before = query_value(request, "limit"), query_value(request, "before")
    limit = None if raw_limit is None else ascii_number(raw_limit, wire.MAX_TRANSCRIPT_PAGE)
    if raw_limit is not None and not limit:
        raise BadRequest(
            "invalid_request",
            f"limit: a whole number of exchanges from 1 to {wire.MAX_TRANSCRIPT_PAGE}",
        )
    if raw_before is not None and not is_turn_id(raw_before):
        # No turn's id at all: a malformed query, not a turn the server lacks.
        raise BadRequest("invalid_request", "before: a turn's id, as a transcript names it")
    return Page(limit) if raw_before is None else Page.before_turn_id(limit, raw_before)


def check_protocol(request: Request) -> None:
    """A client that names another protocol version gets a clear error, not a hang."""
    named = request.headers.getlist(wire.PROTOCOL_HEADER)  # sent twice, each must agree
    version = next((v for v in named if v != wire.PROTOCOL_VERSION), None)
    if version is not None:
        raise BadRequest(
            "protocol_mismatch",
            f"client speaks thinwire protocol {quoted(version, 16)}; "
            f"this server speaks {wire.PROTOCOL_VERSION!r}",
        )


def sent_as_json(request: Request) -> bool:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return media_type == "application/json"


def not_json() -> UnsupportedMediaType:
    return UnsupportedMediaType("unsupported_media_type", "send the body as application/json")


async def read_json(request: Request, max_bytes: int, timeout: float = BODY_TIMEOUT) -> Any:
    """The request body parsed as JSON, read no further than `max_bytes` and for no longer
    than `timeout` seconds (a body that trickles in is `request_timeout`)."""
    if not sent_as_json(request):
        raise not_json()
    return parse_json(await read_body(request, max_bytes, timeout))


async def read_body(request: Request, max_bytes: int, timeout: float = BODY_TIMEOUT) -> bytes:
    """The request body, read no further than `max_bytes` and for no longer than `timeout`
    seconds."""
    too_large = PayloadTooLarge("body_too_large", f"request body exceeds {max_bytes} bytes")
    declared = request.headers.get("content-length", "")
    if declared and ascii_number(declared, max_bytes) is None:
        raise too_large  # larger, or not a number a body can have
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_bytes:
                    raise too_large
                chunks.append(chunk)
    except TimeoutError as exc:
        raise RequestTimeout("request_timeout", f"the body took over {timeout:g}s") from exc
    except ClientDisconnect as exc:  # no one to answer, and no fault of the server's
        raise BadRequest(
            "invalid_request", "the connection closed before the body arrived"
        ) from exc
    return b"".join(chunks)


#: Arrays and objects in one another, at most, in a request: far past what any request
#: of thinwire or a page's `data` needs, and far short of what would make the copies and
#: checks a value goes through (each recursive) run out of stack.
MAX_DEPTH = 64


class DuplicateKey(Exception):
    """A key given twice in one object, raised from inside the decoder."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of the request, none of its keys given twice: a proxy or filter that read
    the first of two would see another request than the one served, which gets the last."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return value


#: One decoder for every call: `json.loads` with a hook builds one per call (as much
#: again as parsing a small body costs).
_DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)


def parse_json(body: bytes | str) -> Any:
    """JSON, or `invalid_json`: also for a key given twice in an object, for an integer of
    more digits than Python converts (a ValueError) and for nesting deeper than
    `MAX_DEPTH`."""
    try:
        if not isinstance(body, str):  # as `json.loads` reads bytes
            body = body.decode(json.detect_encoding(body), "surrogatepass")
        value = _DECODER.decode(body)
    except DuplicateKey as exc:
        raise BadRequest("invalid_json", f"body has the key {quoted(exc.key)} twice") from exc
    except RecursionError as exc:
        raise BadRequest("invalid_json", "body is nested too deeply") from exc
    except json.JSONDecodeError as exc:
        raise BadRequest("invalid_json", f"body is not valid JSON: {exc.msg} at {exc.pos}") from exc
    except UnicodeDecodeError as exc:
        raise BadRequest("invalid_json", "body is not UTF-8") from exc
    except ValueError as exc:  # an integer of more digits than Python converts
        raise BadRequest("invalid_json", "body has a number too long to read") from exc
    if too_deep(value, MAX_DEPTH):
        raise BadRequest("invalid_json", f"body is nested more than {MAX_DEPTH} deep")
    return value


def too_deep(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` deep in `value` (without
    recursing: the point is not to)."""
    pending: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, (dict, list)) else []
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


#: What a value of the wrong type should have been, in JSON's terms, by pydantic's error type.
SHOULD_BE = {
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dataclass_type": "an object",
    "string_type": "a string",
    "list_type": "a list",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "none_required": "null",
}

Path = list[str | int]


def describe(error: ValidationError, given: Any, at: str = "") -> str:
    """The first validation problem of `given`, named by the path the client wrote
    (`messages[0].content`; `at`: where `given` is in the body), in JSON's terms, and
    without echoing the (possibly huge) input: its keys quoted where they need it
    (`path_text`), the whole cut to MAX_MESSAGE."""
    problems = error.errors(include_input=False, include_url=False)
    first = problems[0]
    path, union = client_path(first, given)
    said = [first]
    if union is not None:
        # A value no member of a union takes fails once per member. The member that got
        # deepest is the one the client meant; if none got past the value, it is any.
        members = [p for p in problems if p["loc"][:union] == first["loc"][:union]]
        paths = [client_path(member, given)[0] for member in members]
        path = max(paths, key=len)
        said = [member for member, at_path in zip(members, paths, strict=True) if at_path == path]
    return cut(f"{path_text(path, at)}: {what_is_wrong(said)}", MAX_MESSAGE)


def client_path(problem: ErrorDetails, given: Any) -> tuple[Path, int | None]:
    """The steps of the problem's `loc` that are fields and indexes in `given` (or the
    field it lacks), and where in `loc` the first other is: the name pydantic gives the
    member of a union it tried (`str`, `list[...]`, a model's class)."""
    path: Path = []
    union = None
    value, loc = given, problem["loc"]
    for index, step in enumerate(loc):
        if holds(value, step):
            value = value[step]
        elif not (problem["type"] == "missing" and index == len(loc) - 1):
            union = index if union is None else union
            continue
        path.append(step)
    return path, union


def holds(value: Any, step: str | int) -> bool:
    """Whether `step` is a field of the object `value`, or an index of the array."""
    if isinstance(value, list):
        return isinstance(step, int) and 0 <= step < len(value)
    return isinstance(value, dict) and step in value


def path_text(path: Path, at: str) -> str:
    """The path as the client would write it, `messages[0].content`; a key that is long,
    or holds what a reader would not see, quoted (`message['\\u202ex']`)."""
    text = at
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        elif len(step) > QUOTED or not step.isprintable():
            text += f"[{quoted(step)}]"
        else:
            text += f".{step}" if text else step
    return text or "body"


def cut(text: str, length: int) -> str:
    """`text`, or its first `length` characters ending in "…"."""
    return text if len(text) <= length else text[: length - 1] + "…"


def what_is_wrong(problems: list[ErrorDetails]) -> str:
    """A value that fits one of the types (too long, say) says so; otherwise the types it
    should have been."""
    for problem in problems:
        if problem["type"] == "missing":
            return "required"
        if problem["type"] == "literal_error":
            return f"should be {problem['ctx']['expected']}"
        if problem["type"] not in SHOULD_BE:
            return problem["msg"].removeprefix("Input ")
    return "should be " + " or ".join(dict.fromkeys(SHOULD_BE[p["type"]] for p in problems))


def validated(model: type[M], given: Any, at: str = "") -> M:
    """`given` as `model`; `invalid_request` when it does not fit."""
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        raise BadRequest("invalid_request", describe(exc, given, at)) from exc


async def read_model(request: Request, model: type[M], max_bytes: int) -> M:
    """The JSON body validated as `model`; `invalid_request` when it does not fit."""
    return validated(model, await read_json(request, max_bytes))


class NoFields(BaseModel):
    """`{}`: a body that names no field."""

    model_config = ConfigDict(extra="forbid")


async def read_no_fields(request: Request, max_bytes: int) -> None:
    """The body of a request that takes no fields (a stop, a clear): none at all, however
    it is labelled (`fetch` or `curl -X POST` without one), or `{}` as JSON — checked as
    any other body is, so an unknown field is `invalid_request` here too."""
    body = await read_body(request, max_bytes)
    if not body:
        return
    if not sent_as_json(request):
        raise not_json()
    validated(NoFields, parse_json(body))


async def read_run_request(
    request: Request, *, max_body_bytes: int, max_message_bytes: int, max_data_bytes: int
) -> wire.RunRequest:
    run_request = await read_model(request, wire.RunRequest, max_body_bytes)
    check_message(run_request.message.text, max_message_bytes)
    check_data(run_request.data, max_data_bytes)
    return run_request


def check_data(data: dict[str, Any] | None, max_bytes: int) -> None:
    """The page's extra input: plain JSON (as parsed from the request, it is), within
    `max_bytes` once encoded."""
    if data is None:
        return
    try:
        size = len(dumps(data).encode("utf-8"))
    except (ValueError, UnicodeEncodeError) as exc:
        raise BadRequest("invalid_request", "data: not plain JSON") from exc
    if size > max_bytes:
        raise PayloadTooLarge("data_too_large", f"data exceeds {max_bytes} bytes")


def check_message(text: str, max_bytes: int) -> None:
    """A user message must be valid Unicode, say something a reader sees (as a title
    must) and fit in `max_bytes`."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise BadRequest("invalid_request", "message.text: not valid Unicode") from exc
    if not visible(text):  # blank, or nothing but control and format characters
        raise BadRequest("invalid_request", "message.text: must not be blank")
    if size > max_bytes:
        raise PayloadTooLarge("message_too_large", f"message.text exceeds {max_bytes} bytes")
