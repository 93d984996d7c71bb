"""Metrics for Prometheus: what this process has done, and holds, at `GET /admin/metrics`.

Counted as it happens — a run's start and end, a stream opened and closed, a refusal, an
error response, a save — by an integer increment on the process's one `METRICS`; nothing
per frame or token. Written out in the text exposition format (0.0.4) when scraped.

Labels take bounded values only: the agents' registered names, error codes, stop
reasons, transports, and the model names runs record usage under (the first MAX_MODELS,
each cut to MODEL_NAME_LENGTH by `record_usage`; any later one counts as "other").
Never a context, a user, or anything a request says.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from thinwire.errors import LeaseLost, VersionConflict
from thinwire.stores.redis import FORMAT as REDIS_FORMAT
from thinwire.stores.sqlite.database import FORMAT as SQLITE_FORMAT

if TYPE_CHECKING:
    from thinwire.server import AgentServer

__all__ = ["CONTENT_TYPE", "METRICS", "Metrics", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The upper bounds, in seconds, of the store write latency histogram's buckets.
WRITE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: Distinct model names counted under their own label.
MAX_MODELS = 50
STOP_REASONS = ("end", "stopped", "interrupted", "error")
TRANSPORTS = ("sse", "websocket")
#: The codes of the per-principal limits (`limits.py`): shown from 0 before any refusal.
LIMIT_CODES = ("rate_limited", "too_many_runs", "too_many_streams")

#: Control characters: the escaped newline aside, none may reach a label value.
CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")

Transport = Literal["sse", "websocket"]
WriteKind = Literal["save", "flush"]
Labels = Mapping[str, str]


class Metrics:
    """The process's counters. Each method is an increment or two: they are called where
    runs, streams and writes begin and end."""

    def __init__(self) -> None:
        self.started_at = time.time()
        self.runs_started: Counter[str] = Counter()  # agent
        self.runs_ended: Counter[tuple[str, str]] = Counter()  # agent, stop reason
        self.streams_open: Counter[str] = Counter()  # transport
        self.refusals: Counter[str] = Counter()  # code
        self.http_errors: Counter[tuple[str, int]] = Counter()  # code, status
        self.interrupts_asked: Counter[str] = Counter()  # agent
        self.interrupts_answered: Counter[str] = Counter()  # agent
        self.tokens: Counter[tuple[str, str]] = Counter()  # model, input/output
        self.store_writes = 0
        self.store_write_failures: Counter[str] = Counter()  # save / flush
        #: Saves per latency bucket (the last one past every bound), and their seconds.
        self.write_buckets = [0] * (len(WRITE_BUCKETS) + 1)
        self.write_seconds = 0.0

    def run_started(self, agent: str) -> None:
        self.runs_started[agent] += 1

    def run_ended(self, agent: str, stop_reason: str) -> None:
        self.runs_ended[agent, stop_reason] += 1

    def stream_opened(self, transport: Transport) -> None:
        self.streams_open[transport] += 1

    def stream_closed(self, transport: Transport) -> None:
        self.streams_open[transport] -= 1

    def refused(self, code: str) -> None:
        self.refusals[code] += 1

    def http_error(self, code: str, status: int) -> None:
        self.http_errors[code, status] += 1

    def asked(self, agent: str) -> None:
        self.interrupts_asked[agent] += 1

    def answered(self, agent: str) -> None:
        self.interrupts_answered[agent] += 1

    def used(self, usage: Mapping[str, Mapping[str, int]]) -> None:
        """A run's usage (`Run.usage`: model -> calls and tokens), counted once, at its end."""
        for model, counts in usage.items():
            known = (model, "input") in self.tokens or len(self.tokens) < 2 * MAX_MODELS
            name = model if known else "other"
            self.tokens[name, "input"] += counts["inputTokens"]
            self.tokens[name, "output"] += counts["outputTokens"]

    def write_failed(self, kind: WriteKind) -> None:
        self.store_write_failures[kind] += 1

    @contextlib.contextmanager
    def saving(self) -> Iterator[None]:
        """Around a save to the store: counted and timed. A conflict (another version, a
        lease lost) is the store answering: a write, not a failure."""
        began = time.perf_counter()
        try:
            yield
        except (VersionConflict, LeaseLost):
            raise
        except Exception:
            self.store_write_failures["save"] += 1
            raise
        finally:
            seconds = time.perf_counter() - began
            self.store_writes += 1
            self.write_seconds += seconds
            bucket = next(
                (i for i, bound in enumerate(WRITE_BUCKETS) if seconds <= bound),
                len(WRITE_BUCKETS),
            )
            self.write_buckets[bucket] += 1


#: The process's metrics: every app it serves counts here.
METRICS = Metrics()


def render(server: AgentServer) -> str:
    """The exposition of `METRICS`, with what `server` knows now (its agents, shown from 0;
    whether its store takes writes)."""
    from thinwire.cli import version_of_thinwire  # the CLI imports the app, which this

    m = METRICS
    agents = list(server.agents)
    agents += sorted({agent for agent in m.runs_started if agent not in server.agents})
    ended = [((a, r), m.runs_ended[a, r]) for a in agents for r in STOP_REASONS]
    in_progress = [
        ((a,), m.runs_started[a] - sum(m.runs_ended[a, r] for r in STOP_REASONS)) for a in agents
    ]
    refusals = sorted({**dict.fromkeys(LIMIT_CODES, 0), **m.refusals}.items())
    buckets, total = [], 0
    for bound, count in zip((*WRITE_BUCKETS, None), m.write_buckets, strict=True):
        total += count
        buckets.append(({"le": "+Inf" if bound is None else f"{bound:g}"}, total))
    families = [
        family(
            "thinwire_info",
            "gauge",
            "The thinwire release and the data formats of its stores; always 1.",
            [
                (
                    {
                        "version": version_of_thinwire(),
                        "sqlite_format": str(SQLITE_FORMAT),
                        "redis_format": str(REDIS_FORMAT),
                    },
                    1,
                )
            ],
        ),
        family(
            "thinwire_process_start_time_seconds",
            "gauge",
            "When this process's thinwire started, in seconds since the epoch.",
            [({}, m.started_at)],
        ),
        family(
            "thinwire_runs_started_total",
            "counter",
            "Runs started, by agent.",
            [({"agent": a}, m.runs_started[a]) for a in agents],
        ),
        family(
            "thinwire_runs_ended_total",
            "counter",
            "Runs ended, by agent and stop reason.",
            [({"agent": a, "outcome": r}, n) for (a, r), n in ended],
        ),
        family(
            "thinwire_runs_in_progress",
            "gauge",
            "Runs in progress on this process, by agent.",
            [({"agent": a}, n) for (a,), n in in_progress],
        ),
        family(
            "thinwire_streams_open",
            "gauge",
            "Streams open, by transport.",
            [({"transport": t}, m.streams_open[t]) for t in TRANSPORTS],
        ),
        family(
            "thinwire_refusals_total",
            "counter",
            "Requests and commands refused by a per-user limit, by code.",
            [({"code": code}, n) for code, n in refusals],
        ),
        family(
            "thinwire_http_errors_total",
            "counter",
            "Typed HTTP error responses, by code and status.",
            [({"code": c, "status": str(s)}, n) for (c, s), n in sorted(m.http_errors.items())],
        ),
        family(
            "thinwire_interrupts_asked_total",
            "counter",
            "Runs that stopped to ask a person, by agent.",
            [({"agent": a}, m.interrupts_asked[a]) for a in agents],
        ),
        family(
            "thinwire_interrupts_answered_total",
            "counter",
            "Answers that resumed a run, by agent.",
            [({"agent": a}, m.interrupts_answered[a]) for a in agents],
        ),
        family(
            "thinwire_model_tokens_total",
            "counter",
            "Model tokens runs recorded (run.record_usage), by model and direction.",
            [({"model": x, "direction": d}, n) for (x, d), n in sorted(m.tokens.items())],
        ),
        family(
            "thinwire_store_writes_total",
            "counter",
            "Saves of a conversation to the store.",
            [({}, m.store_writes)],
        ),
        family(
            "thinwire_store_write_failures_total",
            "counter",
            "Writes to the store that failed, by kind (save, or flush of a run's frames).",
            [({"kind": k}, m.store_write_failures[k]) for k in ("save", "flush")],
        ),
        histogram(
            "thinwire_store_write_seconds",
            "Seconds a save to the store took.",
            buckets,
            m.write_seconds,
            m.store_writes,
        ),
        family(
            "thinwire_store_ready",
            "gauge",
            "1 while the store takes writes as this process last saw; 0 while /readyz "
            "answers 503 for a refused write.",
            [({}, 0 if server.contexts.writes.refused else 1)],
        ),
    ]
    return "".join(families)


def family(name: str, kind: str, help_text: str, samples: Iterable[tuple[Labels, float]]) -> str:
    lines = [f"# HELP {name} {escape_help(help_text)}", f"# TYPE {name} {kind}"]
    lines += [sample(name, labels, value) for labels, value in samples]
    return "\n".join(lines) + "\n"


def histogram(
    name: str,
    help_text: str,
    buckets: Sequence[tuple[Labels, int]],
    total: float,
    count: int,
) -> str:
    lines = [f"# HELP {name} {escape_help(help_text)}", f"# TYPE {name} histogram"]
    lines += [sample(f"{name}_bucket", labels, value) for labels, value in buckets]
    lines += [sample(f"{name}_sum", {}, total), sample(f"{name}_count", {}, count)]
    return "\n".join(lines) + "\n"


def sample(name: str, labels: Labels, value: Any) -> str:
    if not labels:
        return f"{name} {number(value)}"
    pairs = ",".join(f'{key}="{escape_label(text)}"' for key, text in labels.items())
    return f"{name}{{{pairs}}} {number(value)}"


def number(value: float) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


def escape_label(value: str) -> str:
    """A label value as the format quotes it: backslash, double quote and newline escaped.
    The format escapes no other control character, and a carriage return splits a line
    for many a reader: any goes as U+FFFD."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return CONTROLS.sub("\ufffd", escaped)


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")
