"""`thinwire serve`'s process: what it does before it serves."""

from __future__ import annotations

import gc

import pytest
from starlette.applications import Starlette

from thinwire import serving


def test_what_startup_made_is_frozen_out_of_the_collector_before_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frozen_when_served: list[int] = []
    monkeypatch.setattr(
        serving.DrainingServer, "run", lambda self: frozen_when_served.append(gc.get_freeze_count())
    )
    gc.unfreeze()
    try:
        serving.run(
            Starlette(),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            shutdown_timeout=1.0,
            max_connections=0,
            header_timeout=5.0,
        )
    finally:
        gc.unfreeze()
    assert frozen_when_served and frozen_when_served[0] > 0
