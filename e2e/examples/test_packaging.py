"""What `pip install thinwire` and `npm install @thinwire/react @thinwire/client` give a
user: the wheel and the tarballs of dist/, opened and installed outside the checkout."""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

import pytest
from userland import Artifacts, npm, prepared, serve_installed

#: What a tarball may hold (under package/): built code, declarations, the wire's JSON
#: Schema (for clients in other languages) and the docs.
SHIPPED = re.compile(
    r"(dist/.+\.(js|d\.ts)|dist/wire\.schema\.json|package\.json|README\.md|LICENSE)"
)


@pytest.fixture(scope="module")
def artifacts() -> Artifacts:
    return Artifacts.find()


def wheel_files(artifacts: Artifacts) -> list[str]:
    with zipfile.ZipFile(artifacts.wheel) as wheel:
        return wheel.namelist()


def tarball(path: Path) -> dict[str, bytes]:
    """The files of an npm tarball, by path inside the package."""
    with tarfile.open(path) as packed:
        return {
            member.name.removeprefix("package/"): packed.extractfile(member).read()  # type: ignore[union-attr]
            for member in packed.getmembers()
            if member.isfile()
        }


def test_wheel_ships_types_the_cli_testing_helpers_and_the_demo_page(
    artifacts: Artifacts,
) -> None:
    files = wheel_files(artifacts)
    assert "thinwire/py.typed" in files
    assert "thinwire/demo_page/index.html" in files
    assert any(f.startswith("thinwire/demo_page/assets/") and f.endswith(".js") for f in files)
    for module in ("__init__", "plugin", "leaks", "server", "frames", "openai_stub"):
        assert f"thinwire/testing/{module}.py" in files
    assert "thinwire/testing/page_tap.js" in files  # the leak recorder's in-page tap
    with zipfile.ZipFile(artifacts.wheel) as wheel:
        entry_points = next(f for f in files if f.endswith(".dist-info/entry_points.txt"))
        scripts = wheel.read(entry_points).decode()
    assert "[console_scripts]\nthinwire = thinwire.cli:main" in scripts


def test_wheel_holds_no_tests_and_nothing_but_the_package(artifacts: Artifacts) -> None:
    files = wheel_files(artifacts)
    strays = [f for f in files if not re.match(r"thinwire(/|-[^/]+\.dist-info/)", f)]
    assert not strays, f"files outside the package: {strays}"
    tests = [
        f
        for f in files
        if re.search(r"(^|/)(tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)", f)
        or "__pycache__" in f
    ]
    assert not tests, f"tests in the wheel: {tests}"


@pytest.mark.parametrize("name", ["client", "react"])
def test_tarball_holds_built_files_declarations_and_docs_only(
    artifacts: Artifacts, name: str
) -> None:
    files = tarball(getattr(artifacts, name))
    unexpected = [f for f in files if not SHIPPED.fullmatch(f)]
    assert not unexpected, f"@thinwire/{name} ships more than its build: {unexpected}"
    assert not [f for f in files if ".test." in f or "/src/" in f or f.startswith("src/")]
    manifest = json.loads(files["package.json"])
    exported = {
        target
        for entry in manifest["exports"].values()
        for target in (entry.values() if isinstance(entry, dict) else [entry])
    }
    # Test helpers ship only as the built files of a `./testing` entry point.
    helpers = {f for f in files if f.startswith("dist/testing/")}
    if "./testing" in manifest["exports"]:
        assert helpers, "the ./testing entry point's files are missing"
    else:
        assert not helpers, f"test helpers without an entry point: {helpers}"
    missing = [t for t in exported if str(PurePosixPath(t)) not in files]
    assert not missing, f"package.json exports files the tarball lacks: {missing}"
    for field in ("main", "types"):
        assert str(PurePosixPath(manifest[field])) in files
    assert "README.md" in files and "LICENSE" in files
    # The registry shows the README apart from the repository: a relative link is dead.
    links = re.findall(r"\]\(([^)]*)\)", files["README.md"].decode())
    assert all(re.match(r"https?://|#", link) for link in links), f"relative links: {links}"


def test_react_is_a_peer_of_the_hook_and_the_client_its_dependency(
    artifacts: Artifacts,
) -> None:
    react = json.loads(tarball(artifacts.react)["package.json"])
    client = json.loads(tarball(artifacts.client)["package.json"])
    assert "react" in react["peerDependencies"]
    assert "react" not in react.get("dependencies", {})
    assert react["dependencies"] == {"@thinwire/client": client["version"]}
    assert not client.get("dependencies"), "the client is framework-free, with no dependencies"


def test_the_tarballs_install_together_from_the_tarballs_alone(
    artifacts: Artifacts, tmp_path: Path
) -> None:
    # Offline: the hook's dependency on @thinwire/client must be met by the client's
    # tarball, not looked up in the registry (react, a peer, is left out).
    npm(
        "install",
        "--offline",
        "--legacy-peer-deps",
        "--no-audit",
        "--no-fund",
        str(artifacts.client),
        str(artifacts.react),
        cwd=tmp_path,
    )
    lock = json.loads((tmp_path / "package-lock.json").read_text())["packages"]
    installed = sorted(p for p in lock if "@thinwire/" in p)
    assert installed == ["node_modules/@thinwire/client", "node_modules/@thinwire/react"]
    assert lock["node_modules/@thinwire/client"]["resolved"].startswith("file:")
    # Both load as ESM, the hook's import of the client included.
    probe = "import('@thinwire/client').then((c) => console.log(typeof c.AgentClient))"
    done = subprocess.run(
        ["node", "--input-type=module", "-e", probe], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.stdout.strip() == "function", done.stderr


def test_the_demo_runs_from_an_empty_directory(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with serve_installed(prepared(), "demo", cwd=empty, log_dir=tmp_path) as server:
        with urllib.request.urlopen(server.url + "/", timeout=5) as response:
            assert response.status == 200
            assert response.headers["content-type"].startswith("text/html")
            page = response.read().decode()
        assert "<title>thinwire demo</title>" in page
        script = re.search(r'src="\.?/?(assets/[^"]+\.js)"', page)
        assert script, page
        with urllib.request.urlopen(f"{server.url}/{script.group(1)}", timeout=5) as response:
            assert response.status == 200
    assert [p.name for p in empty.iterdir()] == [".thinwire"]  # its store, and nothing else
