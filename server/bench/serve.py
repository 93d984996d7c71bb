"""Run one Python server under test: `python -m bench.serve KIND --port P`.

uvicorn as users run it, minus the access log (which would measure logging), with a
backlog and a file limit big enough for thousands of streams.
"""

from __future__ import annotations

import argparse
import gc
import resource
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from bench.servers import APPS, store_of, thinwire_app

__all__ = ["main", "raise_file_limit"]

KINDS = (*sorted(APPS), "openai-stub")


def raise_file_limit() -> int:
    """The soft limit on open files, raised to the hard one; returns the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.serve")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--heartbeat", type=float, default=15.0)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--page-dir", type=Path)
    parser.add_argument("--store", choices=("sqlite", "memory", "none"), default="sqlite")
    parser.add_argument("--model-url", help="thinwire: the `chat` agent's model (the stub)")
    parser.add_argument(
        "--max-contexts", type=int, default=1000, help="thinwire: live contexts at most"
    )
    args = parser.parse_args(argv)
    raise_file_limit()
    app: Starlette
    if args.kind == "thinwire":
        if args.data_dir is None and args.store == "sqlite":
            parser.error("thinwire needs --data-dir")
        app = thinwire_app(
            args.heartbeat,
            store_of(args.store, args.data_dir),
            args.page_dir,
            model_url=args.model_url,
            max_contexts=args.max_contexts,
        )
    elif args.kind == "openai-stub":
        from bench.model import stub_app

        app = stub_app()
    else:
        app = APPS[args.kind](args.heartbeat)
    gc.freeze()  # as `thinwire serve` does (`thinwire/serving.py`)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        http="h11",  # as `thinwire serve` runs, whether httptools is installed or not
        ws="websockets-sansio",
        backlog=4096,
        timeout_graceful_shutdown=2,
    )


if __name__ == "__main__":
    main()
