"""The `thinwire` command: `thinwire serve module:app` and `thinwire demo`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from thinwire.serving import NotAnApp, import_app, run

__all__ = ["main"]


def configure_logging(level: str) -> None:
    """thinwire's own log lines (run failures with their reference, dropped slow
    clients) go to stderr beside uvicorn's."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    logger = logging.getLogger("thinwire")
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="thinwire", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve an app, given as module:attribute")
    serve.add_argument("app", help="e.g. myproject.agents:app")
    serve.add_argument("--factory", action="store_true", help="APP is a factory to call")

    demo = commands.add_parser("demo", help="serve the demo agent and page")
    demo.add_argument("--delay", type=float, default=0.03, help="seconds between streamed pieces")
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
        command.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        command.add_argument("--log-level", default="info")
        command.add_argument(
            "--shutdown-timeout",
            type=float,
            default=5.0,
            help="seconds open streams get on SIGTERM before runs are interrupted",
        )
        command.add_argument(
            "--max-connections",
            type=int,
            default=2048,
            help="past this many open connections a request gets 503 at once (0: no limit)",
        )
        command.add_argument(
            "--header-timeout",
            type=float,
            default=10.0,
            help="seconds a connection may take to send a request's headers",
        )
        command.add_argument(
            "--forwarded-allow-ips",
            default=os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1"),
            help="proxies whose X-Forwarded-Proto and X-Forwarded-For are believed "
            "(comma-separated addresses or networks, * for any)",
        )

    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    if args.command == "demo":
        from thinwire.demo import create_demo_app

        try:
            app = create_demo_app(
                delay=args.delay, data_dir=args.data_dir, store_url=args.store, model=args.model
            )
        except ValueError as exc:  # its configuration, from options and the environment
            demo.error(str(exc))
    else:
        try:
            app = import_app(args.app, factory=args.factory)
        except NotAnApp as exc:
            serve.error(str(exc))
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
        )
    except KeyboardInterrupt:  # Ctrl+C: uvicorn shut down as for SIGTERM, then re-raised it
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
