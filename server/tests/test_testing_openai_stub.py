"""The OpenAI stub's address: a free port, or the one it is given."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

from thinwire.testing import free_port
from thinwire.testing.openai_stub import OpenAIStub, Stream, text


def completion(url: str) -> str:
    request = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return str(response.read().decode())


def test_a_stub_listens_on_the_port_it_is_given_again_after_a_stop() -> None:
    port = free_port()
    for reply in ("first", "second"):  # a model at a fixed address, stopped and started
        with OpenAIStub(port=port) as stub:
            assert stub.port == port and stub.url == f"http://127.0.0.1:{port}/v1"
            stub.push(Stream(text(reply)))
            assert f'"content": "{reply}"' in completion(f"http://127.0.0.1:{port}/v1")


def test_a_port_in_use_is_an_error_that_names_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"could not listen on port {port}"):
            OpenAIStub(port=port).__enter__()
