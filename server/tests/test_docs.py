"""The Python examples in the docs run, and do what the docs say.

Every ```python block of README.md and docs/ runs, the blocks of a page in order in one
namespace, as a reader copying them would; a block that is not meant to run on its own
(it imports a module of the reader's, say) is marked ```python sketch.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import re
import shutil
import socket
import subprocess
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import jsonschema
import pytest
from starlette.testclient import TestClient

from conftest import app_for, decide, parse_sse, send
from thinwire import Agent, AgentState, Approval, StateValueError, WriteDenied

ROOT = Path(__file__).resolve().parents[2]


DOCS = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]


def python_blocks(name: str) -> list[str]:
    """The runnable Python blocks of a page (sketches left out)."""
    text = (ROOT / name).read_text(encoding="utf-8")
    return [
        textwrap.dedent(block)  # a block in a list item is indented with it
        for block in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    ]


def run_blocks(name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"docs_{Path(name).stem}"}
    for block in python_blocks(name):
        exec(compile(block, name, "exec", dont_inherit=True), namespace)
    return namespace


@pytest.mark.parametrize("name", DOCS)
def test_every_python_block_runs_or_is_marked_a_sketch(name: str) -> None:
    run_blocks(name)


def test_every_python_block_of_the_server_doc_runs_on_its_own() -> None:
    """server.md's blocks are separate recipes, not one program: a reader copies one, so
    each brings the agents and imports it uses."""
    for block in python_blocks("docs/server.md"):
        exec(
            compile(block, "docs/server.md", "exec", dont_inherit=True),
            {"__name__": "docs_server_block"},
        )


def fence_problem(text: str) -> str | None:
    """What is wrong with a page's code fences, if anything: a block left open swallows
    the rest of the page, and `python_blocks` never finds (nor runs) its code."""
    opened = None
    for number, line in enumerate(text.splitlines(), 1):
        fence = line.strip()
        if not fence.startswith("```"):
            continue
        if opened is None:
            opened = number
        elif fence == "```":
            opened = None
        else:
            return f"line {number} opens a block inside the one opened on line {opened}"
    return None if opened is None else f"the block opened on line {opened} is never closed"


@pytest.mark.parametrize("name", DOCS)
def test_every_code_block_is_closed(name: str) -> None:
    problem = fence_problem((ROOT / name).read_text(encoding="utf-8"))
    assert problem is None, f"{name}: {problem}"


def agents_in(name: str) -> dict[str, type[Agent]]:
    namespace = run_blocks(name)
    return {
        key: value
        for key, value in namespace.items()
        if isinstance(value, type) and issubclass(value, Agent) and value is not Agent
    }


def test_server_doc_librarian_runs() -> None:
    librarian = agents_in("docs/server.md")["Librarian"]
    with TestClient(app_for({"demo": librarian})) as client:
        frames = send(client, "tides")
    assert frames[-1]["text"] == "I found 1 book(s): A book about tides"
    assert frames[-1]["toolCalls"] == ["search"]
    assert "k-1234" not in str(frames)


def test_state_doc_notes_agent_runs() -> None:
    notes = agents_in("docs/state.md")["Notes"]
    with TestClient(app_for({"demo": notes})) as client:
        first = send(client, "one")
        second = send(client, "two", first[0]["contextId"])
    assert second[-1]["text"] == "2 notes so far."
    assert "hunter2" not in str(first + second)
    state = AgentState(notes.initial_state, writable_keys=notes.writable_keys)
    with pytest.raises(WriteDenied):
        state["archive"] = "open"  # the doc's promise: "archive" can only be seeded


def test_readme_echo_runs() -> None:
    echo = agents_in("README.md")["Echo"]
    with TestClient(app_for({"demo": echo})) as client:
        assert send(client, "ping")[-1]["text"] == "ping"


def test_models_doc_framework_agent_runs() -> None:
    framework = agents_in("docs/models.md")["FrameworkAgent"]
    with TestClient(app_for({"demo": framework})) as client:
        first = send(client, "hi")
        frames = send(client, "again", first[0]["contextId"])
    assert [f["type"] for f in frames[1:]] == ["thinking", "token", "done"]
    assert frames[-1]["text"] == "You said: again"


def test_models_doc_own_model_streams_calls_its_tool_counts_and_fails_as_it_says() -> None:
    echo = agents_in("docs/models.md")["Echo"]
    token = "docs-operator-token"
    with TestClient(app_for({"demo": echo}, operator_token=token)) as client:
        frames = send(client, "tides")
        usage = client.get(
            f"/admin/agents/demo/contexts/{frames[0]['contextId']}/usage",
            headers={"authorization": f"Bearer {token}"},
        ).json()
        failed = send(client, "tides " * 20, frames[0]["contextId"])
    kinds = [f["type"] for f in frames[1:]]
    assert kinds == ["thinking", "tool_call", "tool_result", "token", "token", "token", "done"]
    assert frames[1]["delta"] == "Looking it up. " and frames[3]["ok"] is True
    assert frames[-1]["text"] == 'I found ["A book about tides"].'
    [(model, counted)] = usage["total"].items()  # the tool call's turn said no usage
    assert model == "echo-1" and counted["calls"] == 1 and counted["outputTokens"] > 0
    error = next(f for f in failed if f["type"] == "error")
    assert error["code"] == "agent_error" and error["retryable"] is False
    assert error["message"].startswith("The model failed (was asked too much).")


def test_models_doc_langgraph_plan_stays_on_the_server() -> None:
    helpdesk = agents_in("docs/models.md")["Helpdesk"]

    class TagOnly(helpdesk):  # type: ignore[misc, valid-type]
        streamed_nodes = None

    for agent in (helpdesk, TagOnly):
        with TestClient(app_for({"demo": agent})) as client:
            frames = send(client, "Where is my order?")
            transcript = client.get(f"/agents/demo/contexts/{frames[0]['contextId']}").text
        assert frames[-1]["text"] == "Let me check your order."
        assert "date first" not in json.dumps(frames) + transcript


def test_models_doc_strands_offline_test_passes() -> None:
    run_blocks("docs/models.md")["test_a_small_refund_runs_unasked"]()


def test_models_doc_own_model_is_not_called_again_on_a_resume() -> None:
    namespace = run_blocks("docs/models.md")
    echo_model, echo, tool = namespace["EchoModel"], namespace["Echo"], namespace["tool"]
    calls: list[str] = []

    class Counting(echo_model):  # type: ignore[misc, valid-type]
        async def complete(self, messages: Any, tools: Any, emit: Any) -> Any:
            calls.append(messages[-1]["role"])
            return await super().complete(messages, tools, emit)

    class Asking(echo):  # type: ignore[misc, valid-type]
        model = Counting()

        @tool(approval=Approval("Search the catalogue?"))
        async def search(self, query: str) -> list[str]:
            """Search the catalogue."""
            return [f"A book about {query}"]

    with TestClient(app_for({"demo": Asking})) as client:
        frames = send(client, "tides")
        assert frames[-2]["type"] == "interrupt"
        resumed = decide(client, frames, "approve")
    assert resumed[-1]["text"] == 'I found ["A book about tides"].'
    # One call before the question, one after: the first comes back from the journal,
    # and what it emitted is not emitted again.
    assert calls == ["user", "tool"]
    assert "thinking" not in [f["type"] for f in resumed]


def test_testing_doc_model_test_passes() -> None:
    namespace = run_blocks("docs/testing.md")
    namespace["test_searches_then_answers_and_keeps_the_search_on_the_server"]()


def test_testing_doc_async_test_passes() -> None:
    namespace = run_blocks("docs/testing.md")
    anyio.run(namespace["test_echoes_over_an_async_client"])


def test_state_doc_promise_about_datetimes() -> None:
    import datetime

    with pytest.raises(StateValueError, match="when"):
        AgentState()["when"] = datetime.datetime.now()


def test_server_doc_refunds_asks_then_resumes() -> None:
    refunds = agents_in("docs/server.md")["Refunds"]
    with TestClient(app_for({"demo": refunds})) as client:
        frames = send(client, "refund please")
        request = frames[-2]["interrupt"]
        assert request["options"] == ["approve", "reject"]
        resumed = client.post(
            f"/agents/demo/contexts/{frames[0]['contextId']}/decisions",
            json={"interruptId": request["interruptId"], "value": "approve"},
        )
    resumed_frames = parse_sse(resumed.text)
    assert resumed_frames[-1]["text"] == "Refund issued."
    # The resumed run's reply follows the one that asked.
    assert resumed_frames[0]["afterTurnId"] == frames[0]["turnId"]


def test_the_protocol_doc_lists_every_error_code() -> None:
    from thinwire.codes import ERROR_CODES

    errors = (ROOT / "docs/protocol.md").read_text(encoding="utf-8").split("## Errors")[1]
    missing = [code for code in ERROR_CODES if f"`{code}`" not in errors]
    assert not missing, f"docs/protocol.md's Errors section misses {missing}"


def json_examples(page: str) -> list[Any]:
    """The JSON a page shows: each ```json block (a value, or one a line) and each
    ```console example's output that is JSON (not an event stream, nor cut short)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    examples = []
    for block in re.findall(r"```json\n(.*?)```", text, flags=re.DOTALL):
        try:
            examples.append(json.loads(block))
        except json.JSONDecodeError:
            examples.extend(json.loads(line) for line in block.splitlines())
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.DOTALL):
        for run in re.split(r"^\$ ", block, flags=re.M)[1:]:
            output = re.sub(r"\A(.*\\\n)*.*\n", "", run)  # the command, continued lines too
            with contextlib.suppress(json.JSONDecodeError):
                examples.append(json.loads(output))
    return examples


def without_patterns(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {key: without_patterns(v) for key, v in schema.items() if key != "pattern"}
    if isinstance(schema, list):
        return [without_patterns(v) for v in schema]
    return schema


def test_the_protocol_docs_json_examples_fit_the_wire_schema() -> None:
    """Each body, command and answer protocol.md shows is one of the wire schema's, fields
    and all — ids cut short (`ctx-2f77…`) aside."""
    text = (ROOT / "packages/client/src/generated/wire.schema.json").read_text(encoding="utf-8")
    schema = without_patterns(json.loads(text))  # so that ids cut short fit

    def fits(example: Any, name: str) -> bool:
        return jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{name}"}).is_valid(
            example
        )

    examples = json_examples("docs/protocol.md")
    assert len(examples) >= 12
    for example in examples:
        assert any(fits(example, name) for name in schema["$defs"]), example


def test_the_proxys_body_limit_is_above_the_servers() -> None:
    """A body the proxy refuses gets its HTML 413, not thinwire's JSON one."""
    text = (ROOT / "docs/deploy.md").read_text(encoding="utf-8")
    limits = re.findall(r"client_max_body_size (\d+)([km]?);", text)
    assert limits
    from thinwire.demo import DemoAgent

    default = app_for({"demo": DemoAgent}).state.thinwire.max_body_bytes
    assert f"{default:,} bytes" in text  # the default, stated in words
    for number, unit in limits:
        assert int(number) * {"": 1, "k": 1024, "m": 1024**2}[unit] > default, number + unit


def deploy_nginx_blocks() -> dict[str, str]:
    """deploy.md's two proxy configs: `one host`, a whole nginx.conf in front of one
    process, and `replicas`, what the replicas' proxy puts inside `http {}`."""
    text = (ROOT / "docs/deploy.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```nginx\n(.*?)```", text, re.DOTALL)
    (one_host,) = [block for block in blocks if re.search(r"^http \{$", block, re.M)]
    (replicas,) = [block for block in blocks if block is not one_host]
    return {"one host": one_host, "replicas": replicas}


def without_tls(block: str, listen: str) -> str:
    """A proxy config as written, but for TLS (no certificates here): on `listen`."""
    assert "limit_req zone=" in block and "client_body_timeout" in block
    plain = re.sub(r"listen 443 ssl;", f"listen {listen};", block)
    return re.sub(r"\n\s*ssl_certificate\S* [^\n]*;", "", plain)


def deploy_nginx_config(
    tmp_path: Path, listen: str = "127.0.0.1:8443", replica: str | None = None
) -> Path:
    """The replicas' proxy block of deploy.md as written, but for TLS: on `listen`, in
    front of its replicas, or of `replica` alone."""
    plain = without_tls(deploy_nginx_blocks()["replicas"], listen)
    if replica is not None:
        plain = re.sub(r"server 10\.0\.0\.\d+:\d+;", f"server {replica};", plain)
    config = tmp_path / "nginx.conf"
    config.write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log stderr;\nevents {{}}\n"
        f"http {{\naccess_log off;\n{plain}\n}}\n",
        encoding="utf-8",
    )
    return config


def one_host_nginx_config(
    tmp_path: Path, listen: str = "127.0.0.1:8443", upstream: str | None = None
) -> Path:
    """deploy.md's whole nginx.conf for one process as written, but for TLS, with its
    logs and pid file (the distribution's, unnamed) in `tmp_path`, and in front of
    `upstream` if given."""
    plain = without_tls(deploy_nginx_blocks()["one host"], listen)
    plain = plain.replace("/var/log/nginx/", f"{tmp_path}/")
    if upstream is not None:
        plain, proxied = re.subn(
            r"proxy_pass http://127\.0\.0\.1:8000;", f"proxy_pass http://{upstream};", plain
        )
        assert proxied == 1
    config = tmp_path / "nginx.conf"
    config.write_text(f"pid {tmp_path}/nginx.pid;\n{plain}", encoding="utf-8")
    return config


def nginx_command(tmp_path: Path) -> list[str]:
    return [shutil.which("nginx") or "nginx", "-e", "stderr", "-p", str(tmp_path)]


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
@pytest.mark.parametrize("make_config", [deploy_nginx_config, one_host_nginx_config])
def test_the_deploy_docs_nginx_configs_are_taken_by_nginx(
    tmp_path: Path, make_config: Callable[[Path], Path]
) -> None:
    """Each proxy config as written, but for TLS (no certificates here), passes
    `nginx -t`; the one-host one as a whole nginx.conf, `events` and `http` and all."""
    config = make_config(tmp_path)
    checked = subprocess.run(
        [*nginx_command(tmp_path), "-t", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert checked.returncode == 0, checked.stderr


class Replica(http.server.BaseHTTPRequestHandler):
    """Stands in for thinwire behind the proxy: answers every GET, noting its path."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "7")
        self.end_headers()
        self.wfile.write(b"replica")

    def log_message(self, format: str, *args: object) -> None:
        pass


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def running_nginx(tmp_path: Path, config: Path, port: int) -> Iterator[None]:
    """nginx on `config`, listening on `port`, until the block ends."""
    nginx = subprocess.Popen(
        [*nginx_command(tmp_path), "-g", "daemon off;", "-c", str(config)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(200):  # until nginx listens (or exits: its stderr says why)
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                nginx.wait(timeout=0.05)
            assert nginx.returncode is None, nginx.communicate()[1]
        yield
    finally:
        nginx.terminate()
        nginx.communicate(timeout=10)


OPERATOR = {"Authorization": "Bearer " + "t" * 32}


def status_of_get(port: int, path: str) -> int:
    """A GET with an operator's token, as sent (`//admin`, `/%61dmin` and all)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=OPERATOR)
        return connection.getresponse().status
    finally:
        connection.close()


ADMIN_SPELLINGS = (
    "/admin",
    "/admin/metrics",
    "//admin/metrics",
    "/%61dmin/metrics",
    "/agents/../admin/metrics",
)


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
def test_the_deploy_docs_proxy_keeps_the_operator_api_off_the_internet(tmp_path: Path) -> None:
    """Through the proxy as deploy.md writes it, the app's routes reach a replica and
    `/admin` — however its path is spelled — does not: operators use a replica's own
    port."""
    replica = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Replica)
    Replica.seen = []
    threading.Thread(target=replica.serve_forever, daemon=True).start()
    port = unused_port()
    config = deploy_nginx_config(tmp_path, f"127.0.0.1:{port}", f"127.0.0.1:{replica.server_port}")
    try:
        with running_nginx(tmp_path, config, port):
            assert status_of_get(port, "/agents/demo/contexts") == 200  # the app's routes pass
            for path in ADMIN_SPELLINGS:
                assert status_of_get(port, path) == 403, path
        assert Replica.seen == ["/agents/demo/contexts"]
    finally:
        replica.shutdown()
        replica.server_close()


ONE_HOST_APP = """
import anyio

from thinwire import Agent, Run, anonymous, create_app


class Waits(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say("first")
        await anyio.sleep_forever()  # until stopped: its stream stays open till then


app = create_app(
    {"demo": Waits},
    identify=anonymous,
    allowed_hosts=["chat.example.com"],
    operator_token="%s",
)
"""


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
def test_the_deploy_docs_one_host_proxy_streams_from_thinwire_serve(tmp_path: Path) -> None:
    """deploy.md's nginx.conf in front of one `thinwire serve` process: a page's POST
    passes the Origin check, its stream's frames come through as they are sent (the run
    is still going when the first arrives), a WebSocket opens, and `/admin` is denied
    through the proxy while the process's own port serves it."""
    import httpx
    from websockets.sync.client import connect
    from websockets.typing import Origin

    from thinwire.testing import serve

    token = OPERATOR["Authorization"].removeprefix("Bearer ")
    (tmp_path / "one_host.py").write_text(ONE_HOST_APP % token, encoding="utf-8")
    port = unused_port()
    proxy = f"127.0.0.1:{port}"
    with serve("serve", "one_host:app", cwd=tmp_path) as server:
        config = one_host_nginx_config(tmp_path, proxy, f"127.0.0.1:{server.port}")
        with running_nginx(tmp_path, config, port), httpx.Client(timeout=10) as client:
            body = {"message": {"text": "hi"}}
            page = {"Origin": f"http://{proxy}"}
            with client.stream(
                "POST", f"http://{proxy}/agents/demo/runs", json=body, headers=page
            ) as stream:
                assert stream.status_code == 200
                frames = (
                    json.loads(line[6:])
                    for line in stream.iter_lines()
                    if line.startswith("data: ")
                )
                first = next(frame for frame in frames if frame["type"] == "token")
                assert first["delta"] == "first"
                stop = f"http://{proxy}/agents/demo/contexts/{first['contextId']}/stop"
                assert client.post(stop, headers=page).json()["stopping"] is True
                assert list(frames)[-1]["stopReason"] == "stopped"
            with connect(f"ws://{proxy}/agents/demo/ws", origin=Origin(f"http://{proxy}")):
                pass  # the handshake passed the upgrade on
            for path in ADMIN_SPELLINGS:
                assert status_of_get(port, path) == 403, path
            assert client.get(f"{server.url}/admin/metrics", headers=OPERATOR).status_code == 200


def test_the_protocol_doc_lists_every_close_code() -> None:
    """Those thinwire closes a socket with, uvicorn's 1012 as it shuts down among them."""
    from thinwire.codes import CLOSE_CODES

    text = (ROOT / "docs/protocol.md").read_text(encoding="utf-8").split("| close code |")[1]
    listed = {int(code) for code in re.findall(r"^\| (\d{4}) \|", text, re.MULTILINE)}
    assert listed == set(CLOSE_CODES)


def test_the_hook_doc_lists_every_client_error_code() -> None:
    """Each code the client raises by itself has its row, saying when, in hook.md's table."""
    from thinwire.codes import CLIENT_ERROR_CODES

    text = (ROOT / "docs/hook.md").read_text(encoding="utf-8")
    table = text.split("the\ngenerated `ClientErrorCode`:")[1].split("\n\n")[1]
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", table, re.MULTILINE)
    assert sorted(code for code, _ in rows) == sorted(CLIENT_ERROR_CODES)
    assert all(when.strip() for _, when in rows)


def console_example(page: str, command: str) -> str:
    """The ```console block of a page that runs `command` (its first line)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = re.findall(r"```console\n(.*?)```", text, flags=re.DOTALL)
    return next(block for block in blocks if block.startswith(command))


def shown_frames(block: str) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events a console example shows, as (id, frame); `…` lines skip some."""
    return [
        (sse_id, json.loads(data))
        for sse_id, data in re.findall(r"^id: (\d+)\ndata: (.*)$", block, re.M)
    ]


def assert_frame_shown(shown: dict[str, Any], real: dict[str, Any]) -> None:
    """The frame the docs show is the real one, but for the ids they cut short: `ctx-2f77…`
    stands for any `ctx-` id."""
    real = {key: value for key, value in real.items() if key != "_id"}
    assert shown.keys() == real.keys(), (shown, real)
    for key, value in shown.items():
        if isinstance(value, str) and value.endswith("…"):
            prefix = value.rsplit("-", 1)[0] + "-"
            assert str(real[key]).startswith(prefix), (key, value, real[key])
        else:
            assert value == real[key], (key, value, real[key])


def assert_stream_shown(example: str, frames: list[dict[str, Any]]) -> None:
    """A console example shows these frames under their ids, ending with the last one."""
    by_seq = {frame["seq"]: frame for frame in frames}
    shown = shown_frames(example)
    assert shown[-1][0] == frames[-1]["_id"], "the example ends where the run does"
    for sse_id, frame in shown:
        assert by_seq[int(sse_id)]["_id"] == sse_id
        assert_frame_shown(frame, by_seq[int(sse_id)])


def protocol_first_run(client: TestClient) -> tuple[str, list[dict[str, Any]]]:
    """protocol.md's first run, made as it shows it: its example, and its frames."""
    run = console_example("docs/protocol.md", "$ curl -N -X POST localhost:8000/agents/demo/runs")
    body = re.search(r"-d '([^']*)'", run)
    assert body is not None
    response = client.post(
        "/agents/demo/runs", content=body[1], headers={"content-type": "application/json"}
    )
    return run, parse_sse(response.text)


def test_the_protocol_docs_streams_are_the_demos(client: TestClient) -> None:
    """protocol.md's first run and its reattach show what `thinwire demo` sends: the same
    frames under the same ids, the run ending with the last one shown."""
    run, frames = protocol_first_run(client)
    assert_stream_shown(run, frames)

    command = "$ curl -N localhost:8000/agents/demo/contexts/ctx-2f77…/events -H 'Last-Event-ID: "
    attach = console_example("docs/protocol.md", command)
    after = re.match(r".*Last-Event-ID: (\d+)'", attach)
    assert after is not None
    context_id = frames[0]["contextId"]
    response = client.get(
        f"/agents/demo/contexts/{context_id}/events", headers={"Last-Event-ID": after[1]}
    )
    output = attach.split("\n", 1)[1]
    assert response.text.startswith(output.split("\n\n", 1)[0] + "\n\n")  # the retry line
    resent = {frame["seq"]: frame for frame in parse_sse(response.text)}
    for sse_id, frame in shown_frames(attach):
        assert_frame_shown(frame, resent[int(sse_id)])


def test_the_protocol_docs_decision_is_the_demos(client: TestClient) -> None:
    """protocol.md's answer to an interrupt shows what `thinwire demo` sends once its first
    run went on with the refund it names: the continued run's frames under their ids."""
    _, first = protocol_first_run(client)
    context_id = first[0]["contextId"]
    section = (ROOT / "docs/protocol.md").read_text(encoding="utf-8")
    section = section.split("## Answer an interrupt")[1].split("\n## ")[0]
    message = re.search(r"goes on with `([^`]+)`", section)
    assert message is not None
    asked = send(client, message[1], context_id)
    assert [frame["type"] for frame in asked[-2:]] == ["interrupt", "done"]
    interrupt_id = asked[-2]["interrupt"]["interruptId"]
    command = "$ curl -N -X POST localhost:8000/agents/demo/contexts/ctx-2f77…/decisions"
    example = console_example("docs/protocol.md", command)
    body = re.search(r"-d '([^']*)'", example)
    assert body is not None
    request = json.loads(body[1])
    shortened = request["interruptId"]
    assert shortened.endswith("…") and interrupt_id.startswith(shortened[:-1].rsplit("-", 1)[0])
    assert f'"interruptId":"{shortened}"' in section  # the one the prose says the run asked
    request["interruptId"] = interrupt_id
    response = client.post(f"/agents/demo/contexts/{context_id}/decisions", json=request)
    assert response.status_code == 200, response.text
    assert_stream_shown(example, parse_sse(response.text))


def test_the_server_doc_states_the_operator_apis_limits_as_the_code_has_them() -> None:
    from thinwire.admin import AUDIT_PAGE, EXPORT_PAGE, MAX_AUDIT_PAGE, MAX_PATCH_BYTES
    from thinwire.records import USAGE_KEPT
    from thinwire.settings import OPERATOR_TOKEN_LENGTH

    text = (ROOT / "docs/server.md").read_text(encoding="utf-8")
    section = " ".join(text.split("## The operator API")[1].split("\n## ")[0].split())
    mib, rest = divmod(MAX_PATCH_BYTES, 1024**2)
    assert rest == 0 and f"`413 body_too_large` (a body over {mib} MiB)" in section
    assert f"for each of the latest {USAGE_KEPT} runs" in section
    assert f"shorter than {OPERATOR_TOKEN_LENGTH} characters" in section
    assert f"entries (1\u2013{MAX_AUDIT_PAGE}, {AUDIT_PAGE} unless told)" in section  # an en dash
    assert f"the exchanges and the audit trail {EXPORT_PAGE} at a time" in section


def test_the_server_doc_names_every_create_app_option() -> None:
    import inspect

    from thinwire import create_app

    text = (ROOT / "docs/server.md").read_text(encoding="utf-8")
    documented = text.split("create_app(\n", 1)[1].split("\n)", 1)[0]
    names = {line.split("=")[0].split(",")[0].strip() for line in documented.splitlines()}
    assert names == set(inspect.signature(create_app).parameters)


def test_the_server_doc_names_every_cli_option(capsys: pytest.CaptureFixture[str]) -> None:
    from thinwire.cli import main

    text = (ROOT / "docs/server.md").read_text(encoding="utf-8").split("## The CLI")[1]
    for command in ("serve", "demo"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        options = set(re.findall(r"--[a-z-]+", capsys.readouterr().out)) - {"--help"}
        missing = sorted(option for option in options if option not in text)
        assert not missing, f"docs/server.md's CLI section misses {missing} of {command}"


def test_the_demos_model_variables_are_named_in_models_md_and_its_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from thinwire import demo_model
    from thinwire.cli import main

    read = set(re.findall(r'"(OPENAI_[A-Z_]+)"', Path(demo_model.__file__).read_text()))
    assert read == {"OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"}
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps its lines
    text = (ROOT / "docs/models.md").read_text(encoding="utf-8")
    demo = next(p for p in text.split("\n\n") if "thinwire demo" in p)
    for name in sorted(read):
        assert f"${name}" in demo, f"models.md's demo paragraph does not name ${name}"
        assert f"${name}" in shown, f"thinwire demo --help does not name ${name}"


def test_the_server_doc_names_every_method_of_run() -> None:
    from thinwire import Run

    kit_only = {"end", "end_tool_calls", "handed_to", "shown", "storable_text"}  # the runner's
    text = (ROOT / "docs/server.md").read_text(encoding="utf-8")
    table = text.split("What `Run` gives the agent:", 1)[1].split("\n\n", 2)[1]
    members = {
        name
        for name in dir(Run)
        if not name.startswith("_") and name not in kit_only and callable(getattr(Run, name))
    }
    missing = sorted(name for name in members if f"run.{name}(" not in table)
    assert not missing, f"docs/server.md's table of what Run gives misses {missing}"


def test_the_server_doc_names_every_class_attribute_of_agent() -> None:
    from thinwire import Agent

    text = (ROOT / "docs/server.md").read_text(encoding="utf-8")
    paragraph = text.split("Class attributes configure the agent:", 1)[1].split("\n\n", 1)[0]
    settings = [name for name, kind in Agent.__annotations__.items() if "ClassVar" in str(kind)]
    missing = [name for name in settings if f"`{name}`" not in paragraph]
    assert not missing, f"docs/server.md's paragraph of class attributes misses {missing}"


def built_files() -> set[str]:
    """What `make dist` puts in dist/: the wheel and the npm tarballs, at their versions."""
    python = re.search(r'^version = "(.*)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert python is not None
    npm = {
        name: json.loads((ROOT / f"packages/{name}/package.json").read_text())["version"]
        for name in ("client", "react")
    }
    return {
        f"dist/thinwire-{python[1]}-py3-none-any.whl",
        *(f"dist/thinwire-{name}-{version}.tgz" for name, version in npm.items()),
    }


@pytest.mark.parametrize("name", ["README.md", "docs/server.md", "docs/hook.md"])
def test_the_install_pages_say_how_to_install_before_the_registries_have_it(name: str) -> None:
    """The pages a reader installs from name what `make dist` builds, as it names it: the
    packages are not on PyPI or npm yet."""
    text = (ROOT / name).read_text(encoding="utf-8")
    named = set(re.findall(r"dist/thinwire-[\w.-]+?\.(?:whl|tgz)", text))
    assert named, f"{name} does not say how to install from make dist"
    assert named <= built_files(), f"{name} names {sorted(named - built_files())}"


def test_the_server_doc_says_what_the_demo_does(client: TestClient) -> None:
    """The demo's section quotes what the demo agent answers to each kind of message, and
    the README's quick start points at the approval flow."""
    text = (ROOT / "docs/server.md").read_text(encoding="utf-8")
    section = text.split("\n## The demo\n")[1].split("\n## ")[0]
    asked = send(client, "I'd like a REFUND")
    prompt = asked[-2]["interrupt"]["prompt"]
    assert f'asks "{prompt}"' in section
    assert f'says "{asked[-1]["text"].strip()}"' in section
    approved = decide(client, asked, "approve")[-1]["text"]
    again = send(client, "refund", asked[0]["contextId"])
    rejected = decide(client, again, "reject")[-1]["text"]
    assert f'says "{approved}"' in section and f'says "{rejected}"' in section
    failed = send(client, "explode")
    assert failed[-1]["stopReason"] == "error"
    assert f'says "{failed[-1]["text"].strip()}"' in section
    named = send(client, "call this conversation Trip plans")
    assert [f["title"] for f in named if f["type"] == "title"] == ["Trip plans"]
    assert "| starts with `call this conversation ` |" in section
    for trigger in ("refund", "explode"):
        assert f"| contains `{trigger}` |" in section
    readme = (ROOT / "README.md").read_text(encoding="utf-8").split("## Quick start")[1]
    assert "refund" in readme.split("\n## ")[0]


def console_session(block: str) -> list[tuple[str, str]]:
    """A console example's commands (a `$ ` line and its `\\` continuations), each with the
    output shown under it, its lines joined."""
    session: list[tuple[str, str]] = []
    continued = False
    for line in block.splitlines():
        if line.startswith("$ "):
            session.append((line[2:], ""))
            continued = line.endswith("\\")
        elif continued:
            command, output = session[-1]
            session[-1] = (f"{command}\n{line}", output)
            continued = line.endswith("\\")
        elif line.strip():
            command, output = session[-1]
            session[-1] = (command, output + line.strip())
    return session


def assert_json_shown(shown: Any, real: Any, where: str = "") -> None:
    """The JSON a doc shows is the real one, but for values it cuts short (`"ctx-…"`: any
    string so starting) and the times (`time`, `createdAt`…), which are any number."""
    if isinstance(shown, dict):
        assert isinstance(real, dict) and shown.keys() == real.keys(), (where, shown, real)
        for key in shown:
            if key == "time" or key.endswith("At"):
                assert isinstance(real[key], float), (where, real[key])
            else:
                assert_json_shown(shown[key], real[key], f"{where}.{key}")
    elif isinstance(shown, list):
        assert isinstance(real, list) and len(shown) == len(real), (where, shown, real)
        for index, (one, other) in enumerate(zip(shown, real, strict=True)):
            assert_json_shown(one, other, f"{where}[{index}]")
    elif isinstance(shown, str) and shown.endswith("…"):
        assert isinstance(real, str) and real.startswith(shown[:-1]), (where, shown, real)
    else:
        assert shown == real, (where, shown, real)


def curl_version() -> tuple[int, ...] | None:
    if shutil.which("curl") is None:
        return None
    done = subprocess.run(["curl", "--version"], capture_output=True, text=True, timeout=30)
    found = re.match(r"curl (\d+)\.(\d+)", done.stdout)
    return None if found is None else (int(found[1]), int(found[2]))


@pytest.mark.skipif(
    (curl_version() or (0,)) < (7, 84), reason="curl 7.84 or newer (-w %header) is not here"
)
def test_the_server_docs_operator_session_runs_against_the_demo(tmp_path: Path) -> None:
    """The operator API's console example, run as written by bash and curl against
    `thinwire demo` started as the page says, shows what they print."""
    from thinwire.testing import serve

    text = (ROOT / "docs/server.md").read_text(encoding="utf-8")
    section = text.split("## The operator API")[1].split("\n## ")[0]
    block = console_example("docs/server.md", "$ export TOKEN=")
    token = re.match(r"\$ export TOKEN=(\S+)", block)
    assert token is not None
    assert f"`THINWIRE_OPERATOR_TOKEN={token[1]} thinwire demo`" in section
    session = console_session(block)
    assert any("if-match: $VERSION" in command for command, _ in session)
    env = {"THINWIRE_OPERATOR_TOKEN": token[1], "THINWIRE_STORE_URL": "", "OPENAI_MODEL": ""}
    env |= {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}
    with serve("demo", "--delay", "0", "--data-dir", str(tmp_path / "data"), env=env) as server:
        script = ["set -eu"]
        for number, (command, _) in enumerate(session):
            command = command.replace("localhost:8000", f"localhost:{server.port}")
            script.append(f"{{\n{command}\n}} > {tmp_path}/out-{number}")
        done = subprocess.run(
            ["bash", "-c", "\n".join(script)], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stderr
    shown = [(number, output) for number, (_, output) in enumerate(session) if output]
    assert len(shown) == 4
    for number, output in shown:
        real = (tmp_path / f"out-{number}").read_text()
        assert_json_shown(json.loads(output), json.loads(real), session[number][0])


def test_the_architecture_doc_names_every_module_and_no_module_that_is_gone() -> None:
    """Its file map is where a reader finds the code: a module added (or moved, as the
    frame scheduler moved to @thinwire/client) without a line there is lost to them."""
    architecture = (ROOT / "docs/architecture.md").read_text()
    modules = [p.name for p in (ROOT / "server/thinwire").glob("*.py") if p.name != "__init__.py"]
    for package in ("client", "react"):
        source = ROOT / "packages" / package / "src"
        modules += [
            p.name
            for p in [*source.glob("*.ts"), *source.glob("*.tsx")]
            if ".test." not in p.name and not p.name.startswith("test-")
        ]
    assert [name for name in modules if name not in architecture] == []
    named = set(re.findall(r"\b[\w.-]+\.(?:py|tsx?)\b", architecture))
    everywhere = {
        p.name
        for p in [*(ROOT / "server").rglob("*.py"), *(ROOT / "packages").glob("*/src/**/*.ts*")]
    }
    assert sorted(named - everywhere) == []


def test_the_server_docs_person_script_exports_then_erases_a_persons_conversations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script of "A person's data", run against `thinwire demo`: it finds the person's
    conversations page after page, writes each one's export, then forgets them all, and
    no one else's."""
    import httpx

    from thinwire.testing import serve

    block = next(b for b in python_blocks("docs/server.md") if "def erase(" in b)
    token = "a-token-for-the-person-script"
    env = {"THINWIRE_OPERATOR_TOKEN": token, "THINWIRE_STORE_URL": "", "OPENAI_MODEL": ""}
    env |= {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}
    with serve("demo", "--delay", "0", "--data-dir", str(tmp_path / "data"), env=env) as server:
        monkeypatch.setenv("THINWIRE_URL", server.url)
        monkeypatch.setenv("THINWIRE_OPERATOR_TOKEN", token)
        script: dict[str, Any] = {"__name__": "person"}
        exec(compile(block, "docs/server.md", "exec", dont_inherit=True), script)
        script["PAGE"] = 2  # three conversations: two pages
        with httpx.Client(base_url=server.url) as guest, httpx.Client(base_url=server.url) as alice:
            assert alice.post("/demo/login", json={"user": "alice"}).status_code == 200
            for client, text in ((guest, "one"), (guest, "two"), (alice, "alice's"), (guest, "3")):
                sent = client.post("/agents/demo/runs", json={"message": {"text": text}})
                assert sent.status_code == 200
            mine = {
                c["contextId"] for c in guest.get("/agents/demo/contexts").json()["conversations"]
            }
            written = script["export"]("demo:guest", tmp_path / "exported")
            exported = [json.loads(path.read_text()) for path in written]
            assert {e["contextId"] for e in exported} == mine and len(mine) == 3
            assert {e["owner"] for e in exported} == {"demo:guest"}
            assert sorted(e["exchanges"][0]["messages"][0]["content"] for e in exported) == [
                "3",
                "one",
                "two",
            ]
            assert [p.name for p in written] == [f"demo-{e['contextId']}.json" for e in exported]
            assert script["erase"]("demo:guest") == 3
            assert guest.get("/agents/demo/contexts").json()["conversations"] == []
            assert len(alice.get("/agents/demo/contexts").json()["conversations"]) == 1
            assert script["erase"]("demo:guest") == 0


def heading_anchors(page: str) -> set[str]:
    """The anchors GitHub gives a page's headings (its duplicates' `-1`… aside)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)  # a `# comment` is no heading
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.*)$", text, re.M)
    }


@pytest.mark.parametrize("name", DOCS)
def test_every_link_to_a_section_finds_it(name: str) -> None:
    """A link such as `deploy.md#backups` lands on its heading: retitling a section (or
    a page's sections) must not leave the pages linking to it pointing at nothing."""
    text = (ROOT / name).read_text(encoding="utf-8")
    missing = []
    for target, anchor in re.findall(r"\]\(([\w./-]*\.md|)#([\w-]+)\)", text):
        page = (
            str((ROOT / name).parent.joinpath(target).resolve().relative_to(ROOT))
            if target
            else name
        )
        if anchor not in heading_anchors(page):
            missing.append(f"{target}#{anchor}")
    assert not missing, f"{name} links to sections that are not there: {missing}"


def test_the_readme_starts_from_the_packages_then_from_a_checkout() -> None:
    """A reader with the packages installed runs the demo without a checkout or make."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    packages = text.split("\n## Quick start, from the packages\n")[1].split("\n## ")[0]
    assert text.index("from the packages\n") < text.index("## Quick start, from a checkout")
    assert "thinwire demo" in packages and "make " not in packages
    assert "(#install)" in packages and "examples/" in packages


def test_the_models_doc_says_how_to_build_a_page_before_having_a_model() -> None:
    text = (ROOT / "docs/models.md").read_text(encoding="utf-8")
    recipes = text.split("\n### Recipes\n")[1].split("\n### ")[0]
    assert "`EchoModel`" in recipes and "(#your-own-model-chatmodel)" in recipes
    assert "local OpenAI-compatible server" in recipes
