"""Fire throughput, dispatch lag, lost fires, CPU and memory of ``ticklock serve`` on the SQLite store,
and on MongoDB (FerretDB) with the Redis lock.

Usage::

    .venv/bin/python bench/fires.py [--quick] [--with-apscheduler] [--only a,b,c,d,e,f,g,m]

For each scenario it pre-fills a fresh temporary SQLite file with ``SQLiteStore.add_jobs`` (handler
``noop``), starts the real service as a subprocess (``ticklock serve --db ... --port ...``, its defaults
otherwise: logs at info) on a loopback port, samples the process's RSS every 0.5 s and its CPU time at the edges of
the measurement window, stops it with SIGTERM, and then reads the ``executions`` table directly.

* **lag** = started_at - scheduled_at, over the fires scheduled inside the window (a warm-up after the
  first fire is skipped).
* **fires/s** = executions that started inside the window / window seconds.
* **fires lost** = fires expected inside the window minus the executions found for them. Expected fires
  come from each job's own rule. Cron: every second of the window. Interval: ticklock measures an
  interval from the end of the previous run (``max(end, scheduled) + interval``), so each job's chain is
  followed; a fire counts as lost when its job's chain skipped a whole interval, or when it was due
  inside the window and had not started when the service was stopped (``DRAIN`` after the window; the
  replica shape's ``REPLICA_DRAIN``).
  The nominal count (first fire + k x interval, as if intervals did not stretch) is printed beside it.
* **duplicates** = executions beyond the first for one (job id, scheduled time), over the whole run.

Scenarios: (a) 1,000 jobs every 1 s and (b) 10,000 every 10 s, first fires spread uniformly over one
interval, 100,000 jobs stored in all (the rest every 86,400 s, first due in 1 to 24 hours); (c) a burst
of 1,000 cron ``* * * * * *`` jobs on the same second boundary, for 60 s; (d) idle, 100,000 stored, none
due; (e) and (f) bursts of 1,000 and 10,000 one-shot jobs due on one instant (lag of each, the last
start, the rate the burst drained at); (g) 5,000 jobs every 1 s, 100,000 stored. Every row prints the
service's CPU per fire (CPU seconds in the window / fires that started in it).
(m) is scenario (a) on the replica shape, ``TICKLOCK_STORE=mongodb://...`` and ``TICKLOCK_LOCK=redis://...``
(FerretDB 1.24 on PostgreSQL, and Redis, started by ``bench/replicas.py``), with the commands each fire
costs counted (MongoDB and Redis, against a per-fire budget); (n) is (m) on FerretDB 2.5, whose
PostgreSQL has the DocumentDB extension (BSON documents, the store's indexes used, as on MongoDB).
``--quick`` stores 20,000 and measures 6-10 s windows. ``--with-apscheduler`` adds the rows of
``bench/apscheduler_baseline.py`` (scenarios a, b, c, e, f and g on APScheduler 3.11: its memory store and its
SQLAlchemy SQLite store) to the same table.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from _stats import (
    ResourceSampler,
    Row,
    Scenario,
    cpu_at,
    fmt_seconds,
    lag_summary,
    machine_speed,
    markdown_table,
    percentile,
    scenarios,
    sleep_until,
)

from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule

SYSTEM = "ticklock serve (SQLite)"
STARTUP_ALLOWANCE = 3.0  # s from starting the process to the first fire
DRAIN = 3.0  # s the service keeps running after the window, so fires due at its end can start
READY_TIMEOUT = 60.0  # s to wait for /health
STOP_TIMEOUT = 60.0  # s to wait for a clean exit after SIGTERM
SEED_CHUNK = 20_000
US = 1_000_000


@dataclass(frozen=True)
class Seeded:
    """What the seeding put in the store: the due jobs' first fire times (µs) by job id."""

    first_fire: dict[str, int]
    first_fire_at: float  # epoch seconds of the earliest first fire


@dataclass(frozen=True)
class RunResult:
    window: tuple[int, int]  # µs, [start, end)
    cpu_s: float
    cpu_start: float  # the service's CPU seconds when the window opened
    late: float  # s the window opened after it should have (the service was not ready in time)
    cpu_trace: list[tuple[float, float]]  # (epoch s, CPU s) every ``sample_every``
    peak_rss_mb: float
    startup_s: float
    exit_code: int | None
    log_lines: list[str]
    probes: tuple[Any, ...] = field(default=())  # what ``probe`` returned at the window's start and end


class JobSink(Protocol):
    """A store the seeding can fill (SQLiteStore, MongoStore)."""

    def add_jobs(self, jobs: list[Job]) -> None: ...


# -- seeding ----------------------------------------------------------------------------------------
def _job(name: str, schedule: Schedule, next_run_at: datetime, now: datetime) -> Job:
    """A job as ``JobService.create`` builds one (default timeout and retries), with a chosen first fire."""
    return Job(
        id=uuid.uuid4().hex,
        name=name,
        handler="noop",
        schedule=schedule,
        payload={},
        timeout=60.0,
        max_retries=0,
        enabled=True,
        next_run_at=next_run_at,
        created_at=now,
        updated_at=now,
    )


def seed_idle(store: JobSink, count: int) -> None:
    """Jobs that are not due during the run: every 86,400 s, first fire spread over 1 to 24 hours."""
    now = datetime.now(UTC)
    schedule = IntervalSchedule(86_400)
    span = 23 * 3600.0
    for start in range(0, count, SEED_CHUNK):
        chunk = range(start, min(count, start + SEED_CHUNK))
        store.add_jobs(
            [
                _job(f"idle-{i}", schedule, now + timedelta(hours=1, seconds=span * i / max(1, count)), now)
                for i in chunk
            ]
        )


def seed_due(store: JobSink, sc: Scenario, *, allowance: float = STARTUP_ALLOWANCE, chunk: int = SEED_CHUNK) -> Seeded:
    """The jobs that fire during the run, their first fire ``allowance`` seconds from now."""
    now = datetime.now(UTC)
    base = time.time() + allowance
    jobs: list[Job] = []
    if sc.kind in ("cron", "once"):
        boundary = float(math.ceil(base))  # every job on the same whole second
        at = datetime.fromtimestamp(boundary, UTC)
        schedule: Schedule = CronSchedule("* * * * * *") if sc.kind == "cron" else OnceSchedule(at)
        jobs = [_job(f"due-{i}", schedule, at, now) for i in range(sc.due)]
        first_at = boundary
    else:
        schedule = IntervalSchedule(sc.interval)
        step = sc.interval / max(1, sc.due)  # spread uniformly over one interval
        jobs = [_job(f"due-{i}", schedule, datetime.fromtimestamp(base + i * step, UTC), now) for i in range(sc.due)]
        first_at = base
    for start in range(0, len(jobs), chunk):
        store.add_jobs(jobs[start : start + chunk])
    first = {job.id: _us(job.next_run_at) for job in jobs if job.next_run_at is not None}
    return Seeded(first, first_at)


def _us(moment: datetime) -> int:
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * US + delta.microseconds


# -- running the service ----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ticklock_command() -> str:
    beside = Path(sys.executable).parent / "ticklock"
    if beside.exists():
        return str(beside)
    found = shutil.which("ticklock")
    if found is None:
        raise SystemExit("bench: cannot find the `ticklock` command (install the package in this environment)")
    return found


def wait_ready(proc: subprocess.Popen[bytes], port: int, log_path: Path) -> float:
    """Poll /health until it answers 200; returns the seconds it took. Bounded by READY_TIMEOUT."""
    started = time.monotonic()
    url = f"http://127.0.0.1:{port}/health"
    for _ in range(int(READY_TIMEOUT / 0.1)):
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise SystemExit(f"bench: ticklock serve exited with {proc.returncode} before it was ready:\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                if response.status == 200:
                    return time.monotonic() - started
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() - started > READY_TIMEOUT:
            break
        time.sleep(0.1)
    raise SystemExit(f"bench: ticklock serve did not answer {url} within {READY_TIMEOUT:.0f} s")


def run_service(
    db: Path | None,
    workdir: Path,
    window: tuple[float, float],
    command: str,
    serve_args: list[str],
    *,
    extra_env: Mapping[str, str] | None = None,
    probe: Callable[[int], Any] | None = None,
    sample_every: float = 0.5,
    drain: float = DRAIN,
) -> RunResult:
    """Start ``ticklock serve`` on ``db``, measure it over ``window`` (epoch seconds), then stop it.

    ``extra_env`` adds TICKLOCK_* variables (e.g. TICKLOCK_STORE, which wins over ``--db``); ``probe``,
    called with the service's port just after the CPU reading at each edge of the window, reads counters.
    """
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKLOCK_")}
    env["TICKLOCK_RETENTION_PER_JOB"] = "10000000"  # nothing is pruned during the run
    env.update(extra_env or {})
    log_path = workdir / "serve.log"
    store_args = [] if db is None else ["--db", str(db)]
    argv = [command, "serve", *store_args, "--port", str(port), *serve_args]
    probes: list[Any] = []
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=workdir)
        sampler = ResourceSampler(proc.pid, every=sample_every).start()
        try:
            startup = wait_ready(proc, port, log_path)
            late = max(0.0, time.time() - window[0])
            sleep_until(window[0])
            cpu_start = sampler.cpu_seconds()
            if probe is not None:
                probes.append(probe(port))
            sleep_until(window[1])
            cpu_end = sampler.cpu_seconds()
            if probe is not None:
                probes.append(probe(port))
            sleep_until(window[1] + drain)
            sampler.stop()
            proc.send_signal(signal.SIGTERM)
            try:
                code: int | None = proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
                code = None
        finally:
            sampler.stop()
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    lines = log_path.read_text(errors="replace").splitlines()
    return RunResult(
        window=(int(window[0] * US), int(window[1] * US)),
        cpu_s=cpu_end - cpu_start,
        cpu_start=cpu_start,
        late=late,
        cpu_trace=sampler.cpu_trace,
        peak_rss_mb=sampler.peak_rss_mb,
        startup_s=startup,
        exit_code=code,
        log_lines=lines,
        probes=tuple(probes),
    )


# -- reading the results ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Exec:
    job_id: str
    scheduled: int  # µs
    started: int
    finished: int | None
    status: str


def read_executions(db: Path) -> list[Exec]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT job_id, scheduled_at, started_at, finished_at, status FROM executions").fetchall()
    finally:
        conn.close()
    return [Exec(r[0], r[1], r[2], r[3], r[4]) for r in rows]


def interval_chain(first: int, interval: int, execs: list[Exec], w0: int, w1: int) -> tuple[int, int, list[int]]:
    """(expected, lost, slips) of one interval job over [w0, w1), in µs.

    The job's rule: its next fire is ``max(end of run, scheduled) + interval``. A gap of a whole interval
    or more between the fire the rule asked for and the next one found counts those fires as lost, and so
    do the fires the rule asked for after the last one found, up to the end of the window.
    """
    step = interval * US
    bound = (w1 - first) // step + 2  # no chain can hold more fires than this
    expected = lost = 0
    slips: list[int] = []
    due = first
    previous: int | None = None
    for e in sorted(execs, key=lambda x: x.scheduled)[: int(max(0, bound)) * 2]:
        skipped = max(0, (e.scheduled - due) // step)
        for k in range(min(skipped, bound)):
            if w0 <= due + k * step < w1:
                expected += 1
                lost += 1
        if w0 <= e.scheduled < w1:
            expected += 1
            if previous is not None:
                slips.append(e.scheduled - previous - step)
        previous = e.scheduled
        due = max(e.finished if e.finished is not None else e.started, e.scheduled) + step
    for _ in range(max(0, bound)):
        if due >= w1:
            break
        if due >= w0:
            expected += 1
            lost += 1
        due += step
    return expected, lost, slips


def nominal_count(first: int, interval: int, w0: int, w1: int) -> int:
    """Fires at ``first + k * interval`` (k >= 0) inside [w0, w1)."""
    step = interval * US
    lo = max(0, -(-(w0 - first) // step))
    hi = -(-(w1 - first) // step) - 1
    return max(0, hi - lo + 1)


def analyse(sc: Scenario, seeded: Seeded, execs: list[Exec], run: RunResult) -> Row:
    w0, w1 = run.window
    seconds = (w1 - w0) / US
    per_fire = collections.Counter((e.job_id, e.scheduled) for e in execs)
    duplicates = sum(n - 1 for n in per_fire.values() if n > 1)
    in_window = [e for e in execs if w0 <= e.scheduled < w1]
    lags = [(e.started - e.scheduled) / US for e in in_window]
    started_in_window = sum(1 for e in execs if w0 <= e.started < w1)
    p50, p99, worst = lag_summary(lags)
    details: list[str] = []
    row = Row(
        system=SYSTEM,
        scenario=f"({sc.key}) {sc.title}",
        stored=sc.stored,
        nominal_rate=sc.nominal_rate,
        fires_per_s=started_in_window / seconds,
        lag_p50=p50,
        lag_p99=p99,
        lag_max=worst,
        duplicates=duplicates,
        cpu_s=run.cpu_s,
        cpu_pct=100.0 * run.cpu_s / seconds,
        peak_rss_mb=run.peak_rss_mb,
        fires=started_in_window,
        idle=sc.kind == "idle",
        details=details,
    )
    by_job: dict[str, list[Exec]] = collections.defaultdict(list)
    for e in execs:
        by_job[e.job_id].append(e)
    if sc.kind == "interval":
        expected = lost = nominal = 0
        slips: list[int] = []
        for job_id, first in seeded.first_fire.items():
            e_, l_, s_ = interval_chain(first, sc.interval, by_job.get(job_id, []), w0, w1)
            expected, lost, nominal = expected + e_, lost + l_, nominal + nominal_count(first, sc.interval, w0, w1)
            slips += s_
        row.lost = lost
        found = expected - lost
        slip_s = [s / US for s in slips]
        details.append(
            f"expected {expected:,} fires in the {seconds:.0f} s window by the interval rule, found {found:,}; "
            f"nominal (first fire + k x interval) {nominal:,}; each interval stretched by "
            f"p50 {fmt_seconds(percentile(slip_s, 50))} / p99 {fmt_seconds(percentile(slip_s, 99))} / "
            f"max {fmt_seconds(max(slip_s, default=None))} (lag + run + advance)"
        )
    elif sc.kind == "once":
        burst(row, seeded, execs, run)
    elif sc.kind == "cron":
        first_second = -(-w0 // US)
        seconds_in = list(range(first_second, -(-w1 // US)))
        lost = 0
        for job_id in seeded.first_fire:
            have = {e.scheduled // US for e in by_job.get(job_id, []) if e.scheduled % US == 0}
            lost += sum(1 for s in seconds_in if s not in have)
        row.lost = lost
        jobs = len(seeded.first_fire)
        expected = len(seconds_in) * jobs
        details.append(f"expected {expected:,} fires ({len(seconds_in)} whole seconds x {jobs:,} jobs)")
    else:
        row.lost = None
        row.lag_p50 = row.lag_p99 = row.lag_max = None
        details.append(f"{len(execs)} executions during the run (expected 0)")
    if sc.kind not in ("idle", "once"):
        ran = [(e.started - e.scheduled) / US for e in execs if w0 <= e.started < w1]
        r50, r99, rmax = lag_summary(ran)
        details.append(
            f"lag of the {len(ran):,} fires that started in the window, whenever scheduled: "
            f"p50 {fmt_seconds(r50)} / p99 {fmt_seconds(r99)} / max {fmt_seconds(rmax)}"
        )
    statuses = collections.Counter(e.status for e in in_window)
    not_ok = {k: v for k, v in statuses.items() if k != "success"}
    if not_ok:
        details.append(f"non-success executions in the window: {dict(not_ok)}")
    events = collections.Counter(e for e in map(_event, run.log_lines) if not e.startswith(("info:", "debug:")))
    if events:
        top = ", ".join(f"{name} x{count}" for name, count in events.most_common(4))
        details.append(f"{sum(events.values())} log lines at warning or above ({top})")
    if run.late:
        details.append(f"the service was ready {run.late:.1f} s after the window opened: its start-up is in it")
    if run.exit_code != 0:
        details.append(f"service exit code {run.exit_code} after SIGTERM")
    details.append(f"ready in {run.startup_s:.1f} s")
    return row


# issue 15's targets for a burst on one instant: N -> (p50, p99, last fire started), seconds
BURST_TARGETS = {1_000: (None, 0.100, None), 10_000: (0.700, None, 1.5)}


def burst(row: Row, seeded: Seeded, execs: list[Exec], run: RunResult) -> None:
    """A burst of one-shot jobs due on one instant: the lag of each one's run (the first run of each, which
    started in the window), the last start, the jobs that never ran, fires/s as the rate the burst was
    drained at (fires / last start's lag), and the CPU from the window's start (half a second before the
    instant) to the first sample after the last of those runs ended, over those runs."""
    w0, w1 = run.window
    first: dict[str, Exec] = {}
    for e in sorted(execs, key=lambda x: x.started):
        if w0 <= e.started < w1:
            first.setdefault(e.job_id, e)
    lags = [(e.started - e.scheduled) / US for e in first.values()]
    row.lag_p50, row.lag_p99, row.lag_max = lag_summary(lags)
    row.lost = len(seeded.first_fire) - len(first.keys() & seeded.first_fire.keys())
    row.fires = len(first)
    row.fires_per_s = len(first) / row.lag_max if row.lag_max else None
    ended = max((e.finished or e.started for e in first.values()), default=w0) / US
    cpu_end = cpu_at(run.cpu_trace, ended)
    if cpu_end is not None:
        row.cpu_s = cpu_end - run.cpu_start
        row.cpu_pct = 100.0 * row.cpu_s / max(1e-6, ended - w0 / US)
    p50, p99, last = BURST_TARGETS.get(len(seeded.first_fire), (None, None, None))
    wanted = [f"{name} ≤ {fmt_seconds(t)}" for name, t in (("p50", p50), ("p99", p99), ("last start", last)) if t]
    row.details.append(
        f"{len(first):,} of {len(seeded.first_fire):,} one-shot jobs ran; the last started "
        f"{fmt_seconds(row.lag_max)} after the instant; fires/s is the rate the burst drained at"
        + (f" (issue 15's target: {', '.join(wanted)})" if wanted else "")
    )


def _event(line: str) -> str:
    try:
        entry = json.loads(line)
    except ValueError:
        return "(not JSON) " + line[:60]
    return f"{entry.get('level', '?')}:{entry.get('event', '?')}" if isinstance(entry, dict) else line[:60]


# -- one scenario -------------------------------------------------------------------------------------
def run_scenario(sc: Scenario, command: str, serve_args: list[str], system: str = SYSTEM) -> Row:
    with tempfile.TemporaryDirectory(prefix="ticklock-bench-") as tmp:
        workdir = Path(tmp)
        db = workdir / "bench.db"
        store = SQLiteStore(db)
        try:
            seed_idle(store, sc.stored - sc.due)
            # a burst's instant leaves room for the service's start-up (its window opens before the instant)
            seeded = seed_due(store, sc, allowance=STARTUP_ALLOWANCE + (4.0 if sc.kind == "once" else 0.0))
        finally:
            store.close()
        # The window opens a warm-up after the first fire (idle: after the start-up allowance; a burst:
        # half a second before its instant, so that its CPU is all inside).
        start = (time.time() + STARTUP_ALLOWANCE if sc.kind == "idle" else seeded.first_fire_at) + sc.warmup
        if sc.kind == "cron":
            start = float(math.ceil(start))
        if sc.kind == "once":
            start = seeded.first_fire_at - 0.5
        every = 0.1 if sc.kind == "once" else 0.5  # a burst's CPU is read up to its last fire's end
        run = run_service(db, workdir, (start, start + sc.window), command, serve_args, sample_every=every)
        execs = read_executions(db)
    row = analyse(sc, seeded, execs, run)
    row.system = system
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="shorter windows, 20,000 jobs stored (~2 min)")
    parser.add_argument("--with-apscheduler", action="store_true", help="add APScheduler 3.11 rows (a, b, c, e, f, g)")
    parser.add_argument(
        "--only", default="a,b,c,d,e,f,g,m,n", help="comma-separated scenario keys (default a,b,c,d,e,f,g,m,n)"
    )
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for `ticklock serve` (repeat; for experiments, e.g. --serve-arg=--workers=60)",
    )
    parser.add_argument(
        "--command", default=None, help="the ticklock executable to benchmark (default: the one beside this Python)"
    )
    parser.add_argument(
        "--label", default=None, help="what the rows call that ticklock, in brackets (default: the --command given)"
    )
    args = parser.parse_args(argv)
    command = args.command or ticklock_command()
    label = args.label or args.command
    system = " ".join([SYSTEM, *([f"[{label}]"] if label else []), *args.serve_arg])
    table = scenarios(args.quick)
    keys = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = [k for k in keys if k not in table]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; known: {', '.join(table)}")
    rows: list[Row] = []
    sections: list[str] = []
    began, speed = time.monotonic(), machine_speed()
    for key in keys:
        sc = table[key]
        print(f"bench: ({key}) {sc.title}, {sc.stored:,} stored, {sc.window:.0f} s window ...", file=sys.stderr)
        if key in ("m", "n"):
            from replicas import run_mongo_redis

            replica = run_mongo_redis(sc, command, args.serve_arg, label)
            rows.append(replica.row)
            sections.append(replica.commands_markdown)
        else:
            rows.append(run_scenario(sc, command, args.serve_arg, system))
    if args.with_apscheduler:
        from apscheduler_baseline import BASELINE_KEYS, baseline_rows

        rows += baseline_rows(args.quick, [k for k in keys if k in BASELINE_KEYS])
    print(f"bench: done in {time.monotonic() - began:.0f} s", file=sys.stderr)
    mode = "quick" if args.quick else "full"
    speeds = f"{speed:.2f} s at the start, {machine_speed():.2f} s at the end"
    print(f"### Fires ({mode} run, {os.cpu_count()} cores, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC)\n")
    print(f"The machine's speed: 10,000,000 additions in a Python loop took {speeds} (`machine_speed`).\n")
    print(markdown_table(rows))
    for section in sections:
        print(f"\n{section}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
