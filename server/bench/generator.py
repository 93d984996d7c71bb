"""The load generator, in one process per load core.

With one load core the cell runs here, as it always did. With more, the workers of a
cell are split among that many processes (each pinned to a core of its own, started once
for the whole bench); each reports its results and its own CPU, so the report can say
how busy the busiest generator core was.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.load import Result, Target, run_cell
from bench.procs import LOAD_CORES

__all__ = ["Cell", "LoadGenerator"]


@dataclass
class Cell:
    """What a cell measured: every stream's result, the wall time, and each generator
    process's CPU seconds."""

    results: list[Result]
    wall: float
    cpu: list[float]

    @property
    def busiest(self) -> float:
        """The busiest generator process's share of its core."""
        return max(self.cpu) / self.wall if self.wall else 0.0


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _pin_worker(cores: list[int], slot: Any) -> None:
    """Each pool process takes the next free load core (the first is the parent's)."""
    with slot.get_lock():
        index = slot.value
        slot.value += 1
    os.sched_setaffinity(0, {cores[index % len(cores)]})


def _run_share(
    target: Target,
    concurrency: int,
    streams: int,
    deltas: int,
    budget: float,
    pace: str,
    stagger: float,
    keep: bool,
    start_at: float,
) -> tuple[list[Result], float, float]:
    """One process's share of a cell, from `start_at` (a wall clock time) on: its
    results, its CPU seconds and when it ended."""
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    own = time.process_time()
    results, _ = asyncio.run(
        run_cell(target, concurrency, streams, deltas, budget, pace, stagger, keep)
    )
    return results, time.process_time() - own, time.time()


class LoadGenerator:
    """`run` a cell in this process, or split over one process per load core; its
    workers keep their connections from one stream to the next unless `keep` is False."""

    def __init__(self, processes: int | None = None, keep: bool = True) -> None:
        self.processes = processes or max(1, len(LOAD_CORES))
        self.keep = keep
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> LoadGenerator:
        if self.processes > 1:
            context = multiprocessing.get_context("spawn")
            slot = context.Value("i", 0)
            self._pool = ProcessPoolExecutor(
                self.processes,
                mp_context=context,
                initializer=_pin_worker,
                initargs=(LOAD_CORES or sorted(os.sched_getaffinity(0)), slot),
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def run(
        self,
        target: Target,
        concurrency: int,
        streams: int,
        deltas: int,
        budget: float,
        pace: str = "burst",
        stagger: float = 0.0,
    ) -> Cell:
        if self._pool is None or concurrency == 1:
            start_at = time.time()
            share = _run_share(
                target, concurrency, streams, deltas, budget, pace, stagger, self.keep, start_at
            )
            return Cell(share[0], share[2] - start_at, [share[1]])
        parts = min(self.processes, concurrency)
        start_at = time.time() + 0.05  # every share starts together
        futures: list[Future[tuple[list[Result], float, float]]] = [
            self._pool.submit(
                _run_share,
                target,
                workers,
                share,
                deltas,
                budget,
                pace,
                stagger,
                self.keep,
                start_at,
            )
            for workers, share in zip(
                _split(concurrency, parts), _split(streams, parts), strict=True
            )
        ]
        results: list[Result] = []
        cpu: list[float] = []
        ended = start_at
        for future in futures:
            share_results, share_cpu, share_ended = future.result()
            results += share_results
            cpu.append(share_cpu)
            ended = max(ended, share_ended)
        return Cell(results, ended - start_at, cpu)
