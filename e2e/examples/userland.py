"""The users' side: thinwire installed the way users install it, outside the checkout.

    python e2e/examples/userland.py            # make test-examples runs this, then the tests
    python e2e/examples/userland.py --remove   # make distclean

A place under $TMPDIR (one per checkout) holds a fresh venv with the wheel from dist/
installed by pip with its `openai` and `testing` extras (and fastapi, for the mount
example), the npm tarballs from dist/, and a copy of each example in
examples/ with the tarballs it depends on installed into it by
`npm install ../client.tgz ../react.tgz`, its other dependencies from the registry (an
example of another SDK's client, `useChat`'s, depends on none of them). No test there can
lean on the repository: no editable install, no workspace link, no path into
packages/*/src.

What is slow is kept between runs and redone only when the hashes of its inputs change:
the venv when pyproject.toml does (a dependency added or dropped needs a new one), the
wheel in it when the wheel does, an example's node_modules when its package.json or a
tarball does. The example's own files are copied afresh every time.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from thinwire.testing import ServerProcess, free_port
from thinwire.testing.server import wait_until_ready

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "dist"
EXAMPLES = ROOT / "examples"
#: The wheel's extras the examples and the docs' test files use.
EXTRAS = "[openai,testing]"
#: Python packages they need beside the wheel's own dependencies.
EXTRA_PYTHON = ("fastapi",)
#: Never copied from an example: what installs and builds make.
NOT_SOURCES = ("node_modules", "dist", ".thinwire", "__pycache__", "*.tsbuildinfo")


@dataclass(frozen=True)
class Artifacts:
    """What `make dist` built: the wheel and the two npm tarballs."""

    wheel: Path
    client: Path
    react: Path

    @classmethod
    def find(cls) -> Artifacts:
        def one(pattern: str) -> Path:
            found = sorted(DIST.glob(pattern))
            if len(found) != 1:
                raise FileNotFoundError(
                    f"expected one {pattern} in {DIST}, found {len(found)}: `make dist` builds it"
                )
            return found[0]

        return cls(one("thinwire-*.whl"), one("thinwire-client-*.tgz"), one("thinwire-react-*.tgz"))


@dataclass(frozen=True)
class Userland:
    home: Path
    artifacts: Artifacts

    @property
    def venv(self) -> Path:
        return self.home / "venv"

    def bin(self, name: str) -> Path:
        """A program of the venv: `thinwire`, `python`, `pip`."""
        return self.venv / "bin" / name

    def example(self, name: str) -> Path:
        return self.home / name


def default_home() -> Path:
    checkout = hashlib.sha256(str(ROOT).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"thinwire-userland-{checkout}"


def digest(*parts: bytes | str | Path) -> str:
    hashed = hashlib.sha256()
    for part in parts:
        data = part.read_bytes() if isinstance(part, Path) else part
        hashed.update(data.encode() if isinstance(data, str) else data)
        hashed.update(b"\0")
    return hashed.hexdigest()


def run(command: Sequence[str | Path], cwd: Path) -> None:
    """Run a command, and fail with its output when it fails."""
    shown = " ".join(str(c) for c in command)
    print(f"userland: {shown}  (in {cwd})", flush=True)
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"{shown} failed ({done.returncode}) in {cwd}:\n{done.stdout}{done.stderr}"
        )


def up_to_date(marker: Path, key: str) -> bool:
    return marker.is_file() and marker.read_text() == key


def prepare_venv(land: Userland) -> None:
    """A venv of the interpreter running this, with the wheel (EXTRAS) and EXTRA_PYTHON
    installed."""
    wheel = land.artifacts.wheel
    venv_key = digest(sys.version, ROOT / "pyproject.toml", EXTRAS, *EXTRA_PYTHON)
    if not up_to_date(land.venv / "userland-venv", venv_key):
        shutil.rmtree(land.venv, ignore_errors=True)
        base = getattr(sys, "_base_executable", sys.executable)
        run([base, "-m", "venv", land.venv], land.home)
        run([land.bin("pip"), "install", "-q", f"{wheel}{EXTRAS}", *EXTRA_PYTHON], land.home)
        (land.venv / "userland-venv").write_text(venv_key)
    elif not up_to_date(land.venv / "userland-wheel", digest(wheel)):
        run([land.bin("pip"), "install", "-q", "--no-deps", "--force-reinstall", wheel], land.home)
    else:
        return
    run([land.bin("pip"), "check"], land.home)  # every dependency there, at a version it takes
    (land.venv / "userland-wheel").write_text(digest(wheel))


def copy_example(source: Path, target: Path) -> None:
    """The example's own files, afresh; an installed node_modules (and the package.json
    and lock the install wrote) is kept for `install_packages` to judge."""
    kept = {"node_modules", "package.json", "package-lock.json", "userland-npm"}
    if target.exists():
        for path in sorted(target.rglob("*"), reverse=True):  # a folder after its files
            if any(part in kept for part in path.relative_to(target).parts):
                continue
            if path.is_dir() and not path.is_symlink():
                with contextlib.suppress(OSError):  # a folder that holds a kept one stays
                    path.rmdir()
            else:
                path.unlink()
    for path in source.rglob("*"):
        relative = path.relative_to(source)
        if any(Path(part).match(pattern) for part in relative.parts for pattern in NOT_SOURCES):
            continue
        if path.is_file() and not (path.name == "package.json" and (target / relative).exists()):
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / relative)


def install_packages(land: Userland, source: Path, project: Path) -> None:
    """`npm install ../client.tgz ../react.tgz` in an example's npm project (the tarballs
    of the packages its package.json names), unless its package.json and those tarballs
    are the ones it was last installed from."""
    manifest = json.loads((source / "package.json").read_text())
    named = {**manifest.get("dependencies", {}), **manifest.get("devDependencies", {})}
    tarballs = {
        name: artifact
        for package, name, artifact in (
            ("@thinwire/client", "client.tgz", land.artifacts.client),
            ("@thinwire/react", "react.tgz", land.artifacts.react),
        )
        if package in named
    }
    key = digest(source / "package.json", *tarballs.values())
    if up_to_date(project / "userland-npm", key):
        # The installs' caches are not sources: builds start cold, as a user's first one.
        for cache in ("node_modules/.tmp", "node_modules/.vite"):
            shutil.rmtree(project / cache, ignore_errors=True)
        return
    shutil.rmtree(project / "node_modules", ignore_errors=True)
    for installed in ("package-lock.json", "userland-npm"):
        (project / installed).unlink(missing_ok=True)
    shutil.copy2(source / "package.json", project / "package.json")
    paths = [os.path.relpath(land.home / name, project) for name in tarballs]
    run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", *paths], project)
    (project / "userland-npm").write_text(key)


def prepare(home: Path | None = None) -> Userland:
    """Make (or bring up to date) the users' place, and return it."""
    started = time.monotonic()
    land = Userland(home or default_home(), Artifacts.find())
    land.home.mkdir(parents=True, exist_ok=True)
    for name, tarball in (
        ("client.tgz", land.artifacts.client),
        ("react.tgz", land.artifacts.react),
    ):
        if not (land.home / name).is_file() or digest(land.home / name) != digest(tarball):
            shutil.copy2(tarball, land.home / name)
    prepare_venv(land)
    for example in sorted(p for p in EXAMPLES.iterdir() if p.is_dir()):
        copy_example(example, land.example(example.name))
        for manifest in sorted(example.rglob("package.json")):
            if "node_modules" not in manifest.parts:
                project = land.example(example.name) / manifest.parent.relative_to(example)
                install_packages(land, manifest.parent, project)
    print(f"userland: ready in {land.home} ({time.monotonic() - started:.0f} s)", flush=True)
    return land


@functools.cache
def prepared() -> Userland:
    """The users' place, made or brought up to date once per test session."""
    return prepare()


def npm(*args: str, cwd: Path, timeout: float = 50.0) -> str:
    """`npm ARGS…` in `cwd`; its output, or a failure that shows it."""
    done = subprocess.run(
        ["npm", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"npm {' '.join(args)} failed in {cwd}:\n{done.stdout}{done.stderr}"
    )
    return done.stdout


@contextlib.contextmanager
def serve_installed(
    land: Userland,
    *args: str,
    cwd: Path,
    health: str = "/healthz",
    env: dict[str, str] | None = None,
    log_dir: Path,
) -> Iterator[ServerProcess]:
    """`thinwire ARGS… --port PORT`, the venv's console script, run in `cwd` as a user
    would, until the block ends. (`thinwire.testing.serve` runs this interpreter's
    thinwire, the checkout's.)"""
    port = free_port()
    log_path = log_dir / f"thinwire-{port}.log"
    # The venv's own PATH and nothing of the checkout's: no PYTHONPATH, no web dir.
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "THINWIRE_"))}
    clean["PATH"] = f"{land.venv / 'bin'}{os.pathsep}{clean.get('PATH', '')}"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [str(land.bin("thinwire")), *args, "--port", str(port)],
            cwd=cwd,
            env={**clean, **(env or {})},
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    server = ServerProcess(process, port, log_path)
    try:
        wait_until_ready(server, 30.0, health)
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def vite_dev_server(project: Path, env: dict[str, str], log_dir: Path) -> Iterator[str]:
    """`vite`, the dev server of an installed example, on a free port; its URL."""
    port = free_port()
    log = log_dir / f"vite-{port}.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            ["node_modules/.bin/vite", "--host", "127.0.0.1", "--port", str(port), "--strictPort"],
            cwd=project,
            env={**os.environ, **env},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, stopped whole below
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, f"vite exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"vite not ready:\n{log.read_text()}"
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(url, timeout=1) as response,
            ):
                if response.status == 200:
                    break
            time.sleep(0.1)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


if __name__ == "__main__":
    if sys.argv[1:] == ["--remove"]:
        shutil.rmtree(default_home(), ignore_errors=True)
    else:
        prepare()
