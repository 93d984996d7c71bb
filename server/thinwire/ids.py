"""Identifiers: minted by the server, validated strictly when a client sends one back.

A context id is a capability to address a conversation, never proof of identity.
"""

from __future__ import annotations

import re
import secrets

from thinwire.errors import BadRequest

__all__ = ["new_context_id", "new_run_id", "validate_context_id"]

CONTEXT_ID = re.compile(r"ctx-[0-9a-f]{36}")


def new_context_id() -> str:
    return "ctx-" + secrets.token_hex(18)


def new_run_id() -> str:
    return "run-" + secrets.token_hex(12)


def validate_context_id(value: str) -> str:
    """Return `value` when it is a well-formed context id; raise `invalid_context_id`."""
    if not CONTEXT_ID.fullmatch(value):
        raise BadRequest(
            "invalid_context_id", "contextId must be 'ctx-' followed by 36 lowercase hex digits"
        )
    return value
