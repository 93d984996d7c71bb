"""Testing helpers for thinwire apps: a real server process, a run's frames read as a
client reads them, an OpenAI-compatible model to test against (`openai_stub`), and a
leak recorder.

`serve`, `frames_of` and the stub need nothing extra. `LeakRecorder` and the pytest
plugin need Playwright (`pip install "thinwire[testing]"`). See docs/testing.md.
"""

from __future__ import annotations

from thinwire.testing.frames import FrameError, frames_of
from thinwire.testing.leaks import CONTEXT_ID, LeakRecorder, browser_storage
from thinwire.testing.redis import redis_server_binary, serve_redis
from thinwire.testing.server import ServerProcess, free_port, serve

__all__ = [
    "CONTEXT_ID",
    "FrameError",
    "LeakRecorder",
    "ServerProcess",
    "browser_storage",
    "frames_of",
    "free_port",
    "redis_server_binary",
    "serve",
    "serve_redis",
]
