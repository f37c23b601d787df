"""The runner's path for a spread load, in one thread, beside its SQL floor.

Usage::

    .venv/bin/python bench/fire_path.py [--stored 100000] [--fires 8000] [--batches 1,20] [--rounds 2]
        [--gaps 0] [--history 0]

``--stored`` interval jobs (every 1 s, due a millisecond apart, as in ``bench/fires.py``'s (a)) in a fresh
SQLite file. Each step moves an injected clock on by one batch's worth of milliseconds, claims what is due
(the dispatcher's claim, by 100) and runs it:

* **engine**: ``TaskRunner.run`` for each fire, as ``serve`` builds it (``build_runner``: the local lock,
  Prometheus metrics, the default events and fire log, sync handlers inline), on the store's own claim
  (its two writes a fire each a commit of their own: one thread, nothing to share a commit with);
* **floor**: the same statements (the store's own text: ``CLAIM``, ``START``, ``FINISH`` and
  ``ADVANCE_COUNTED`` of its ``fires`` module) on the same schema, batches and commits (the claim; each
  batch's execution INSERTs in one commit; the noop called; its executions' and jobs' guarded UPDATEs, the
  run's summary included, in another), as plain tuples: no engine around them. A batch of 1 is what the
  engine writes; a larger one, what sharing commits between fires would save at most.

CPU per fire is the thread's CPU over the steps (the claims included) / fires. The floor bounds what any
rework of the engine's Python could reach with these writes; ``serve`` adds its threads' hand-overs on top
(``bench/fires.py``). Rounds alternate the two, each on a fresh file. Nothing asserts here.

``--gaps 0,7`` also runs each path with that many milliseconds of sleep before each step (not counted):
a spread load's dispatcher idles between its hand-overs (``serve``'s resolution is 20 ms), and on this
machine the same work costs more CPU after an idle gap than back to back.

``--history 60000`` stores that many finished executions of the jobs fired first (the first 10,000 due)
before the steps: a service's ``executions`` table after a while, into whose job-led index each fire's
INSERT goes at a page of its job's (without it the path starts on an empty table, and missed what
schema 6's one index for a fire saved in ``serve``: README, "One index for a fire's execution").
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import machine_speed

from ticklock.adapters.lock.local import LocalLocker
from ticklock.adapters.metrics.prometheus import PrometheusMetrics
from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.adapters.store.sqlite.fires import ADVANCE_COUNTED, CLAIM, FINISH, START
from ticklock.adapters.store.sqlite.rows import JOB_COLUMN_NAMES, us
from ticklock.clock import FakeClock
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fires import Fire, Trigger, fire_key
from ticklock.domain.ids import new_id
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import IntervalSchedule
from ticklock.handlers.builtin import register
from ticklock.handlers.contract import Registry
from ticklock.runtimes.wiring import build_publisher, build_runner
from ticklock.settings import Settings

SLACK = timedelta(seconds=60)
BY = 100  # jobs a claim takes at most (the dispatcher's default batch)

# the claimed row's columns the floor uses, where the claim returns them
_TAKEN = [JOB_COLUMN_NAMES.index(c) for c in ("id", "handler", "timeout", "next_run_at", "version", "lease_token")]


def seeded(stored: int, history: int = 0) -> tuple[SQLiteStore, FakeClock, Path]:
    folder = Path(tempfile.mkdtemp(prefix="ticklock-fire-path-"))
    clock, store = FakeClock(), SQLiteStore(folder / "bench.db")
    start, jobs = clock.now(), []
    first: list[str] = []  # the ids of the jobs due first: the ones the steps fire
    for i in range(stored):
        due = start + timedelta(seconds=1 + (i % 1000) / 1000 + i // 1000)
        jobs.append(Job(id=new_id(), name=f"j{i}", handler="noop", schedule=IntervalSchedule(1), payload={},
                        timeout=10.0, max_retries=0, enabled=True, next_run_at=due, created_at=start,
                        updated_at=start))  # fmt: skip
        if len(first) < HISTORY_JOBS:
            first.append(jobs[-1].id)
        if len(jobs) == 10_000:
            store.add_jobs(jobs)
            jobs = []
    if jobs:
        store.add_jobs(jobs)
    _history(store, first, history, start)
    clock.advance(1)
    return store, clock, folder


HISTORY_JOBS = 10_000  # the jobs ``--history`` spreads its executions over (the first due: the ones fired)


def _history(store: SQLiteStore, jobs: list[str], count: int, now: datetime) -> None:
    """``count`` finished executions of ``jobs``, one job after another, in the seconds before ``now``: the
    history a service's ``executions`` table holds after a while (under (b) of ``bench/fires.py``, 1,000
    rows a second over 10,000 jobs), whose job-led index each fire's INSERT goes into."""
    done = []
    for i in range(count):
        job_id, at = jobs[i % len(jobs)], now - timedelta(seconds=1 + i // len(jobs))
        done.append(Execution(id=new_id(), job_id=job_id, fire_key=fire_key(job_id, Trigger.SCHEDULE, at),
                              handler="noop", trigger=Trigger.SCHEDULE, scheduled_at=at, started_at=at,
                              deadline_at=at + SLACK, run_token="t", owner="bench", status=ExecutionStatus.SUCCESS,
                              attempts=1, finished_at=at, duration=0.0))  # fmt: skip
    store.start_executions(done)  # the store's own batch write, one transaction


def engine(stored: int, fires: int, batch: int, gap: float = 0.0, history: int = 0) -> float:
    store, clock, folder = seeded(stored, history)
    settings = Settings.load(environ={}, plugins=())
    metrics, registry = PrometheusMetrics(), Registry()
    register(registry)
    publisher = build_publisher(settings, metrics)
    runner = build_runner(settings, store=store, locker=LocalLocker(clock), publisher=publisher, metrics=metrics,
                          registry=registry, clock=clock, owner="bench", inline=True)  # fmt: skip
    done, cpu = 0, 0.0
    while done < fires:
        clock.advance(batch / 1000)
        now = clock.now()
        if gap:
            time.sleep(gap)
        started = time.thread_time()
        jobs = store.claim_due(now=now, horizon=now, limit=BY, owner="bench", slack=SLACK)
        claimed = [Fire.of(job) for job in jobs]
        for fire in claimed:
            runner.run(fire)
        cpu += time.thread_time() - started
        done += len(jobs)
    runner.invoker.close()
    store.close()
    shutil.rmtree(folder)
    return cpu / done * 1e6


def floor(stored: int, fires: int, batch: int, gap: float = 0.0, history: int = 0) -> float:
    store, clock, folder = seeded(stored, history)
    conn: sqlite3.Connection = store._conn  # the store's own write connection and pragmas
    noop: Callable[[object], None] = lambda ctx: None  # noqa: E731
    now, done, cpu = us(clock.now()), 0, 0.0
    assert now is not None
    while done < fires:
        now += batch * 1000
        if gap:
            time.sleep(gap)
        started = time.thread_time()
        conn.execute("BEGIN IMMEDIATE")
        claim = (uuid.uuid4().hex, "bench", now + 60_000_000, now + 60_000_000, now, BY)
        rows = conn.execute(CLAIM, claim).fetchall()
        conn.execute("COMMIT")
        for k in range(0, len(rows), batch):
            part, runs = rows[k : k + batch], []
            conn.execute("BEGIN IMMEDIATE")
            for row in part:
                job_id, handler, timeout, slot, version, lease = (row[i] for i in _TAKEN)
                execution, token = new_id(), os.urandom(16).hex()
                conn.execute(START, (execution, job_id, f"{job_id}:{slot}", handler, "schedule", slot, now,
                                     now + int(timeout * 1e6), token, "bench", "running", 1, 0, None, None, None,
                                     0.0, 0))  # fmt: skip
                runs.append((execution, token, job_id, version, lease))
            conn.execute("COMMIT")
            for _ in part:
                noop(None)
            conn.execute("BEGIN IMMEDIATE")
            ended, following = now + 100, now + 1_000_000
            for execution, token, job_id, version, lease in runs:
                conn.execute(FINISH, ("success", 1, ended, 0.0001, None, execution, token))
                counted = (1, ended, "success", ended, ended)  # runs_ok and the last run, as ``_summary_values``
                conn.execute(ADVANCE_COUNTED, (following, 1, following, *counted, job_id, lease, version))
            conn.execute("COMMIT")
        cpu += time.thread_time() - started
        done += len(rows)
    store.close()
    shutil.rmtree(folder)
    return cpu / done * 1e6


PATHS: dict[str, Callable[[int, int, int, float, int], float]] = {"engine": engine, "floor": floor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stored", type=int, default=100_000)
    parser.add_argument("--fires", type=int, default=8_000)
    parser.add_argument("--batches", default="1,20", help="the floor's fires a commit, comma-separated")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gaps", default="0", help="ms of idle before each step, comma-separated (e.g. 0,7)")
    parser.add_argument(
        "--history", type=int, default=0, help=f"finished executions stored first, over the first {HISTORY_JOBS:,} jobs"
    )
    args = parser.parse_args()
    # checked before anything is printed or measured
    try:
        batches = [int(b) for b in args.batches.split(",")]
        gaps = [float(g) for g in args.gaps.split(",")]
    except ValueError:
        parser.error(f"--batches takes whole numbers and --gaps milliseconds, each list separated by commas "
                     f"(e.g. 5,20 and 0,7), not {args.batches!r} and {args.gaps!r}")  # fmt: skip
    if any(b < 1 for b in batches):
        parser.error(f"--batches: each batch is at least 1 fire, not {args.batches!r}")
    if any(not 0 <= g <= 1000 for g in gaps):
        parser.error(f"--gaps: each gap is 0 to 1000 ms, not {args.gaps!r}")
    if not 0 <= args.history <= 10_000_000:
        parser.error(f"--history: 0 to 10,000,000 executions, not {args.history}")
    print(f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {platform.machine()}, "
          f"{os.cpu_count()} cores; the machine's speed: {machine_speed():.2f} s (`machine_speed`)\n")  # fmt: skip
    print("| batch | path | CPU per fire, each round | best |")
    print("|---|---|---|---|")
    for batch in batches:
        figures: dict[tuple[str, float], list[float]] = {(name, gap): [] for gap in gaps for name in PATHS}
        for _ in range(args.rounds):  # the paths and gaps alternate, so that each sees the machine's moments
            for (name, gap), values in figures.items():
                values.append(PATHS[name](args.stored, args.fires, batch, gap / 1000, args.history))
        for (name, gap), values in figures.items():
            label = f"{name}, {gap:g} ms idle before each step" if gap else name
            each = ", ".join(f"{v:.0f}" for v in values)
            print(f"| {batch} | {label} | {each} µs | {min(values):.0f} µs |", flush=True)


if __name__ == "__main__":
    main()
