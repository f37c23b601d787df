"""The same fire benchmark on APScheduler 3.11, as a baseline for ``bench/fires.py``.

Usage::

    .venv/bin/python bench/apscheduler_baseline.py [--quick] [--only a,b]

The scenarios of ``bench/fires.py`` that fire (``BASELINE_KEYS``): (a) 1,000 jobs every 1 s, (b) 10,000
every 10 s and (g) 5,000 every 1 s (first fires spread uniformly over one interval; an
``IntervalTrigger``), (c) 1,000 ``CronTrigger(second="*")`` jobs from one second boundary, and (e), (f)
bursts of 1,000 and 10,000 ``DateTrigger`` jobs on one instant; the other jobs every 86,400 s, not due
during the run, up to the scenario's stored count (fewer if adding them takes longer than
``SETUP_BUDGET`` seconds: the table says how many were stored).
A ``BackgroundScheduler`` with a ``ThreadPoolExecutor(30)`` runs each configuration in a process of its
own, so that CPU and peak RSS are its alone:

* ``MemoryJobStore``, APScheduler's defaults: ``misfire_grace_time=1``, ``coalesce=True``,
  ``max_instances=1`` (a fire started more than 1 s late is dropped as missed);
* ``MemoryJobStore``, ``misfire_grace_time=None``, ``coalesce=False`` (every fire runs, however late;
  full runs only);
* ``SQLAlchemyJobStore`` on a SQLite file, the same two settings, if SQLAlchemy is importable
  (otherwise the row says "not installed"; nothing is installed by this script: ``make bench`` installs
  the ``bench`` extra, SQLAlchemy pinned, into the bench's environment only).

Lag = the job function's start (``time.time()`` on entry) minus the scheduled run time that APScheduler
reports in ``EVENT_JOB_EXECUTED`` (per job, the n-th start is paired with the n-th reported run time; one
instance at a time). Lost = fires expected in the window (APScheduler's interval trigger is fixed-rate:
first fire + k x interval; cron every second from the first; a one-shot job its one fire) minus the runs
found for them. Missed and max-instances events are counted. A burst is read as ``bench/fires.py`` reads
one: its CPU up to the moment its last run started, fires/s the rate it drained at.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _stats import ResourceSampler, Row, Scenario, fmt_seconds, lag_summary, markdown_table, scenarios, sleep_until

SETUP_BUDGET = 60.0  # s allowed for adding the stored jobs; fewer are stored past it
PROBE = 50  # idle jobs added at least, to time one add
STARTUP_ALLOWANCE = 3.0  # s from the end of setup to the first fire
DRAIN = 3.0  # s the scheduler keeps running after the window
CHILD_TIMEOUT = 300.0  # s one configuration may take in all
US = 1_000_000
BASELINE_KEYS = ("a", "b", "c", "e", "f", "g")
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "no-miss": {"misfire_grace_time": None, "coalesce": False},
}
LABELS = {
    ("memory", "defaults"): "APScheduler 3.11 MemoryJobStore (defaults: grace 1 s, coalesce)",
    ("memory", "no-miss"): "APScheduler 3.11 MemoryJobStore (grace None, no coalesce)",
    ("sqlalchemy", "defaults"): "APScheduler 3.11 SQLAlchemyJobStore, SQLite (defaults)",
    ("sqlalchemy", "no-miss"): "APScheduler 3.11 SQLAlchemyJobStore, SQLite (grace None, no coalesce)",
}

# Filled in the child process: per due job, the start times of its runs and the run times reported.
_STARTS: list[list[float]] = []


def fire(index: int) -> None:
    """The job: record when it started."""
    if index >= 0:
        _STARTS[index].append(time.time())


@dataclass
class Counts:
    missed: int = 0
    max_instances: int = 0
    errors: int = 0


def run_one(sc: Scenario, store_kind: str, variant: str, workdir: Path) -> Row:
    """Run one configuration in this process and measure it."""
    from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.memory import MemoryJobStore
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.cron import CronTrigger
    from apscheduler.triggers.date import DateTrigger
    from apscheduler.triggers.interval import IntervalTrigger

    logging.getLogger("apscheduler").setLevel(logging.CRITICAL)  # missed runs are counted, not logged
    if store_kind == "memory":
        jobstore: Any = MemoryJobStore()
    else:
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

        jobstore = SQLAlchemyJobStore(url=f"sqlite:///{workdir / 'apscheduler.db'}")
    scheduler = BackgroundScheduler(
        timezone=UTC,
        jobstores={"default": jobstore},
        executors={"default": ThreadPoolExecutor(30)},
        job_defaults=VARIANTS[variant],
    )
    _STARTS[:] = [[] for _ in range(sc.due)]
    reported: list[list[float]] = [[] for _ in range(sc.due)]
    counts = Counts()
    index = {f"due-{i}": i for i in range(sc.due)}

    def on_event(event: Any) -> None:
        i = index.get(event.job_id)
        if i is None:
            return
        if event.code == EVENT_JOB_EXECUTED:
            reported[i].append(event.scheduled_run_time.timestamp())
        elif event.code == EVENT_JOB_MISSED:
            counts.missed += 1
        elif event.code == EVENT_JOB_MAX_INSTANCES:
            counts.max_instances += len(event.scheduled_run_times)
        elif event.code == EVENT_JOB_ERROR:
            counts.errors += 1

    scheduler.add_listener(on_event, EVENT_JOB_EXECUTED | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_ERROR)
    sampler = ResourceSampler(os.getpid(), every=0.1 if sc.kind == "once" else 0.5).start()
    setup_began = time.monotonic()
    scheduler.start(paused=True)
    try:
        # The jobs not due during the run, every 86,400 s, first fire spread over 1 to 24 hours; at least
        # PROBE of them, whose adding times one add (the SQLAlchemy store commits each: milliseconds), so
        # that the due jobs' first fire leaves room for adding them all.
        idle = max(sc.stored - sc.due, PROBE)
        now = datetime.now(UTC)
        stored_idle = 0
        for i in range(idle):
            if i % 1000 == 0 and time.monotonic() - setup_began > SETUP_BUDGET:
                break
            start = now + timedelta(hours=1, seconds=23 * 3600.0 * i / max(1, idle))
            scheduler.add_job(
                fire, IntervalTrigger(seconds=86_400, start_date=start, timezone=UTC), args=[-1], id=f"idle-{i}"
            )
            stored_idle += 1
        per_add = (time.monotonic() - setup_began) / max(1, stored_idle)
        base = time.time() + STARTUP_ALLOWANCE + 1.5 * per_add * sc.due
        if sc.kind == "interval":
            step = sc.interval / max(1, sc.due)
            first = [base + i * step for i in range(sc.due)]
        else:  # cron and one-shot: every job from the same whole second
            base = float(math.ceil(base))
            first = [base] * sc.due
        for i in range(sc.due):
            at = datetime.fromtimestamp(first[i], UTC)
            if sc.kind == "interval":
                trigger: Any = IntervalTrigger(seconds=sc.interval, start_date=at, timezone=UTC)
            elif sc.kind == "cron":
                trigger = CronTrigger(second="*", start_date=at, timezone=UTC)
            else:
                trigger = DateTrigger(run_date=at, timezone=UTC)
            scheduler.add_job(fire, trigger, args=[i], id=f"due-{i}")
        setup_s = time.monotonic() - setup_began
        scheduler.resume()
        # a burst's window opens half a second before its instant, so that its CPU is all inside
        w0 = base - 0.5 if sc.kind == "once" else base + sc.warmup
        w1 = w0 + sc.window
        late = time.time() - min(w0, base)  # > 0: adding the jobs ran past the first fire or the window
        sleep_until(w0)
        cpu_start = sampler.cpu_seconds()
        sleep_until(w1)
        cpu_end = sampler.cpu_seconds()
        sleep_until(w1 + DRAIN)
    finally:
        scheduler.shutdown(wait=False)
        sampler.stop()
    row = analyse(sc, first, reported, (w0, w1))
    row.system = LABELS[(store_kind, variant)]
    row.stored = stored_idle + sc.due
    row.cpu_s = cpu_end - cpu_start
    row.cpu_pct = 100.0 * row.cpu_s / sc.window
    row.peak_rss_mb = sampler.peak_rss_mb
    started = [t for starts in _STARTS for t in starts if w0 <= t < w1]
    row.fires = len(started)
    if sc.kind == "once" and started:  # a burst's CPU up to its last start (fires.py: its last run's end)
        ended = max(started)
        burst_end = sampler.cpu_at(ended)
        if burst_end is not None:
            row.cpu_s = burst_end - cpu_start
            row.cpu_pct = 100.0 * row.cpu_s / max(1e-6, ended - w0)
    row.details.append(
        f"missed (dropped) {counts.missed:,}, skipped at max_instances {counts.max_instances:,}, "
        f"errors {counts.errors:,}; setup (adding {row.stored:,} jobs) {setup_s:.1f} s"
    )
    if late > 0:
        row.details.append(f"adding the jobs ran {late:.1f} s past the first fire: this row measures setup too")
    return row


def analyse(sc: Scenario, first: list[float], reported: list[list[float]], window: tuple[float, float]) -> Row:
    w0, w1 = (round(t * US) for t in window)
    step = sc.interval * US
    lags: list[float] = []
    expected = found = duplicates = started_in_window = unpaired = 0
    for i, runs in enumerate(reported):
        starts = sorted(round(t * US) for t in _STARTS[i])
        scheduled = sorted(round(t * US) for t in runs)
        unpaired += abs(len(starts) - len(scheduled))
        started_in_window += sum(1 for s in starts if w0 <= s < w1)
        duplicates += sum(n - 1 for n in collections.Counter(scheduled).values() if n > 1)
        for s, start in zip(scheduled, starts, strict=False):
            if w0 <= s < w1:
                found += 1
                lags.append((start - s) / US)
        t0 = round(first[i] * US)
        lo = max(0, -(-(w0 - t0) // step))
        hi = -(-(w1 - t0) // step) - 1
        expected += max(0, hi - lo + 1)
    seconds = (w1 - w0) / US
    p50, p99, worst = lag_summary(lags)
    if sc.kind == "once":  # as bench/fires.py reads a burst: the rate it drained at, its last start
        rate = found / worst if worst else None
        ran = f"{found:,} of {sc.due:,} one-shot jobs ran; the last started {fmt_seconds(worst)} after the instant"
        return Row(system="", scenario=f"({sc.key}) {sc.title}", fires_per_s=rate, lag_p50=p50, lag_p99=p99,
                   lag_max=worst, lost=sc.due - found, duplicates=duplicates, details=[ran])  # fmt: skip
    details = [f"expected {expected:,} fires in the {seconds:.0f} s window (first fire + k x interval), ran {found:,}"]
    if unpaired:
        details.append(f"{unpaired} starts and reported run times did not pair up")
    return Row(
        system="",
        scenario=f"({sc.key}) {sc.title}",
        nominal_rate=sc.nominal_rate,
        fires_per_s=started_in_window / seconds,
        lag_p50=p50,
        lag_p99=p99,
        lag_max=worst,
        lost=expected - found,
        duplicates=duplicates,
        details=details,
    )


# -- the parent: one child process per configuration ---------------------------------------------
def configurations(quick: bool) -> list[tuple[str, str]]:
    variants = ["defaults"] if quick else ["defaults", "no-miss"]
    return [(store, variant) for store in ("memory", "sqlalchemy") for variant in variants]


def baseline_rows(quick: bool, keys: list[str] | None = None) -> list[Row]:
    """Every configuration for scenarios ``keys`` (a and b by default), each in a child process."""
    table = scenarios(quick)
    have_sqlalchemy = importlib.util.find_spec("sqlalchemy") is not None
    rows: list[Row] = []
    for key in keys if keys is not None else ["a", "b"]:
        sc = table[key]
        for store, variant in configurations(quick):
            label = LABELS[(store, variant)]
            if store == "sqlalchemy" and not have_sqlalchemy:
                rows.append(Row(system=label, scenario=f"({key}) {sc.title}", note="not installed"))
                continue
            print(f"bench: ({key}) {sc.title} on {label} ...", file=sys.stderr)
            rows.append(_child(key, store, variant, quick, label, sc))
    return rows


def _child(key: str, store: str, variant: str, quick: bool, label: str, sc: Scenario) -> Row:
    command = [sys.executable, str(Path(__file__).resolve()), "--one", f"{key}:{store}:{variant}"]
    if quick:
        command.append("--quick")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return Row(system=label, scenario=f"({key}) {sc.title}", note=f"timed out after {CHILD_TIMEOUT:.0f} s")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("ROW "):
            return Row.from_json(json.loads(line[4:]))
    tail = (done.stderr or done.stdout)[-300:].replace("\n", " ").replace("|", "/")
    return Row(system=label, scenario=f"({key}) {sc.title}", note=f"failed (exit {done.returncode}): {tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="APScheduler 3.11 baseline for bench/fires.py")
    parser.add_argument("--quick", action="store_true", help="shorter windows, 20,000 jobs stored")
    parser.add_argument("--only", default="a,b", help=f"comma-separated scenario keys among {','.join(BASELINE_KEYS)}")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # KEY:STORE:VARIANT, run in this process
    args = parser.parse_args(argv)
    table = scenarios(args.quick)
    if args.one:
        key, store, variant = args.one.split(":")
        with tempfile.TemporaryDirectory(prefix="apscheduler-bench-") as tmp:
            row = run_one(table[key], store, variant, Path(tmp))
        print("ROW " + json.dumps(row.to_json()), flush=True)
        # Worker threads of a scheduler shut down without waiting may linger: do not wait for them.
        os._exit(0)
    keys = [k.strip() for k in args.only.split(",") if k.strip()]
    bad = [k for k in keys if k not in BASELINE_KEYS]
    if bad:
        parser.error(f"unknown scenario(s) {bad}; known: {', '.join(BASELINE_KEYS)}")
    rows = baseline_rows(args.quick, keys)
    print(f"### APScheduler baseline ({'quick' if args.quick else 'full'} run)\n")
    print(markdown_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
