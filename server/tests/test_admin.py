"""The operator API: separately authenticated, atomic, versioned and audited."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from conftest import app_for, parse_sse, send
from thinwire import Agent, Run, SQLiteStore
from thinwire.demo import DemoAgent, create_demo_app
from thinwire.errors import StateValueError

TOKEN = "operator-token-for-tests"
AUTH = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(app_for({"demo": DemoAgent}, operator_token=TOKEN)) as test_client:
        yield test_client


def state_url(context_id: str, tail: str = "state") -> str:
    return f"/admin/agents/demo/contexts/{context_id}/{tail}"


def patch(client: TestClient, context_id: str, body: Any, **headers: str) -> Any:
    return client.patch(state_url(context_id), json=body, headers={**AUTH, **headers})


def test_read_state_with_version_and_writable_keys(client: TestClient) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    response = client.get(state_url(context_id), headers=AUTH)
    assert response.status_code == 200
    body = response.json()
    assert body["state"]["messages_seen"] == 1
    assert body["writableKeys"] == ["messages_seen", "notes"]
    assert response.headers["etag"] == f'"{body["version"]}"'
    # A method the path does not take names those it does (the operator API is mounted).
    wrong = client.put(state_url(context_id), headers=AUTH)
    assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, HEAD, PATCH"


def test_patch_is_atomic_audited_and_versioned(client: TestClient) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    version = client.get(state_url(context_id), headers=AUTH).json()["version"]

    denied = patch(client, context_id, {"state": {"notes": ["x"], "secret": "stolen"}})
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "write_denied"
    assert "secret" in denied.json()["error"]["message"]

    stale = patch(client, context_id, {"state": {"notes": ["x"]}}, **{"if-match": '"999"'})
    assert stale.status_code == 412 and stale.json()["error"]["code"] == "version_mismatch"

    bad = client.patch(
        state_url(context_id),
        content=b'{"state": {"notes": NaN}}',
        headers={**AUTH, "content-type": "application/json"},
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_state_value"
    for lone in (b'{"state": {"notes": ["\\ud800"]}}', b'{"state": {"notes": {"\\udfff": 1}}}'):
        refused = client.patch(
            state_url(context_id),
            content=lone,
            headers={**AUTH, "content-type": "application/json"},
        )  # text UTF-8 cannot store: refused, not a 500 from the store
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "invalid_state_value"

    after_refusals = client.get(state_url(context_id), headers=AUTH).json()
    assert after_refusals["version"] == version and "notes" not in after_refusals["state"]

    ok = patch(
        client,
        context_id,
        {"state": {"notes": ["call back"], "messages_seen": 5}, "source": "ops-anna"},
        **{"if-match": f'"{version}"'},
    )
    assert ok.status_code == 200
    assert ok.json()["version"] == version + 1 and ok.json()["updatedKeys"] == [
        "messages_seen",
        "notes",
    ]
    history = client.get(state_url(context_id, "state/notes/history"), headers=AUTH).json()
    assert [(e["value"], e["source"]) for e in history["entries"]] == [
        (["call back"], "operator:ops-anna")
    ]
    # `If-Match: *` asks for no particular version; anything else must be one.
    anyway = patch(client, context_id, {"state": {"notes": []}}, **{"if-match": "*"})
    assert anyway.status_code == 200 and anyway.json()["version"] == version + 2
    odd = patch(client, context_id, {"state": {"notes": []}}, **{"if-match": "latest"})
    assert odd.status_code == 400 and odd.json()["error"]["code"] == "invalid_request"
    # A list (RFC 9110) takes any version it names.
    stale_list = patch(client, context_id, {"state": {"notes": []}}, **{"if-match": '"1", "2"'})
    assert stale_list.status_code == 412 and "not 1, 2" in stale_list.json()["error"]["message"]
    listed = patch(
        client, context_id, {"state": {"notes": []}}, **{"if-match": f'"1", "{version + 2}"'}
    )
    assert listed.status_code == 200 and listed.json()["version"] == version + 3
    trail = client.get(state_url(context_id, "audit"), headers=AUTH).json()["entries"]
    assert [(e["key"], e["source"]) for e in trail] == [
        ("secret", "system"),
        ("messages_seen", "system"),
        ("messages_seen", "agent:demo"),
        ("notes", "operator:ops-anna"),
        ("messages_seen", "operator:ops-anna"),
        ("notes", "operator:api"),
        ("notes", "operator:api"),
    ]
    # The agent sees the operator's write on its next run, and its own write is audited.
    send(client, "again", context_id)
    assert client.get(state_url(context_id), headers=AUTH).json()["state"]["messages_seen"] == 6


@pytest.mark.parametrize(
    "body",
    [{}, {"state": {}}, {"state": {"notes": 1}, "source": "has spaces"}, {"state": [], "x": 1}],
)
def test_malformed_patches_are_typed(client: TestClient, body: Any) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    response = patch(client, context_id, body)
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_request"


def test_if_match_in_several_headers_is_one_list(client: TestClient) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    version = client.get(state_url(context_id), headers=AUTH).json()["version"]
    body = {"state": {"notes": ["x"]}}

    def patched(*tags: str) -> Any:
        headers = [*AUTH.items(), *(("if-match", tag) for tag in tags)]
        return client.patch(state_url(context_id), json=body, headers=headers)

    stale = patched('"998"', '"999"')  # every header counts, not the first alone
    assert stale.status_code == 412 and "not 998, 999" in stale.json()["error"]["message"]
    listed = patched('"998"', f'"{version}"')
    assert listed.status_code == 200 and listed.json()["version"] == version + 1
    version += 1
    # If-Match compares strongly (RFC 9110 13.1.1): a weak tag never matches, not even
    # the current version's.
    for tags in ((f'W/"{version}"',), ('"998"', f'W/"{version}"'), (f'"998", W/"{version}"',)):
        weak = patched(*tags)
        assert weak.status_code == 412, tags
        assert weak.json()["error"]["code"] == "version_mismatch"
        assert "weak" in weak.json()["error"]["message"]
    assert client.get(state_url(context_id), headers=AUTH).json()["version"] == version
    assert patched('"998"', f'W/"998", "{version}"').status_code == 200


def test_operator_api_needs_its_own_token(tmp_path: Path) -> None:
    app = create_demo_app(delay=0, data_dir=tmp_path, store=SQLiteStore(tmp_path / "db"))
    with TestClient(app) as demo:  # no operator token configured: no operator API at all
        assert demo.get(state_url("ctx-" + "0" * 36), headers=AUTH).status_code == 404

    with TestClient(app_for({"demo": DemoAgent}, operator_token=TOKEN)) as client:
        context_id = send(client, "hi")[0]["contextId"]
        refused = [
            {},
            {"authorization": "Bearer wrong"},
            {"authorization": TOKEN},
            {"authorization": f"Basic {TOKEN}"},
            {"authorization": f"Bearer {TOKEN} "},
        ]
        for headers in refused:
            response = client.get(state_url(context_id), headers=headers)
            assert response.status_code == 401
            assert response.json()["error"]["code"] == "unauthorized"
            assert response.headers["www-authenticate"] == "Bearer"
        for scheme in ("Bearer", "bearer", "BEARER"):  # the scheme is case-insensitive
            headers = {"authorization": f"{scheme} {TOKEN}"}
            assert client.get(state_url(context_id), headers=headers).status_code == 200


@pytest.mark.parametrize(
    "weak", [" ", "a", "fifteen-chars-x", f" {TOKEN}", f"{TOKEN}\n", "\t" * 20]
)
def test_a_weak_operator_token_is_refused_at_startup(
    weak: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The bearer token alone opens /admin: one a guess finds, or padded by a copy and
    # paste, must not turn it on.
    with pytest.raises(ValueError, match="operator_token"):
        app_for({"demo": DemoAgent}, operator_token=weak)
    # Set for the demo, the message names the variable — by the CLI too, before serving.
    monkeypatch.setenv("THINWIRE_OPERATOR_TOKEN", weak)
    with pytest.raises(ValueError, match=r"\$THINWIRE_OPERATOR_TOKEN"):
        create_demo_app(delay=0, data_dir=tmp_path, store=SQLiteStore(tmp_path / "db"))
    from thinwire import cli

    monkeypatch.setattr(cli, "run", lambda *a, **k: pytest.fail("served with a weak token"))
    with pytest.raises(SystemExit):
        cli.main(["demo", "--data-dir", str(tmp_path / "cli")])
    assert "error: $THINWIRE_OPERATOR_TOKEN must " in capsys.readouterr().err


@pytest.mark.parametrize("none", [None, ""])
def test_no_operator_token_no_operator_api(
    none: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TestClient(app_for({"demo": DemoAgent}, operator_token=none)) as client:
        assert client.get(state_url("ctx-" + "0" * 36), headers=AUTH).status_code == 404
    if none is not None:
        monkeypatch.setenv("THINWIRE_OPERATOR_TOKEN", none)
    app = create_demo_app(delay=0, data_dir=tmp_path, store=SQLiteStore(tmp_path / "db"))
    with TestClient(app) as demo:
        assert demo.get(state_url("ctx-" + "0" * 36), headers=AUTH).status_code == 404


def test_ui_credentials_do_not_open_the_operator_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THINWIRE_OPERATOR_TOKEN", TOKEN)
    app = create_demo_app(delay=0, data_dir=tmp_path, store=SQLiteStore(tmp_path / "db"))
    with TestClient(app) as client:
        assert client.post("/demo/login", json={"user": "alice"}).status_code == 200
        context_id = send(client, "hi")[0]["contextId"]
        assert client.get(state_url(context_id)).status_code == 401  # the cookie is not enough
        assert client.get(state_url(context_id), headers=AUTH).status_code == 200
        # ...and the operator token is no identity for the UI endpoints.
        client.cookies.clear()
        ui = client.get(f"/agents/demo/contexts/{context_id}", headers=AUTH)
        assert ui.status_code == 404


class Waiting(Agent):
    release = asyncio.Event()

    async def run(self, run: Run, text: str) -> None:
        await type(self).release.wait()


def test_patch_during_a_run_is_context_busy() -> None:
    Waiting.release = asyncio.Event()
    with TestClient(app_for({"demo": Waiting}, operator_token=TOKEN)) as client:
        with client.stream("POST", "/agents/demo/runs", json={"message": {"text": "a"}}) as stream:
            lines = stream.iter_lines()
            context_id = parse_sse("\n".join(iter(lambda: next(lines), "")))[0]["contextId"]
            busy = patch(client, context_id, {"state": {"k": 1}})
            assert busy.status_code == 409 and busy.json()["error"]["code"] == "context_busy"
            assert client.portal is not None
            client.portal.call(Waiting.release.set)
            "\n".join(lines)
        assert patch(client, context_id, {"state": {"k": 1}}).status_code == 200


class Writing(Agent):
    release = asyncio.Event()

    async def run(self, run: Run, text: str) -> None:
        run.state["k"] = text
        await type(self).release.wait()


def test_a_running_runs_writes_are_not_read_before_they_land() -> None:
    """The state read is the one saved with the version its ETag names."""
    Writing.release = asyncio.Event()
    Writing.release.set()
    with TestClient(app_for({"demo": Writing}, operator_token=TOKEN)) as client:
        context_id = send(client, "first")[0]["contextId"]
        saved = client.get(state_url(context_id), headers=AUTH)
        assert saved.json()["state"] == {"k": "first"}
        Writing.release = asyncio.Event()
        body = {"contextId": context_id, "message": {"text": "second"}}
        with client.stream("POST", "/agents/demo/runs", json=body) as stream:
            lines = stream.iter_lines()
            next(lines)  # run_start: the run has begun and written
            during = client.get(state_url(context_id), headers=AUTH)
            assert during.json()["state"] == {"k": "first"}
            assert during.json()["version"] == int(during.headers["etag"].strip('"'))
            assert client.portal is not None
            client.portal.call(Writing.release.set)
            "\n".join(lines)
        assert client.get(state_url(context_id), headers=AUTH).json()["state"] == {"k": "second"}


def test_audit_survives_a_restart(tmp_path: Path) -> None:
    def app() -> Any:
        return app_for(
            {"demo": DemoAgent}, operator_token=TOKEN, store=SQLiteStore(tmp_path / "db")
        )

    with TestClient(app()) as client:
        context_id = send(client, "hi")[0]["contextId"]
        patch(client, context_id, {"state": {"notes": ["kept"]}, "source": "anna"})
    with TestClient(app()) as restarted:
        state = restarted.get(state_url(context_id), headers=AUTH).json()
        assert state["state"]["notes"] == ["kept"]
        history = restarted.get(state_url(context_id, "state/notes/history"), headers=AUTH).json()
        assert [e["source"] for e in history["entries"]] == ["operator:anna"]


class WritesKey(Agent):
    """Writes `key`; names `source` as the writer of a second write, when there is one."""

    key: ClassVar[str] = "notes"
    source: ClassVar[Any] = None

    async def run(self, run: Run, text: str) -> None:
        run.state[type(self).key] = text
        if type(self).source is not None:
            run.state.set("paid", True, source=type(self).source)


#: Keys of every ASCII character, alone and between two letters, and of edge lengths.
CANDIDATE_KEYS = [
    *(key for code in range(128) for key in (chr(code), f"a{chr(code)}b")),
    *["", "..", "...", "ключ", "x" * 128, "x" * 129],
]


class WritesWhatItCan(Agent):
    """Writes every candidate key AgentState takes."""

    async def run(self, run: Run, text: str) -> None:
        for key in CANDIDATE_KEYS:
            with contextlib.suppress(StateValueError):
                run.state[key] = key


def test_every_key_an_agent_can_write_the_operator_api_can_name() -> None:
    with TestClient(app_for({"demo": WritesWhatItCan}, operator_token=TOKEN)) as client:
        context_id = send(client, "hi")[0]["contextId"]
        written = client.get(state_url(context_id), headers=AUTH).json()["state"]
        assert {"a-b", "a.b", "a:b", "a@b", "a_b", "...", "x" * 128} <= set(written)
        for key in written:
            url = state_url(context_id, f"state/{quote(key, safe='')}/history")
            history = client.get(url, headers=AUTH)
            assert history.status_code == 200, (key, history.text)
            assert [(e["key"], e["value"]) for e in history.json()["entries"]] == [(key, key)]


@pytest.mark.parametrize("key", ["", ".", "..", "a/b", "a b", "k?x"])
def test_a_key_no_url_can_name_is_refused_to_the_operator_too(key: str) -> None:
    WritesKey.key, WritesKey.source = "notes", None
    with TestClient(app_for({"demo": WritesKey}, operator_token=TOKEN)) as client:
        context_id = send(client, "hi")[0]["contextId"]
        refused = patch(client, context_id, {"state": {"notes": [], key: 1}})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "invalid_state_value"
        assert "is not a key name" in refused.json()["error"]["message"]
        assert client.get(state_url(context_id), headers=AUTH).json()["state"] == {"notes": "hi"}


def test_an_agent_names_the_writer_of_a_write() -> None:
    WritesKey.key, WritesKey.source = "notes", "billing-webhook"
    with TestClient(app_for({"demo": WritesKey}, operator_token=TOKEN)) as client:
        context_id = send(client, "hi")[0]["contextId"]
        trail = client.get(state_url(context_id, "audit"), headers=AUTH).json()["entries"]
    assert [(e["key"], e["source"]) for e in trail] == [
        ("notes", "agent:demo"),
        ("paid", "billing-webhook"),
    ]


@pytest.mark.parametrize(
    ("source", "complaint"),
    [
        ("operator:ops-anna", "'operator:' names the operator API's writes"),
        ("operator:", "'operator:' names the operator API's writes"),
        (123, "a write's source is a str, not int"),
        ("", "source='': a write's source is 1 to 64 of"),
        ("has spaces", "source='has spaces': a write's source is 1 to 64 of"),
        ("x" * 65, "a write's source is 1 to 64 of"),
    ],
)
def test_an_agent_cannot_name_a_writer_the_operator_api_refuses_or_pass_for_it(
    source: Any, complaint: str, caplog: pytest.LogCaptureFixture
) -> None:
    WritesKey.key, WritesKey.source = "notes", source
    caplog.set_level(logging.ERROR, "thinwire")
    with TestClient(app_for({"demo": WritesKey}, operator_token=TOKEN)) as client:
        frames = send(client, "hi")
        assert frames[-2]["code"] == "agent_error" and frames[-1]["stopReason"] == "error"
        context_id = frames[0]["contextId"]
        trail = client.get(state_url(context_id, "audit"), headers=AUTH).json()["entries"]
    assert [(e["key"], e["source"]) for e in trail] == [("notes", "agent:demo")]
    logged = "\n".join(str(r.exc_info[1]) for r in caplog.records if r.exc_info)
    assert complaint in logged


class Hoards(Agent):
    max_state_value_bytes = 1000

    async def run(self, run: Run, text: str) -> None:
        run.state["small"] = text
        run.state["big"] = "x" * 1000


def test_a_value_over_the_agents_limit_is_refused_to_the_agent_and_the_operator(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert Agent.max_state_value_bytes == 1024 * 1024  # by default
    caplog.set_level(logging.ERROR, "thinwire")
    with TestClient(app_for({"demo": Hoards}, operator_token=TOKEN)) as client:
        frames = send(client, "hi")
        assert frames[-2]["code"] == "agent_error" and frames[-1]["stopReason"] == "error"
        context_id = frames[0]["contextId"]
        refused = patch(client, context_id, {"state": {"big": "y" * 999}})
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "invalid_state_value"
        assert error["message"].startswith("AgentState['big'] is 1001 bytes as JSON, over")
        assert patch(client, context_id, {"state": {"big": "y" * 998}}).status_code == 200
        state = client.get(state_url(context_id), headers=AUTH).json()["state"]
    assert state == {"small": "hi", "big": "y" * 998}
    logged = "\n".join(str(r.exc_info[1]) for r in caplog.records if r.exc_info)
    assert "AgentState['big'] is 1002 bytes as JSON, over the limit of 1000" in logged


def by_header(connection: Any) -> str | None:
    return connection.headers.get("x-user")


def test_an_operator_finds_and_forgets_a_persons_conversations(tmp_path: Path) -> None:
    """A request for a person's data: their conversations listed by owner, each forgotten
    — gone for them, for the operator and from the store."""
    store = SQLiteStore(tmp_path / "db")
    app = app_for({"demo": DemoAgent}, operator_token=TOKEN, identify=by_header, store=store)
    with TestClient(app) as client:
        ada, bob = {"x-user": "ada"}, {"x-user": "bob"}
        mine = [
            send_as(client, ada, "first"),
            send_as(client, ada, "second"),
        ]
        theirs = send_as(client, bob, "bob's")
        owner = client.get(state_url(mine[0]), headers=AUTH).json()["owner"]
        listed = client.get(f"/admin/agents/demo/contexts?owner={owner}&limit=1", headers=AUTH)
        assert listed.status_code == 200 and listed.json()["owner"] == owner
        page = listed.json()
        rest = client.get(
            f"/admin/agents/demo/contexts?owner={owner}&cursor={page['nextCursor']}",
            headers=AUTH,
        ).json()
        found = [c["contextId"] for c in page["conversations"] + rest["conversations"]]
        assert sorted(found) == sorted(mine) and rest["nextCursor"] is None
        for context_id in found:
            gone = client.delete(f"/admin/agents/demo/contexts/{context_id}", headers=AUTH)
            assert gone.status_code == 204
            assert client.get(f"/agents/demo/contexts/{context_id}", headers=ada).status_code == 404
            assert client.get(state_url(context_id), headers=AUTH).status_code == 404
            assert client.get(state_url(context_id, "audit"), headers=AUTH).status_code == 404
        after = client.get(f"/admin/agents/demo/contexts?owner={owner}", headers=AUTH).json()
        assert after["conversations"] == []
        assert client.get("/agents/demo/contexts", headers=ada).json()["conversations"] == []
        # Another person's stay.
        assert client.get(f"/agents/demo/contexts/{theirs}", headers=bob).status_code == 200
        # The operator's routes are the operator's alone, and say what they need.
        assert client.delete(f"/agents/demo/contexts/{theirs}", headers=ada).status_code == 404
        for method, path in (
            ("GET", f"/admin/agents/demo/contexts?owner={owner}"),
            ("DELETE", f"/admin/agents/demo/contexts/{theirs}"),
        ):
            assert client.request(method, path, headers=ada).status_code == 401
        missing = client.get("/admin/agents/demo/contexts", headers=AUTH)
        assert (missing.status_code, missing.json()["error"]["code"]) == (400, "invalid_request")
        wrong = client.get(f"/admin/agents/demo/contexts?owner={owner}&limit=0", headers=AUTH)
        assert wrong.status_code == 400


def test_an_operator_reads_a_conversation_whoever_owns_it(tmp_path: Path) -> None:
    """Its record's metadata, and its transcript as its owner reads it, a page at a time."""
    store = SQLiteStore(tmp_path / "db")
    app = app_for({"demo": DemoAgent}, operator_token=TOKEN, identify=by_header, store=store)
    with TestClient(app) as client:
        ada = {"x-user": "ada"}
        context_id = send_as(client, ada, "first")
        body = {"message": {"text": "second"}, "contextId": context_id}
        assert client.post("/agents/demo/runs", json=body, headers=ada).status_code == 200
        url = f"/admin/agents/demo/contexts/{context_id}"
        for headers in ({}, ada, {"authorization": "Bearer wrong"}):
            refused = client.get(url, headers=headers)
            assert (refused.status_code, refused.json()["error"]["code"]) == (401, "unauthorized")
        read = client.get(url, headers=AUTH)
        assert read.status_code == 200 and read.headers["cache-control"] == "no-store"
        shown = read.json()
        state = client.get(state_url(context_id), headers=AUTH).json()
        listed = client.get("/agents/demo/contexts", headers=ada).json()["conversations"][0]
        assert read.headers["etag"] == f'"{state["version"]}"'
        assert {key: shown.pop(key) for key in ("owner", "version")} == {
            "owner": state["owner"],
            "version": state["version"],
        }
        assert {key: shown.pop(key) for key in ("createdAt", "updatedAt", "status")} == {
            "createdAt": listed["createdAt"],
            "updatedAt": listed["updatedAt"],
            "status": "idle",
        }
        assert shown == client.get(f"/agents/demo/contexts/{context_id}", headers=ada).json()
        page = client.get(f"{url}?limit=1", headers=AUTH).json()
        own_page = client.get(f"/agents/demo/contexts/{context_id}?limit=1", headers=ada).json()
        assert page["turns"] == own_page["turns"] and len(page["turns"]) == 2
        assert page["hasEarlier"] is True
        before = f"?before={page['turns'][0]['id']}"
        earlier = client.get(url + before, headers=AUTH).json()["turns"]
        own = client.get(f"/agents/demo/contexts/{context_id}{before}", headers=ada).json()
        assert earlier == own["turns"] and earlier[0]["text"] == "first"
        for path, status, code in [
            (f"/admin/agents/demo/contexts/ctx-{'0' * 36}", 404, "context_not_found"),
            (f"/admin/agents/other/contexts/{context_id}", 404, "agent_not_found"),
            ("/admin/agents/demo/contexts/not-an-id", 400, "invalid_context_id"),
            (f"{url}?limit=0", 400, "invalid_request"),
        ]:
            answer = client.get(path, headers=AUTH)
            assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), path


def send_as(client: TestClient, headers: dict[str, str], text: str) -> str:
    response = client.post("/agents/demo/runs", json={"message": {"text": text}}, headers=headers)
    context_id: str = parse_sse(response.text)[0]["contextId"]
    return context_id


def test_an_operator_forget_during_a_run_is_context_busy() -> None:
    Waiting.release = asyncio.Event()
    with TestClient(app_for({"demo": Waiting}, operator_token=TOKEN)) as client:
        with client.stream("POST", "/agents/demo/runs", json={"message": {"text": "a"}}) as stream:
            lines = stream.iter_lines()
            context_id = parse_sse("\n".join(iter(lambda: next(lines), "")))[0]["contextId"]
            busy = client.delete(f"/admin/agents/demo/contexts/{context_id}", headers=AUTH)
            assert busy.status_code == 409 and busy.json()["error"]["code"] == "context_busy"
            assert client.portal is not None
            client.portal.call(Waiting.release.set)
            "\n".join(lines)
        assert client.get(state_url(context_id), headers=AUTH).status_code == 200


def test_while_a_new_operator_token_replaces_an_old_one_both_open_the_api() -> None:
    old, new = TOKEN, "a-new-operator-token-0123"
    with TestClient(app_for({"demo": DemoAgent}, operator_token=[new, old])) as client:
        context_id = send(client, "hi")[0]["contextId"]
        for token in (new, old):
            headers = {"authorization": f"Bearer {token}"}
            assert client.get(state_url(context_id), headers=headers).status_code == 200
        wrong = {"authorization": "Bearer a-third-operator-token-x"}
        assert client.get(state_url(context_id), headers=wrong).status_code == 401
    with pytest.raises(ValueError, match=r"^operator_token\[1\] must be at least 16"):
        app_for({"demo": DemoAgent}, operator_token=[new, "short"])
    with pytest.raises(TypeError, match=r"^operator_token\[0\] must be a string, not int$"):
        app_for({"demo": DemoAgent}, operator_token=[42])
    with pytest.raises(TypeError, match=r"^operator_token must be a string or a list .*bytes$"):
        app_for({"demo": DemoAgent}, operator_token=b"x" * 20)
    # A header carries it: what curl sends of "ä" (UTF-8) is not what Starlette reads
    # back (Latin-1), so such a token could never be used; nor one with a space inside.
    for odd in ("pässwörd-0123456789", "operator token with spaces", "tab\tinside-0123456789"):
        with pytest.raises(ValueError, match="must be printable ASCII"):
            app_for({"demo": DemoAgent}, operator_token=odd)


def test_the_operator_lists_the_agents() -> None:
    """What "for each agent" of a person's data goes over, without reading /openapi.json."""
    agents = {"demo": DemoAgent, "notes": WritesKey}
    with TestClient(app_for(agents, operator_token=TOKEN)) as client:
        listed = client.get("/admin/agents", headers=AUTH)
        assert listed.status_code == 200 and listed.json() == {"agents": ["demo", "notes"]}
        assert listed.headers["cache-control"] == "no-store"
        refused = client.get("/admin/agents", headers={"authorization": "Bearer wrong"})
        assert (refused.status_code, refused.json()["error"]["code"]) == (401, "unauthorized")


@pytest.mark.parametrize("key", ["", "a/b", "my key", "ключ", "x" * 129])
def test_a_key_that_is_no_name_is_refused_as_such_where_keys_are_listed(
    client: TestClient, key: str
) -> None:
    """The demo has `writable_keys`: what is wrong with these is their name, not that the
    list lacks them."""
    context_id = send(client, "hi")[0]["contextId"]
    refused = patch(client, context_id, {"state": {key: 1}})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "invalid_state_value"
    assert "is not a key name" in refused.json()["error"]["message"]


@pytest.mark.parametrize("key", ["bad key", "ключ", "x" * 129, "a b"])
def test_the_history_of_a_key_that_is_no_name_is_a_400(client: TestClient, key: str) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    url = state_url(context_id, f"state/{quote(key, safe='')}/history")
    refused = client.get(url, headers=AUTH)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "invalid_state_value"
    assert "is not a key name" in refused.json()["error"]["message"]


@pytest.mark.parametrize("source", ["operator:x", "operator:", "OPERATOR:x"])
def test_a_patch_cannot_name_itself_the_operator_twice(client: TestClient, source: str) -> None:
    """`operator:` is what the API puts before the source: one naming it already would be
    audited `operator:operator:x`. As `run.state.set` refuses it, so does a patch."""
    context_id = send(client, "hi")[0]["contextId"]
    refused = patch(client, context_id, {"state": {"notes": []}, "source": source})
    if source == "OPERATOR:x":  # another name, as the audit trail tells them apart
        assert refused.status_code == 200
        return
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "invalid_request"
    assert "operator:" in refused.json()["error"]["message"]
    assert "notes" not in client.get(state_url(context_id), headers=AUTH).json()["state"]


def test_an_operator_query_parameter_given_twice_is_refused(client: TestClient) -> None:
    """`?owner=a&owner=b` must not read as b alone: an erasure would reach the wrong
    person. As a JSON body may not give a key twice, a query may not."""
    context_id = send(client, "hi")[0]["contextId"]
    base = f"/admin/agents/demo/contexts/{context_id}"
    for url in (
        "/admin/agents/demo/contexts?owner=a&owner=b",
        f"{base}?limit=1&limit=2",
        f"{base}/audit?limit=1&limit=2",
        f"{base}/export?x=1&x=1",
    ):
        refused = client.get(url, headers=AUTH)
        assert refused.status_code == 400, url
        error = refused.json()["error"]
        assert error["code"] == "invalid_request"
        assert "given more than once" in error["message"], url


def test_an_empty_before_is_a_400_not_a_missing_turn(client: TestClient) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    for url, headers in (
        (f"/admin/agents/demo/contexts/{context_id}?before=", AUTH),
        (f"/agents/demo/contexts/{context_id}?before=", {}),
    ):
        refused = client.get(url, headers=headers)
        assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_request")
        assert refused.json()["error"]["message"].startswith("before:")


def audit_of(client: TestClient, context_id: str, tail: str = "audit") -> dict[str, Any]:
    response = client.get(state_url(context_id, tail), headers=AUTH)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_the_audit_trail_is_read_a_page_at_a_time(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a transcript is: the latest `limit`, then the page `before` the first one read."""
    context_id = send(client, "hi")[0]["contextId"]
    for n in range(3):
        patch(client, context_id, {"state": {"notes": [n]}})
    whole = audit_of(client, context_id)
    assert [e["seq"] for e in whole["entries"]] == [1, 2, 3, 4, 5, 6]
    assert whole["hasEarlier"] is False
    latest = audit_of(client, context_id, "audit?limit=2")
    assert [(e["seq"], e["value"]) for e in latest["entries"]] == [(5, [1]), (6, [2])]
    assert latest["hasEarlier"] is True
    earlier = audit_of(client, context_id, "audit?limit=2&before=5")
    assert [e["seq"] for e in earlier["entries"]] == [3, 4] and earlier["hasEarlier"] is True
    assert earlier["entries"] == whole["entries"][2:4]
    # One key's: the same entries, numbered as in the whole trail.
    notes = audit_of(client, context_id, "state/notes/history?limit=2")
    assert notes["key"] == "notes" and notes["entries"] == whole["entries"][4:]
    assert notes["hasEarlier"] is True
    first = audit_of(client, context_id, "state/notes/history?limit=2&before=5")
    assert first["entries"] == whole["entries"][3:4] and first["hasEarlier"] is False
    # Unasked, a page is the latest AUDIT_PAGE entries.
    from thinwire import admin

    monkeypatch.setattr(admin, "AUDIT_PAGE", 4)
    default = audit_of(client, context_id)
    assert default["entries"] == whole["entries"][2:] and default["hasEarlier"] is True
    for query in ("limit=0", "limit=1001", "limit=x", "limit=", "before=0", "before=x", "before="):
        for tail in ("audit", "state/notes/history"):
            refused = client.get(state_url(context_id, f"{tail}?{query}"), headers=AUTH)
            assert refused.status_code == 400, (tail, query)
            assert refused.json()["error"]["code"] == "invalid_request"


def test_every_operator_write_is_logged_without_values_or_owner(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A forget takes the conversation's audit trail with it: the log line is what is
    left of it. It names the token by a fingerprint, the owner and the values never."""
    import hashlib

    second = "a-second-operator-token-x"
    app = app_for({"demo": DemoAgent}, operator_token=[TOKEN, second], identify=by_header)
    caplog.set_level(logging.INFO, "thinwire.admin")
    with TestClient(app) as client:
        ada = {"x-user": "ada-zq-owner"}
        context_id = send_as(client, ada, "hi")
        by_second = {"authorization": f"Bearer {second}"}
        ok = client.patch(
            state_url(context_id),
            json={"state": {"notes": ["zq-secret-value"]}, "source": "ops-anna"},
            headers=AUTH,
        )
        assert ok.status_code == 200
        denied = client.patch(state_url(context_id), json={"state": {"x": 1}}, headers=AUTH)
        assert denied.status_code == 403  # nothing written: nothing logged
        both = {"state": {"notes": [], "messages_seen": 7}}
        assert client.patch(state_url(context_id), json=both, headers=by_second).status_code == 200
        gone = client.delete(f"/admin/agents/demo/contexts/{context_id}", headers=AUTH)
        assert gone.status_code == 204

    def fingerprint(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()[:8]

    logged = [r for r in caplog.records if r.name == "thinwire.admin"]
    assert all(r.levelno == logging.INFO for r in logged)
    first, then = fingerprint(TOKEN), fingerprint(second)
    assert [r.getMessage() for r in logged] == [
        f"demo {context_id}: operator patched notes (source operator:ops-anna, token {first})",
        f"demo {context_id}: operator patched messages_seen, notes "
        f"(source operator:api, token {then})",
        f"demo {context_id}: operator forgot the conversation (token {first})",
    ]
    assert "zq-secret-value" not in caplog.text and "ada-zq-owner" not in caplog.text
    assert TOKEN not in caplog.text and second not in caplog.text


class Remembers(Agent):
    """Looks the page's order up with a tool, notes each message, counts its tokens; asks
    before it answers "ask"."""

    async def lookup(self, order: str) -> dict[str, str]:
        return {"order": order, "status": "shipped"}

    async def run(self, run: Run, text: str) -> None:
        await run.tool("lookup_order", self.lookup, order=run.data.get("order", "none"))
        run.state["seen"] = text
        run.record_usage("model-x", 3, 4)
        if text == "ask":
            await run.interrupt("Go on?", options=["yes", "no"])
        await run.say(f"re: {text}")


def post_as(client: TestClient, headers: dict[str, str], path: str, body: Any) -> Any:
    response = client.post(f"/agents/demo/{path}", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


def test_an_export_holds_everything_the_store_keeps_of_a_conversation(tmp_path: Path) -> None:
    """A request for a person's data: every branch (an edited message and what was sent
    with it too), the history as the agent reads it (tool arguments and outputs), the
    turns, AgentState with its audit, usage, and the question it waits on."""
    store = SQLiteStore(tmp_path / "db")
    app = app_for({"demo": Remembers}, operator_token=TOKEN, identify=by_header, store=store)
    with TestClient(app) as client:
        ada = {"x-user": "ada"}
        run = post_as(client, ada, "runs", {"message": {"text": "first"}, "data": {"order": "A-1"}})
        context_id = run[0]["contextId"]
        body = {"contextId": context_id, "message": {"text": "second"}, "data": {"order": "B-2"}}
        post_as(client, ada, "runs", body)
        turns = client.get(f"/agents/demo/contexts/{context_id}", headers=ada).json()["turns"]
        edit = {"turnId": turns[2]["id"], "message": {"text": "2nd"}, "data": {"order": "C-3"}}
        post_as(client, ada, f"contexts/{context_id}/edits", edit)
        post_as(client, ada, "runs", {"contextId": context_id, "message": {"text": "ask"}})

        url = f"/admin/agents/demo/contexts/{context_id}"
        response = client.get(f"{url}/export", headers=AUTH)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
        assert response.headers["cache-control"] == "no-store"
        exported = response.json()
        read = client.get(url, headers=AUTH).json()
        state = client.get(f"{url}/state", headers=AUTH).json()
        usage = client.get(f"{url}/usage", headers=AUTH).json()
        audit = client.get(f"{url}/audit", headers=AUTH).json()["entries"]
        for refused, status in (({}, 401), ({"authorization": "Bearer wrong"}, 401)):
            assert client.get(f"{url}/export", headers=refused).status_code == status
        other = client.get(f"/admin/agents/other/contexts/{context_id}/export", headers=AUTH)
        assert other.json()["error"]["code"] == "agent_not_found"

    for key in ("owner", "version", "createdAt", "updatedAt", "status", "title"):
        assert exported[key] == read[key], key
    assert exported["status"] == "waiting" and exported["title"] == "first"
    assert (exported["contextId"], exported["agent"]) == (context_id, "demo")
    assert exported["state"] == state["state"] == {"seen": "2nd"}  # "ask" waits: not saved
    assert exported["usage"] == {k: v for k, v in usage.items() if k != "contextId"}
    assert exported["pendingInterrupt"] == read["pendingInterrupt"]
    assert exported["pendingInterrupt"]["prompt"] == "Go on?"
    assert exported["audit"] == audit and [e["value"] for e in audit] == ["first", "second", "2nd"]
    assert exported["preamble"] == []

    exchanges = {(e["line"], e["depth"]): e for e in exported["exchanges"]}
    assert list(exchanges) == [(0, 0), (0, 1), (1, 1), (1, 2)]
    assert [exchanges[p]["parentLine"] for p in exchanges] == [None, 0, 0, 1]
    assert [exchanges[p]["shown"] for p in exchanges] == [True, False, True, True]
    left = exchanges[(0, 1)]  # the branch the edit left: its message, data and tool call
    assert left["messages"][0] == {"role": "user", "content": "second", "data": {"order": "B-2"}}
    assert '"B-2"' in json.dumps(left["messages"][1:]) and "shipped" in json.dumps(left)
    assert [t["text"] for t in left["turns"]] == ["second", "re: second"]
    assert exchanges[(1, 1)]["messages"][0]["data"] == {"order": "C-3"}
    # The branch shown's turns are the transcript's (which adds how many siblings).
    shown_turns = [t for p in ((0, 0), (1, 1), (1, 2)) for t in exchanges[p]["turns"]]
    assert [t["id"] for t in shown_turns] == [t["id"] for t in read["turns"]]
    assert shown_turns[-1]["asked"]["status"] == "waiting"


def test_an_export_reads_a_long_conversation_a_page_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from thinwire import admin
    from thinwire.stores import MemoryStore

    class Counting(MemoryStore):
        reads: ClassVar[list[int]] = []

        async def load_exchanges(self, context_id: str, positions: Any) -> Any:
            type(self).reads.append(len(positions))
            return await super().load_exchanges(context_id, positions)

        async def audit_page(self, context_id: str, **where: Any) -> Any:
            type(self).reads.append(where["limit"])
            return await super().audit_page(context_id, **where)

    monkeypatch.setattr(admin, "EXPORT_PAGE", 2)
    app = app_for({"demo": DemoAgent}, operator_token=TOKEN, store=Counting())
    with TestClient(app) as client:
        context_id = send(client, "m0")[0]["contextId"]
        for n in range(1, 5):
            send(client, f"m{n}", context_id)
        Counting.reads.clear()
        exported = client.get(state_url(context_id, "export"), headers=AUTH).json()
    assert [e["turns"][0]["text"] for e in exported["exchanges"]] == [f"m{n}" for n in range(5)]
    assert len(exported["audit"]) == 7  # secret, messages_seen by the system, then 5 runs'
    assert Counting.reads and max(Counting.reads) <= 2


def stop_url(context_id: str, agent: str = "demo") -> str:
    return f"/admin/agents/{agent}/contexts/{context_id}/stop"


def test_an_operator_stops_a_run_in_progress_as_its_owner_would() -> None:
    """What the operator can do while a patch is `context_busy`, short of forgetting."""
    Waiting.release = asyncio.Event()  # never set: only the stop ends the run
    with TestClient(app_for({"demo": Waiting}, operator_token=TOKEN)) as client:
        with client.stream("POST", "/agents/demo/runs", json={"message": {"text": "a"}}) as stream:
            lines = stream.iter_lines()
            start = parse_sse("\n".join(iter(lambda: next(lines), "")))[0]
            context_id = start["contextId"]
            stopped = client.post(stop_url(context_id), headers=AUTH)
            assert stopped.status_code == 200, stopped.text
            assert stopped.json() == {
                "contextId": context_id,
                "runId": start["runId"],
                "stopping": True,
            }
            done = parse_sse("\n".join(lines))[-1]
        assert done["type"] == "done" and done["stopReason"] == "stopped"
        read = client.get(f"/admin/agents/demo/contexts/{context_id}", headers=AUTH).json()
        assert read["status"] == "idle" and read["turns"][-1]["stopReason"] == "stopped"
        assert patch(client, context_id, {"state": {"k": 1}}).status_code == 200


class Asks(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.interrupt("Go on?", options=["yes", "no"])


def test_an_operator_stop_ends_a_waiting_question_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "thinwire.admin")
    with TestClient(app_for({"demo": Asks}, operator_token=TOKEN)) as client:
        asked = send(client, "hi")
        context_id, run_id = asked[0]["contextId"], asked[0]["runId"]
        pending = patch(client, context_id, {"state": {"k": 1}})
        assert pending.status_code == 409
        assert pending.json()["error"]["code"] == "decision_pending"
        stopped = client.post(stop_url(context_id), headers=AUTH)
        assert stopped.status_code == 200, stopped.text
        assert stopped.json() == {"contextId": context_id, "runId": run_id, "stopping": True}
        read = client.get(f"/admin/agents/demo/contexts/{context_id}", headers=AUTH).json()
        assert read["status"] == "idle" and read["turns"][-1]["stopReason"] == "stopped"
        assert patch(client, context_id, {"state": {"k": 1}}).status_code == 200
    logged = [r for r in caplog.records if r.name == "thinwire.admin"]
    token = hashlib.sha256(TOKEN.encode()).hexdigest()[:8]
    assert [(r.levelno, r.getMessage()) for r in logged] == [
        (logging.INFO, f"demo {context_id}: operator stopped run {run_id} (token {token})"),
        (
            logging.INFO,
            f"demo {context_id}: operator patched k (source operator:api, token {token})",
        ),
    ]


def test_an_operator_stop_with_nothing_to_stop_answers_as_the_owners_does(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "thinwire.admin")
    context_id = send(client, "hi")[0]["contextId"]
    owners = client.post(f"/agents/demo/contexts/{context_id}/stop")
    operators = client.post(stop_url(context_id), headers=AUTH)
    assert owners.status_code == operators.status_code == 200
    assert operators.json() == owners.json() and operators.json()["stopping"] is False
    assert not [r for r in caplog.records if r.name == "thinwire.admin"]  # nothing stopped
    # The same body as the owner's stop: none, or `{}`.
    assert client.post(stop_url(context_id), json={}, headers=AUTH).status_code == 200
    extra = client.post(stop_url(context_id), json={"run": 1}, headers=AUTH)
    assert extra.status_code == 400 and extra.json()["error"]["code"] == "invalid_request"


def test_an_operator_stop_needs_the_token_and_a_context(client: TestClient) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    for headers in ({}, {"authorization": "Bearer wrong-operator-token-x"}):
        refused = client.post(stop_url(context_id), headers=headers)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    unknown = client.post(stop_url("ctx-" + "0" * 36), headers=AUTH)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "context_not_found"
    elsewhere = client.post(stop_url(context_id, agent="nobody"), headers=AUTH)
    assert elsewhere.status_code == 404 and elsewhere.json()["error"]["code"] == "agent_not_found"


@pytest.mark.parametrize("query", ["key=notes", "key=..%2f", "key=%E2%80%AE", "after=1", "x=1"])
def test_an_audit_trail_refuses_what_it_does_not_take(client: TestClient, query: str) -> None:
    """Read as unasked, `?key=` would answer the whole trail as one key's (`?key=..%2f`
    none): refused as a name no page of it takes, and where one key's trail is."""
    context_id = send(client, "hi")[0]["contextId"]
    patch(client, context_id, {"state": {"notes": ["x"]}})
    for tail in ("audit", "state/notes/history"):
        refused = client.get(state_url(context_id, f"{tail}?{query}"), headers=AUTH)
        assert refused.status_code == 400, (tail, refused.text)
        said = refused.json()["error"]
        assert (
            said["code"] == "invalid_request" and "takes limit and before only" in said["message"]
        )
    assert "state/{key}/history" in said["message"]
