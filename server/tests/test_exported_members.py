from __future__ import annotations

import thinwire


def test_public_names_are_locked() -> None:
    assert sorted(thinwire.__all__) == [
        "Agent",
        "AgentServer",
        "AgentState",
        "Approval",
        "MemoryStore",
        "Rejected",
        "ReplayMismatch",
        "Run",
        "SQLiteStore",
        "StateValueError",
        "Store",
        "Suspend",
        "ThinwireError",
        "ToolFailed",
        "WriteDenied",
        "anonymous",
        "create_app",
        "mount",
    ]
    for name in thinwire.__all__:
        assert getattr(thinwire, name).__module__.startswith("thinwire.")
