"""Testing helpers for thinwire apps: a real server process, and a leak recorder.

`serve` needs nothing extra. `LeakRecorder` and the pytest plugin need Playwright
(`pip install "thinwire[testing]"`). See docs/testing.md.
"""

from __future__ import annotations

from thinwire.testing.leaks import CONTEXT_ID, LeakRecorder, browser_storage
from thinwire.testing.redis import redis_server_binary, serve_redis
from thinwire.testing.server import ServerProcess, free_port, serve

__all__ = [
    "CONTEXT_ID",
    "LeakRecorder",
    "ServerProcess",
    "browser_storage",
    "free_port",
    "redis_server_binary",
    "serve",
    "serve_redis",
]
