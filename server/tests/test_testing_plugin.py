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
