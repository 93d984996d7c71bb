"""The pytest plugin's `thinwire_server`, as a user's suite meets it: run by pytest
itself (pytester), on an app of the user's."""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

MOUNTED = """
from starlette.applications import Starlette
from starlette.routing import Mount

from thinwire import Agent, MemoryStore, Run, anonymous, create_app


class Echo(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say(text)


app = Starlette(routes=[Mount("/api", create_app({"echo": Echo}, identify=anonymous, store=MemoryStore()))])
"""


def test_a_server_of_an_app_mounted_elsewhere_starts_where_it_is_told(
    pytester: pytest.Pytester,
) -> None:
    project = pytester.mkdir("project")
    (project / "mounted.py").write_text(MOUNTED)
    pytester.makeconftest('pytest_plugins = ["thinwire.testing.plugin"]')
    pytester.makepyfile(
        test_mounted=textwrap.dedent(
            f"""
            import json
            import urllib.request
            from pathlib import Path


            def test_it_answers_under_api(thinwire_server):
                server = thinwire_server(
                    "serve", "mounted:app", cwd=Path({str(project)!r}), health="/api/healthz"
                )
                request = urllib.request.Request(
                    server.url + "/api/agents/echo/runs",
                    data=json.dumps({{"message": {{"text": "under api"}}}}).encode(),
                    headers={{"content-type": "application/json"}},
                )
                assert b'"delta":"under api"' in urllib.request.urlopen(request, timeout=10).read()
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_each_server_keeps_its_data_in_the_test_s_tmp_path(pytester: pytest.Pytester) -> None:
    chosen = pytester.path / "chosen"
    pytester.makeconftest('pytest_plugins = ["thinwire.testing.plugin"]')
    pytester.makepyfile(
        test_data=textwrap.dedent(
            f"""
            from pathlib import Path


            def test_two_servers_side_by_side(thinwire_server, tmp_path):
                first, second = thinwire_server("demo"), thinwire_server("demo")
                for server in (first, second):
                    assert (tmp_path / f"thinwire-{{server.port}}" / "thinwire.sqlite3").is_file()
                first.stop()  # started again on its port, on its data
                thinwire_server("demo", port=first.port)


            def test_a_data_dir_the_caller_names_is_the_one(thinwire_server):
                thinwire_server("demo", env={{"THINWIRE_DATA_DIR": {str(chosen)!r}}})
                assert Path({str(chosen)!r}, "thinwire.sqlite3").is_file()
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert not (pytester.path / ".thinwire").exists()  # nothing left in the project
