"""Hostile input against every documented endpoint: no 5xx, no hang, every error typed.

schemathesis reads /openapi.json from a real uvicorn process and throws generated —
valid and invalid — requests at each operation.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx2 as httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from thinwire import wire
from thinwire.admin import operator_routes
from thinwire.openapi import openapi_document
from thinwire.testing import ServerProcess, serve

HERE = Path(__file__).resolve().parent
TOKEN = "schemathesis-operator-token"
OPERATOR = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[ServerProcess]:
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    with serve("serve", "apps:fuzz", "--log-level", "warning", env=env) as server:
        yield server


CHECKS = (
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
)


def test_every_operation_answers_typed_errors_and_no_5xx(fuzz_server: ServerProcess) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzz_server.url}/openapi.json", headers=OPERATOR)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=25,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def attack(case: Any) -> None:
            response = case.call(headers=OPERATOR, timeout=10)
            case.validate_response(response, checks=CHECKS)
            if response.status_code >= 400:
                body = response.json()
                assert set(body) == {"error"}
                assert body["error"]["code"] and body["error"]["message"]

        attack()


def test_the_document_covers_every_route(fuzz_server: ServerProcess) -> None:
    public = {
        "/agents/{agent}/runs",
        "/agents/{agent}/tickets",
        "/agents/{agent}/contexts",
        "/agents/{agent}/contexts/{context_id}",
        "/agents/{agent}/contexts/{context_id}/regenerate",
        "/agents/{agent}/contexts/{context_id}/edits",
        "/agents/{agent}/contexts/{context_id}/branch",
        "/agents/{agent}/contexts/{context_id}/events",
        "/agents/{agent}/contexts/{context_id}/stop",
        "/agents/{agent}/contexts/{context_id}/clear",
        "/agents/{agent}/contexts/{context_id}/decisions",
        "/healthz",
        "/readyz",
    }
    # Every route the operator API serves, described to the operator.
    routes = operator_routes(SimpleNamespace(contexts=None), ["t"])  # type: ignore[arg-type]
    operator = {"/admin" + route.path for route in routes}  # type: ignore[attr-defined]
    assert "/admin/agents/{agent}/contexts/{context_id}/state/{key}/history" in operator
    url = f"{fuzz_server.url}/openapi.json"
    assert set(httpx.get(url, headers=OPERATOR).json()["paths"]) == public | operator
    # Anyone else is not told the operator API exists.
    for headers in ({}, {"authorization": "Bearer wrong"}):
        document = httpx.get(url, headers=headers).json()
        assert set(document["paths"]) == public
        assert "securitySchemes" not in document["components"]
        assert "StatePatch" not in document["components"]["schemas"]
    assert fuzz_server.process.poll() is None  # still serving after all of it


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, methods in document["paths"].items():
        for method, described in methods.items():
            yield path, method, described


def test_a_streams_events_are_frames_told_apart_by_type() -> None:
    document = openapi_document(["demo"], operator_api=False)
    schemas = document["components"]["schemas"]
    runs = document["paths"]["/agents/{agent}/runs"]
    event = runs["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
    assert set(event["properties"]) == {"id", "data"}  # no `event:` line is sent
    data = event["properties"]["data"]
    assert data["contentSchema"] == {"$ref": "#/components/schemas/Frame"}
    frame = schemas["Frame"]
    types = {
        schemas[member["$ref"].rsplit("/", 1)[-1]]["properties"]["type"]["const"]
        for member in frame["oneOf"]
    }
    assert (
        types
        == set(frame["discriminator"]["mapping"])
        == {
            "run_start",
            "title",
            "thinking",
            "tool_call",
            "tool_result",
            "token",
            "interrupt",
            "done",
            "error",
        }
    )
    assert frame["discriminator"]["propertyName"] == "type"


def test_the_headers_a_client_sends_are_described() -> None:
    document = openapi_document(["demo"], operator_api=True)
    for path, method, described in operations(document):
        headers = {p["name"] for p in described.get("parameters", []) if p["in"] == "header"}
        # The protocol's routes check the version; health checks and the operator API not.
        versioned = not path.startswith(("/admin", "/healthz", "/readyz"))
        assert (wire.PROTOCOL_HEADER in headers) is versioned, (path, method)
    events = document["paths"]["/agents/{agent}/contexts/{context_id}/events"]["get"]
    assert "Last-Event-ID" in {p["name"] for p in events["parameters"]}
    assert "429" in events["responses"]  # too_many_streams


def test_stop_and_clear_take_an_empty_body_at_most() -> None:
    paths = openapi_document(["demo"], operator_api=False)["paths"]
    for action in ("stop", "clear"):
        post = paths[f"/agents/{{agent}}/contexts/{{context_id}}/{action}"]["post"]
        assert post["requestBody"]["required"] is False
        body = post["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"type": "object", "additionalProperties": False}
        assert {"413", "415"} <= set(post["responses"])


def test_the_operator_apis_schemas_are_described_to_the_operator_only() -> None:
    assert "StatePatch" in openapi_document(["demo"], operator_api=True)["components"]["schemas"]
    hidden = openapi_document(["demo"], operator_api=False)["components"]["schemas"]
    assert "StatePatch" not in hidden


def test_the_operators_stop_is_the_owners_stop_behind_the_operator_token() -> None:
    paths = openapi_document(["demo"], operator_api=True)["paths"]
    owners = paths["/agents/{agent}/contexts/{context_id}/stop"]["post"]
    operators = paths["/admin/agents/{agent}/contexts/{context_id}/stop"]["post"]
    assert operators["requestBody"] == owners["requestBody"]
    assert operators["responses"] == owners["responses"]
    assert operators["security"] == [{"operator": []}]
