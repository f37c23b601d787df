"""The fire ledger under a soak: every expected slot accounted for, and what the ledger costs to keep.

Usage::

    .venv/bin/python bench/soak.py [--minutes 5] [--jobs 1000]

It seeds a fresh SQLite file with ``--jobs`` cron jobs every 5 s, mixing every overlap policy, jitter on
a third of them, runs that take longer than the period (``soak.wait``, 3 to 8 s, so that the policies
have overlaps to decide; 10 % of the jobs, with workers enough for them), jobs whose handler is not
registered here (``unknown_handler``) and jobs with a catch-up window of one second. It starts the real
``ticklock serve`` (``bench/fires.py``'s harness). At the window's start, over the API, it pauses 2 % of
the jobs, pauses 2 % until 60 s later and skips the next 5 fires of 2 %; after the window it pauses and
resumes every job, so that what each had pending (a ``buffer_all`` backlog) is written. Then it stops
the service and asks the service's own ``JobService.fires`` (what ``GET /jobs/{id}/fires`` answers)
what became of each job's every slot in the window, and prints, per overlap policy:

* **expected**: the schedule's slots in the window (the schedule alone says how many);
* **ran / skipped / missed** and **other** (a slot with no record: ``unaccounted``, ``due``, ...), with
  the reasons; ``ran + skipped + missed = expected`` is the check;
* slots recorded twice, which that check cannot see (two entries over one slot, an entry over a run);
* the ledger's entries, and its bytes on disk per job per day (SQLite's ``dbstat``: the table and its
  indexes), beside the executions' for scale.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import shutil
import sqlite3
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fires import STARTUP_ALLOWANCE, _job, run_service, ticklock_command

from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.clock import SystemClock
from ticklock.domain.job_settings import Overlap, Policy
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import CronSchedule
from ticklock.domain.service import JobService
from ticklock.handlers.contract import Registry

PERIOD = 5  # seconds between a job's fires
SCHEDULE = CronSchedule("*/5 * * * * *")
HELD = 0.02  # the share of jobs paused, paused until, and skipped (each)
WARMUP = 10.0  # s after the first fire before the window opens
TAIL = 20.0  # s the service runs on after the window, so that runs and holds of its end are recorded


def seed(db: Path, count: int, first: datetime) -> list[Job]:
    """``count`` jobs every PERIOD s from ``first``, their shapes cycling through the mixes above."""
    now = datetime.now(UTC)
    policies = list(Overlap)
    jobs = []
    for i in range(count):
        overlap = policies[i % len(policies)]
        shape = (i // len(policies)) % 10
        handler, payload = "noop", {}
        if shape == 6:
            handler, payload = "soak.wait", {"seconds": 3 + (i % 6)}  # 3 to 8 s: longer than the period, often
        elif shape == 9 and i % 2:
            handler = "soak.not_registered"
        window = 1.0 if shape == 5 else None
        jitter = 2.0 if i % 3 == 0 else 0.0
        policy = Policy(catchup_window=window, overlap=overlap, max_jitter=jitter)
        job = _job(f"soak-{i}", SCHEDULE, first, now)  # fires.py's: a job as JobService.create builds one
        jobs.append(job.with_changes(handler=handler, payload=payload, timeout=10.0, policy=policy))
    store = SQLiteStore(db)
    try:
        store.add_jobs(jobs)
    finally:
        store.close()
    return jobs


def _post(port: int, path: str, body: dict[str, Any] | None = None) -> None:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method="POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def holds(jobs: list[Job]) -> tuple[list[Job], list[Job], list[Job]]:
    """(paused, paused until, skipped): disjoint slices of the jobs that run noop under every policy."""
    n = max(1, int(len(jobs) * HELD))
    plain = [j for j in jobs if j.handler == "noop"]
    return plain[:n], plain[n : 2 * n], plain[2 * n : 3 * n]


def sizes(db: Path) -> dict[str, int]:
    """Bytes on disk of the ledger and of the executions, each with its indexes (SQLite's dbstat)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
        indexes = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'").fetchall())
    except sqlite3.OperationalError:  # an SQLite built without dbstat
        return {}
    finally:
        conn.close()
    found: collections.Counter[str] = collections.Counter()
    for name, size in rows:
        found[indexes.get(name, name)] += int(size)
    return dict(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=5.0, help="the window's length (default 5)")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs (default 1,000)")
    parser.add_argument("--keep", type=Path, default=None, help="copy the SQLite file here afterwards")
    args = parser.parse_args(argv)
    command = ticklock_command()
    with tempfile.TemporaryDirectory(prefix="ticklock-soak-") as tmp:
        workdir = Path(tmp)
        db = workdir / "soak.db"
        first_at = (int(time.time() + STARTUP_ALLOWANCE) // PERIOD + 1) * PERIOD
        first = datetime.fromtimestamp(first_at, UTC)
        jobs = seed(db, args.jobs, first)
        paused, paused_until, skipped = holds(jobs)
        start = first_at + WARMUP
        end = start + args.minutes * 60

        def probe(port: int) -> None:
            if time.time() < end:  # the window's start: the holds
                for job in paused:
                    _post(port, f"/jobs/{job.id}/pause", {"note": "soak"})
                until = datetime.fromtimestamp(time.time() + 60, UTC).isoformat()
                for job in paused_until:
                    _post(port, f"/jobs/{job.id}/pause", {"until": until})
                for job in skipped:
                    _post(port, f"/jobs/{job.id}/skip", {"count": 5})
            else:  # its end: every job is paused and resumed, so that what it had pending is written
                for job in jobs:
                    if job not in paused:
                        _post(port, f"/jobs/{job.id}/pause")
                    _post(port, f"/jobs/{job.id}/resume")

        here = Path(__file__).resolve().parent
        env = {
            "TICKLOCK_HANDLER_MODULES": "soak_handlers",
            # enough workers for the slow runs (10 % of the jobs, allow_all's overlapping): a full pool
            # would make every job late, and the soak is about the ledger, not about backpressure
            "TICKLOCK_WORKERS": str(max(30, args.jobs // 4)),
            "PYTHONPATH": os.pathsep.join([str(here), os.environ.get("PYTHONPATH", "")]),
        }
        print(f"soak: {args.jobs:,} jobs every {PERIOD} s for {args.minutes:g} min ...", file=sys.stderr)
        run = run_service(db, workdir, (start, end + TAIL), command, [], extra_env=env, probe=probe)
        if run.exit_code != 0:
            print("\n".join(run.log_lines[-30:]), file=sys.stderr)
            raise SystemExit(f"soak: ticklock serve exited with {run.exit_code}")
        if args.keep is not None:
            shutil.copyfile(db, args.keep)
        report(db, jobs, start, end, kept=end + TAIL - first_at)
    return 0


def report(db: Path, jobs: list[Job], start: float, end: float, *, kept: float) -> None:
    """The table, for the slots in [start, end); the storage of the ``kept`` seconds the service ran."""
    store = SQLiteStore(db)
    service = JobService(store, Registry(), SystemClock())
    w0, w1 = datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC) - timedelta(microseconds=1)
    by: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    reasons: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    try:
        for job in jobs:
            row = job.policy.overlap.value
            expected = math.ceil((end - start) / PERIOD)  # the slots in [start, end): start is one
            fates = service.fires(job.id, start=w0, end=w1, limit=10_000)
            slots = [f for f in fates if f.execution is None or f.execution.trigger.value == "schedule"]
            by[row]["jobs"] += 1
            by[row]["expected"] += expected
            for fate in slots:
                status = fate.status if fate.status in ("ran", "skipped", "missed") else "other"
                by[row][status] += 1
                if status != "ran":
                    reasons[row][f"{fate.status}:{fate.reason}"] += 1
    finally:
        store.close()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        ledger_rows = conn.execute("SELECT COUNT(*) FROM ledger").fetchone()[0]
        exec_rows = conn.execute("SELECT COUNT(*) FROM executions").fetchone()[0]
        # what account() cannot show (it keeps one fate per slot): two entries over one slot, an entry
        # over a slot that ran
        overlapping = conn.execute(
            "SELECT COUNT(*) FROM ledger a JOIN ledger b ON a.job_id = b.job_id AND a.id < b.id "
            "AND a.trigger = b.trigger AND a.first_at <= b.last_at AND b.first_at <= a.last_at"
        ).fetchone()[0]
        over_runs = conn.execute(
            "SELECT COUNT(*) FROM executions e JOIN ledger l ON e.job_id = l.job_id AND e.trigger = l.trigger "
            "AND e.scheduled_at BETWEEN l.first_at AND l.last_at"
        ).fetchone()[0]
    finally:
        conn.close()
    days = kept / 86400
    on_disk = sizes(db)
    minutes = (end - start) / 60
    print(f"\nSoak: {len(jobs):,} jobs, every {PERIOD} s, a {minutes:g} min window, {datetime.now(UTC):%Y-%m-%d}\n")
    print("| overlap | jobs | expected | ran | skipped | missed | other | ran+skipped+missed = expected | reasons |")
    print("|---|---|---|---|---|---|---|---|---|")
    total: collections.Counter[str] = collections.Counter()
    for row in [o.value for o in Overlap]:
        c = by[row]
        total.update(c)
        counted = c["ran"] + c["skipped"] + c["missed"]
        why = ", ".join(f"{k} {v:,}" for k, v in sorted(reasons[row].items()))
        print(
            f"| {row} | {c['jobs']:,} | {c['expected']:,} | {c['ran']:,} | {c['skipped']:,} | {c['missed']:,} | "
            f"{c['other']:,} | {'yes' if counted == c['expected'] else 'NO'} | {why} |"
        )
    counted = total["ran"] + total["skipped"] + total["missed"]
    print(
        f"| **all** | {total['jobs']:,} | {total['expected']:,} | {total['ran']:,} | {total['skipped']:,} | "
        f"{total['missed']:,} | {total['other']:,} | {'yes' if counted == total['expected'] else 'NO'} | |"
    )
    print(f"\nTwo entries over one slot: {overlapping}; an entry over a slot that ran: {over_runs}.")
    print("\n| kept | rows | bytes on disk (table + indexes) | per job per day |")
    print("|---|---|---|---|")
    for name, rows in (("ledger", ledger_rows), ("executions", exec_rows)):
        size = on_disk.get(name)
        per = "-" if size is None else f"{size / len(jobs) / days / 1024:,.1f} KiB"
        print(f"| {name} | {rows:,} | {'-' if size is None else f'{size:,}'} | {per} |")
    if counted != total["expected"] or overlapping or over_runs:
        raise SystemExit("soak: the ledger did not account for every expected slot exactly once")


if __name__ == "__main__":
    sys.exit(main())
