"""The floods drill's server: the demo — its agent, its signed user cookie — plus `slow`,
the same agent with a minute between streamed pieces, whose run gives hundreds of
followers a stream that stays open and quiet.

    THINWIRE_DATA_DIR=… THINWIRE_DEMO_SECRET=… thinwire serve --factory chaos.floodapp:create

It is built by `create_app` as `thinwire demo` is, and served by the same uvicorn
settings of the CLI; only the second agent differs.
"""

from __future__ import annotations

import os

from starlette.applications import Starlette

from thinwire.app import create_app, default_data_dir
from thinwire.demo import DemoAgent, DemoIdentity, login_route
from thinwire.stores import SQLiteStore

__all__ = ["create"]

#: Seconds between the slow agent's pieces: longer than any drill lasts.
SLOW = 60.0


def create() -> Starlette:
    data_dir = default_data_dir()
    data_dir.mkdir(parents=True, exist_ok=True)
    identity = DemoIdentity(os.environ["THINWIRE_DEMO_SECRET"].encode())
    return create_app(
        {"demo": lambda: DemoAgent(delay=0.01), "slow": lambda: DemoAgent(delay=SLOW)},
        identify=identity,
        store=SQLiteStore.in_directory(data_dir),
        routes=[login_route(identity)],
    )
