"""Every read the dashboard makes, against ``ticklock serve`` holding 500,000 jobs (issue 46).

Usage::

    .venv/bin/python bench/dashboard_reads.py [--jobs 500000] [--requests 30] [--depth N] [--before REV] [--keep]

It starts the real ``ticklock serve`` on a fresh SQLite file and fills it through its REST API:

* ``POST /jobs:batch`` of 1,000: interval, weekly cron and one-shot jobs whose fires are days away (the
  dispatcher stays idle while reads are timed), 2 % created paused, 4 % with alert rules;
* jobs that fire during the fill: one-shots (then ``done``), daily crons whose handler fails (``failing``;
  a quarter raise an alert on the first failure: ``alerting``), and one job every second (the job page's
  history);
* through the API one by one: a timed pause (``held``), a skip of the next fires (``held`` too) and a pause;
* in SQL, the columns the runs and the engine write: a run summary (last status and time) on 70 % of the
  jobs, 2 % of those failed, as if they had run (with no executions behind it), and a few jobs ``disabled``
  (only a schedule that finds no next fire disables a job, which the API cannot ask for).

Then it times each read of the dashboard ``--requests`` times, one after another on one keep-alive
connection: the overview; the jobs table by every state filter in every order (both directions), by id
as the CLI lists it, and by the table's other filters (search, handler, last outcome); pages deep into
it (``--depth`` jobs in, half of them by default, reached by following ``next``); the job page's four
reads and the handlers. Milliseconds from the request sent to the answer read, p50, p99 and max.

``--before REV`` runs the same reads first on ticklock as it was at REV (``git archive`` of its
``layers/common``, first on the server's ``PYTHONPATH``), which fills the file; that server then stops and
today's opens the same file (migrating it), so the two columns read the same jobs. The issue's bar: every
read under ~20 ms at 500,000 jobs. Nothing here asserts it.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import percentile

REPO = Path(__file__).resolve().parents[1]
BATCH = 1_000
STATES = ("enabled", "paused", "held", "disabled", "done", "failing", "alerting")
SORTS = ("name", "-name", "next_run_at", "-next_run_at", "last_at", "-last_at")
# the jobs table's other filters: a search (a word a tenth of the names hold, one a few hold, and two none
# does), a handler, an outcome
OTHER_FILTERS = ("q=backup", "q=backup-000012", "q=backup-sync", "q=nothing-named-so", "handler=http.check",
                 "outcome=failed", "outcome=none")  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``ticklock serve`` on ``db``, with ``source`` (a tree's ``layers/common``) first on its path if given."""

    def __init__(self, db: Path, folder: Path, source: Path | None, label: str) -> None:
        self.port, self.label = free_port(), label
        env = {**os.environ, "TICKLOCK_DB": str(db), "TICKLOCK_PORT": str(self.port), "TICKLOCK_LOG_LEVEL": "warning"}
        if source is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH")]))
        self.log = folder / f"serve-{self.port}.log"
        began = time.monotonic()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "ticklock", "serve"], env=env, cwd=folder,
                                         stdout=out, stderr=out)  # fmt: skip
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=120.0)
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"bench: ticklock serve ({label}) exited:\n{self.log.read_text()[-3000:]}")
            try:
                if self.client.get("/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.started_in = time.monotonic() - began

    def call(self, method: str, path: str, body: Any = None, ok: int = 200) -> Any:
        answer = self.client.request(method, path, json=body)
        if answer.status_code != ok:
            raise SystemExit(f"bench: {method} {path} answered {answer.status_code}: {answer.text[:500]}")
        return answer.json() if answer.content else None

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(60)


def _at(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _soon_daily(moment: datetime) -> str:
    """A daily cron whose next fire is ``moment`` (to the second, UTC)."""
    return f"{moment.second} {moment.minute} {moment.hour} * * *"


def fill(server: Server, count: int, rng: random.Random) -> dict[str, list[str]]:
    """``count`` jobs through the API; returns the ids of the groups the states are made from."""
    weekday = (datetime.now(UTC) + timedelta(days=3)).strftime("%a").upper()
    firing = max(40, count // 250)  # fail daily from a few seconds after the fill (a quarter alert)
    once = max(20, count // 500)  # run once, a few seconds after the fill
    idle: list[tuple[str, dict[str, Any]]] = []
    for i in range(count - firing - once - 1):
        shape = i % 3
        if shape == 0:
            schedule: dict[str, Any] = {"kind": "interval", "seconds": rng.randrange(2 * 86400, 30 * 86400)}
        elif shape == 1:
            expr = f"{rng.randrange(60)} {rng.randrange(60)} {rng.randrange(24)} * * {weekday}"
            schedule = {"kind": "cron", "expr": expr, "timezone": "Europe/Berlin"}
        else:
            at = datetime.now(UTC) + timedelta(days=30, seconds=rng.randrange(86400))
            schedule = {"kind": "once", "at": _at(at)}
        job: dict[str, Any] = {"name": f"job-{rng.choice(WORDS)}-{i:07d}", "handler": "noop", "schedule": schedule}
        if rng.random() < 0.04:
            job["alerts"] = {"late_after": 3600.0}
        if rng.random() < 0.02:
            job["enabled"] = False
            idle.append(("created paused", job))
        else:
            idle.append(("idle once" if shape == 2 else "recurring", job))
    rng.shuffle(idle)
    groups: dict[str, list[str]] = {
        g: [] for g in ("recurring", "idle once", "created paused", "failing", "once", "busy")
    }
    began = time.monotonic()
    post(server, idle, groups)
    soon = datetime.now(UTC) + timedelta(seconds=15)  # the jobs that fire: from a few seconds after the fill
    firing_jobs: list[tuple[str, dict[str, Any]]] = []
    for i in range(firing):
        schedule = {"kind": "cron", "expr": _soon_daily(soon + timedelta(seconds=i % 10))}
        job = {"name": f"fails-{i:06d}", "handler": "http.check", "payload": {"url": "not a url"},
               "schedule": schedule}  # fmt: skip
        if i % 4 == 0:
            job["alerts"] = {"failures_in_a_row": 1}
        firing_jobs.append(("failing", job))
    for i in range(once):
        schedule = {"kind": "once", "at": _at(soon + timedelta(seconds=i % 10))}
        firing_jobs.append(("once", {"name": f"once-{i:06d}", "handler": "noop", "schedule": schedule}))
    firing_jobs.append(("busy", {"name": "busy", "handler": "noop", "schedule": {"kind": "interval", "seconds": 1}}))
    post(server, firing_jobs, groups)
    took = time.monotonic() - began
    print(f"dashboard_reads: {count:,} jobs created in {took:.0f} s ({count / took:,.0f}/s)", file=sys.stderr)
    return groups


def post(server: Server, specs: list[tuple[str, dict[str, Any]]], groups: dict[str, list[str]]) -> None:
    """``specs`` (group, job) by ``POST /jobs:batch``; each id into its group."""
    for start in range(0, len(specs), BATCH):
        part = specs[start : start + BATCH]
        made = server.call("POST", "/jobs:batch", {"jobs": [job for _, job in part]}, ok=201)["items"]
        for (group, _), item in zip(part, made, strict=True):
            groups[group].append(item["id"])


WORDS = ["backup", "report", "sync", "cleanup", "billing", "export", "import", "scan", "index", "mail"]


def change_states(server: Server, recurring: list[str], rng: random.Random) -> None:
    """Holds, skips and pauses through the API, one request each (of enabled recurring jobs: a one-shot
    cannot be held; until beyond every next fire, so that each hold holds one back)."""
    count = max(20, len(recurring) // 600)
    picked = rng.sample(recurring, 3 * count)
    until = _at(datetime.now(UTC) + timedelta(days=45))
    for job_id in picked[:count]:
        server.call("POST", f"/jobs/{job_id}/pause", {"note": "held by the bench", "until": until})
    for job_id in picked[count : 2 * count]:
        server.call("POST", f"/jobs/{job_id}/skip", {"count": 2})
    for job_id in picked[2 * count :]:
        server.call("POST", f"/jobs/{job_id}/pause", {"note": "paused by the bench"})


def write_history(db: Path, now: datetime) -> None:
    """The run summaries and the disabled jobs, written in SQL as the runs and the engine write them."""
    at = int((now - timedelta(minutes=5)).timestamp() * 1_000_000)
    with sqlite3.connect(db, timeout=60) as conn:
        conn.execute(
            "UPDATE jobs SET last_status = CASE WHEN abs(random()) % 50 = 0 THEN 'failed' ELSE 'success' END, "
            "last_at = ? - abs(random()) % 86400000000, runs = 10, runs_ok = 9 "
            "WHERE name LIKE 'job-%' AND abs(random()) % 10 < 7",
            (at,),
        )
        conn.execute(
            "UPDATE jobs SET enabled = 0, next_run_at = NULL, due_at = NULL, "
            "disabled_reason = 'its schedule found no next fire (the bench)' "
            "WHERE id IN (SELECT id FROM jobs WHERE name LIKE 'job-%' AND enabled = 1 AND hold IS NULL "
            "ORDER BY id LIMIT 25)"
        )


def settle(server: Server, wants: dict[str, int]) -> dict[str, int]:
    """Waits until the states that come from fires have their members (the fires run after the fill)."""
    deadline = time.monotonic() + 600
    while True:
        counts: dict[str, int] = server.call("GET", "/overview")["jobs"]
        if all(counts.get(state, 0) >= n for state, n in wants.items()) or time.monotonic() > deadline:
            return counts
        time.sleep(2)


def deep_cursor(server: Server, params: dict[str, Any], jobs: int) -> str | None:
    """The ``next`` after the first ``jobs`` jobs of the listing ``params``, by pages of up to 500."""
    after: str | None = None
    size = max(1, min(500, jobs))
    for _ in range(max(1, jobs // size)):
        query = {**params, "limit": size, **({"after": after} if after else {})}
        page = server.call("GET", f"/jobs?{httpx.QueryParams(query)}")
        if page["next"] is None:
            break
        after = page["next"]
    return after


def reads(server: Server, busy: str, depth: int, counts: dict[str, int]) -> list[tuple[str, str]]:
    """Each read of the dashboard, as (label, path): the overview, the jobs table by each filter in each
    order, pages deep into it, the job page's reads and the handlers."""
    listed = [("GET /overview", "/overview")]
    listed += [(f"GET /jobs?sort={sort}", f"/jobs?sort={sort}&limit=50") for sort in SORTS]
    listed += [(f"GET /jobs?state={s}&sort={sort}", f"/jobs?state={s}&sort={sort}&limit=50")
               for s in STATES for sort in SORTS]  # fmt: skip
    listed += [(f"GET /jobs?state={s} (by id, as the CLI)", f"/jobs?state={s}&limit=50") for s in STATES]
    listed += [(f"GET /jobs?{q}&sort=name", f"/jobs?{q}&sort=name&limit=50") for q in OTHER_FILTERS]
    deep = [({"sort": sort}, depth) for sort in ("name", "next_run_at", "-last_at")]
    deep += [
        ({"state": s, "sort": sort}, counts.get(s, 0) // 2) for s, sort in (("paused", "name"), ("failing", "-last_at"))
    ]
    for params, jobs in deep:
        cursor = deep_cursor(server, params, jobs)
        if cursor is not None:
            label = "&".join(f"{k}={v}" for k, v in params.items())
            path = f"/jobs?{httpx.QueryParams({**params, 'limit': 50, 'after': cursor})}"
            listed.append((f"GET /jobs?{label}, {jobs:,} jobs deep", path))
    month_ago = _at(datetime.now(UTC) - timedelta(days=30))
    job = f"/jobs/{busy}"
    listed += [
        ("GET /jobs/{id}", job),
        ("GET /jobs/{id}/upcoming?count=20", f"{job}/upcoming?count=20"),
        (
            "GET /jobs/{id}/fires?from=…&limit=200",
            f"{job}/fires?{httpx.QueryParams({'from': month_ago, 'limit': 200})}",
        ),
        ("GET /jobs/{id}/executions?limit=200", f"{job}/executions?limit=200"),
        ("GET /handlers", "/handlers"),
    ]
    return listed


def time_reads(server: Server, listed: list[tuple[str, str]], requests: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {}
    for label, path in listed:
        server.call("GET", path)  # once untimed: the pages it reads into the cache
        took = []
        for _ in range(requests):
            began = time.perf_counter()
            server.call("GET", path)
            took.append((time.perf_counter() - began) * 1000)
        timings[label] = took
    return timings


def before_tree(rev: str, folder: Path) -> Path:
    """``layers/common`` of ``rev`` from this repository's history, into ``folder``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "layers/common"], capture_output=True,
                             check=True).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "layers" / "common"


def _cells(values: list[float] | None) -> str:
    if not values:
        return "| | |"
    return " | ".join(f"{percentile(values, q) or 0:.1f}" for q in (50, 99, 100))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=500_000)
    parser.add_argument("--requests", type=int, default=30, help="timed requests per read")
    parser.add_argument("--before", metavar="REV", help="also time ticklock as it was at this commit, first")
    parser.add_argument("--depth", type=int, default=0, help="jobs before the deep pages (default: half of them)")
    parser.add_argument("--keep", action="store_true", help="keep the SQLite file (its folder is printed)")
    args = parser.parse_args()
    if args.jobs < 1_000:
        parser.error("--jobs: at least 1,000")
    rng = random.Random(46)
    folder = Path(tempfile.mkdtemp(prefix="ticklock-bench-dashboard-"))
    db = folder / "bench.db"
    source = before_tree(args.before, folder / "before") if args.before else None
    label = f"at {args.before}" if args.before else "today"
    runs: list[tuple[str, float, dict[str, list[float]]]] = []
    server = Server(db, folder, source, label)
    try:
        groups = fill(server, args.jobs, rng)
        change_states(server, groups["recurring"], rng)
        write_history(db, datetime.now(UTC))
        wants = {"done": len(groups["once"]), "failing": len(groups["failing"]),
                 "alerting": len(groups["failing"]) // 4}  # fmt: skip
        counts = settle(server, wants)

        def step(s: Server) -> dict[str, list[float]]:
            return time_reads(s, reads(s, groups["busy"][0], args.depth or args.jobs // 2, counts), args.requests)

        runs.append((server.label, server.started_in, step(server)))
        if source is not None:
            server.stop()
            server = Server(db, folder, None, "today")
            runs.append((server.label, server.started_in, step(server)))
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\n{args.jobs:,} jobs in SQLite ({', '.join(f'{k} {v:,}' for k, v in counts.items())}); "
          f"{args.requests} requests a read, one after another; {platform.node()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {time.strftime('%Y-%m-%d %H:%M')}; "
          + "; ".join(f"serve {name} up in {up:.1f} s" for name, up, _ in runs) + "\n")  # fmt: skip
    head = " | ".join(f"{name}: p50 | p99 | max" for name, _, _ in runs)
    print(f"| read (ms) | {head} |")
    print("|---|" + "---:|" * (3 * len(runs)))
    for label in runs[0][2]:
        print(f"| `{label}` | " + " | ".join(_cells(timings.get(label)) for _, _, timings in runs) + " |")
    if args.keep:
        print(f"\nthe file: {db} (rm -r {folder} when done)", file=sys.stderr)


if __name__ == "__main__":
    main()
