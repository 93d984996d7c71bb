"""The `thinwire` command: `thinwire serve module:app` and `thinwire demo`."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import NoReturn

from uvicorn.config import LOG_LEVELS

from thinwire.serving import NotAnApp, import_app, run
from thinwire.stores.redis import FORMAT as REDIS_FORMAT
from thinwire.stores.sqlite.database import FORMAT as SQLITE_FORMAT

__all__ = ["main"]

#: uvicorn's levels, `trace` (5, below debug) among them.
LEVELS = tuple(LOG_LEVELS)


def configure_logging(level: str) -> None:
    """thinwire's own log lines (run failures with their reference, dropped slow
    clients) go to stderr beside uvicorn's."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    logger = logging.getLogger("thinwire")
    logger.addHandler(handler)
    logger.setLevel(LOG_LEVELS[level])
    logger.propagate = False


def number(
    kind: type[int] | type[float], least: float, most: float | None = None, *, above: bool = False
) -> Callable[[str], float]:
    """An option's type: a finite number from `least` (exclusive `above` it) to `most`,
    refused by argparse otherwise (its usage, then a line saying why), before anything
    starts."""
    if above:
        wanted = f"above {least:g}"
    elif most is None:
        wanted = f"{least:g} or more"
    else:
        wanted = f"{least:g}-{most:g}"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        in_range = value > least if above else value >= least
        if not (math.isfinite(value) and in_range and (most is None or value <= most)):
            noun = "a whole number" if kind is int else "a number of seconds"
            raise argparse.ArgumentTypeError(f"must be {noun}, {wanted}, not {text!r}")
        return value

    return parse


port = number(int, 0, 65535)


def version_of_thinwire() -> str:
    try:
        return version("thinwire")
    except PackageNotFoundError:  # a checkout on the path, not installed
        return "unknown"


def version_line() -> str:
    """The release, and the data format of each store it reads and writes: replicas
    whose formats are the same may share a store (docs/deploy.md, Upgrading)."""
    formats = f"data formats: SQLite {SQLITE_FORMAT}, Redis {REDIS_FORMAT}"
    return f"thinwire {version_of_thinwire()} ({formats})"


def refused_by_create_app(exc: BaseException) -> str | None:
    """Where `create_app` refused its arguments, as the user's module called it: the
    call's place, `file, line N`; None for an error raised anywhere else."""
    from thinwire.app import create_app

    caller, frames = None, exc.__traceback__
    while frames is not None:
        if frames.tb_frame.f_code is create_app.__code__:
            if caller is None:
                return None
            return f"{Path(caller.tb_frame.f_code.co_filename).name}, line {caller.tb_lineno}"
        caller, frames = frames, frames.tb_next
    return None


def refuse(command: argparse.ArgumentParser, message: str) -> NoReturn:
    """Exit 2 with argparse's error line but not its usage: the command line was right,
    and what it names (the app, the environment) is not."""
    command.exit(2, f"{command.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="thinwire", description=__doc__)
    parser.add_argument("--version", action="version", version=version_line())
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve an app, given as module:attribute")
    serve.add_argument("app", help="e.g. myproject.agents:app")
    serve.add_argument("--factory", action="store_true", help="APP is a factory to call")

    demo = commands.add_parser("demo", help="serve the demo agent and page")
    demo.add_argument(
        "--delay", type=number(float, 0), default=0.03, help="seconds between streamed pieces"
    )
    demo.add_argument("--data-dir", type=Path, help="where the SQLite store lives")
    demo.add_argument(
        "--store",
        default=os.environ.get("THINWIRE_STORE_URL"),
        help="a store URL instead, e.g. redis://127.0.0.1:6379/0?prefix=demo",
    )
    demo.add_argument(
        "--model",
        help="answer with this model (default $OPENAI_MODEL; OpenAI-compatible, at "
        "$OPENAI_BASE_URL with $OPENAI_API_KEY) instead of the scripted agent; with either "
        "of those set and no model named, gpt-4.1-mini",
    )

    for command in (serve, demo):
        command.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        command.add_argument("--port", type=port, help="0-65535 (default $PORT, else 8000)")
        command.add_argument("--log-level", type=str.lower, choices=LEVELS, default="info")
        command.add_argument(
            "--shutdown-timeout",
            type=number(float, 0),
            default=5.0,
            help="seconds open streams get on SIGTERM before runs are interrupted",
        )
        command.add_argument(
            "--max-connections",
            type=number(int, 0),
            default=2048,
            help="past this many open connections a request gets 503 at once (0: no limit)",
        )
        command.add_argument(
            "--header-timeout",
            type=number(float, 0, above=True),
            default=10.0,
            help="seconds a connection may take to send a request's headers",
        )
        command.add_argument(
            "--forwarded-allow-ips",
            default=os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1"),
            help="proxies whose X-Forwarded-Proto and X-Forwarded-For are believed "
            "(comma-separated addresses or networks, * for any)",
        )
        command.add_argument(
            "--no-access-log",
            dest="access_log",
            action="store_false",
            help="no line per request (a proxy in front may keep its own)",
        )

    args = parser.parse_args(argv)
    if args.port is None:  # $PORT is read only when no --port is given
        try:
            args.port = port(os.environ.get("PORT") or "8000")
        except argparse.ArgumentTypeError as exc:
            refuse(demo if args.command == "demo" else serve, f"$PORT {exc}")
    configure_logging(args.log_level)
    if args.command == "demo":
        from thinwire.demo import create_demo_app

        try:
            app = create_demo_app(
                delay=args.delay, data_dir=args.data_dir, store_url=args.store, model=args.model
            )
        except ValueError as exc:  # its configuration, from options and the environment
            refuse(demo, str(exc))
    else:
        try:
            app = import_app(args.app, factory=args.factory)
        except NotAnApp as exc:
            refuse(serve, str(exc))
        except (ValueError, TypeError) as exc:
            if (place := refused_by_create_app(exc)) is None:
                raise  # an error of the module's own: its traceback says where
            refuse(serve, f"{args.app}: create_app ({place}) refused: {exc}")
    try:
        run(
            app,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            shutdown_timeout=args.shutdown_timeout,
            max_connections=args.max_connections,
            header_timeout=args.header_timeout,
            forwarded_allow_ips=args.forwarded_allow_ips,
            access_log=args.access_log,
        )
    except KeyboardInterrupt:  # Ctrl+C: uvicorn shut down as for SIGTERM, then re-raised it
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
