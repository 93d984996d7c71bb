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

from thinwire.admin import operator_routes
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
    assert fuzz_server.process.poll() is None  # still serving after all of it
