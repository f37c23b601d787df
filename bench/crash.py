"""What a SIGKILL costs: fires run twice, and how long the jobs of a killed process wait for their next run.

Usage::

    .venv-engine/bin/python bench/crash.py --mode restart [--kills 20] [--fires 5000] [--jobs 48]
    .venv-engine/bin/python bench/crash.py --mode replicas [--kills 20] [--wait 30]

The scenario of tests/integration/test_crash_sigkill.py (tests/support/crash.py): ``--jobs`` jobs every
second (``* * * * * *``) whose handler takes 0.05 to 0.6 s and marks each run's start and end in files of
its own, at the default settings and the API's default job timeout (``--timeout`` to change it).

* ``restart``: one ``ticklock serve`` on an SQLite file, killed with SIGKILL at random moments and started
  again at once on the same file; the next kill comes once every job has run again (or ``--wait`` s
  passed). The file's executions still running are read at each kill.
* ``replicas``: three ``ticklock serve`` on FerretDB 2.5 (PostgreSQL + DocumentDB) with the Redis lock,
  started here; one replica at a time, drawn at random, is killed and left dead until each of its jobs
  (those it had claimed, or last ran) has run again on a survivor, or ``--wait`` s; then it is started
  again. The replica killed is drawn among those holding claims.

The table: kills, fires (executions in the store), fires that ran twice and how many of them had their
earlier run cut off mid-run (a start mark with no end), and the gap from a kill to each job's next run
(restart: every job; replicas: the killed replica's jobs), p50 / p95 / max over all kills. ``--python``
runs another environment's ``ticklock`` (e.g. main's, side by side with a branch's).
"""

from __future__ import annotations

import argparse
import random
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pymongo import MongoClient

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support.crash import (  # noqa: E402
    Findings,
    Kill,
    Plan,
    Run,
    Serve,
    analyse,
    every_second_jobs,
    kill_lines,
    percentile,
    read_runs,
    restart_stream,
    running_in_sqlite,
    serve_environ,
    spread,
    wait_back,
)
from ticklock.domain.jobs import Job  # noqa: E402

REPLICAS = 3
BOOT = 60.0  # s a restarted replica gets to run its first fire


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=("restart", "replicas"), required=True)
    parser.add_argument("--jobs", type=int, default=48, help="every-second jobs (default 48)")
    parser.add_argument("--kills", type=int, default=20, help="kills at least (default 20)")
    parser.add_argument("--fires", type=int, default=5_000, help="fires at least (default 5,000)")
    parser.add_argument("--wait", type=float, default=None, help="s after a kill for the jobs to run again "
                        "before the next (default: restart 15, replicas 30)")  # fmt: skip
    parser.add_argument("--drain", type=float, default=150.0, help="s after the last kill for every job to run "
                        "again, so that long gaps are measured too (default 150)")  # fmt: skip
    parser.add_argument("--cap", type=float, default=600.0, help="s the stream lasts at most (default 600)")
    parser.add_argument("--timeout", type=float, default=None, help="the jobs' timeout (default: the API's)")
    parser.add_argument("--seed", type=int, default=0, help="the kills' random moments (default: drawn)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter whose ticklock runs")
    args = parser.parse_args(argv)
    seed = args.seed or random.randrange(1, 1 << 30)
    wait = args.wait if args.wait is not None else (15.0 if args.mode == "restart" else 30.0)
    plan = Plan(kills=args.kills, fires=args.fires, bound=wait, cap=args.cap, drain=args.drain)
    with tempfile.TemporaryDirectory(prefix=f"ticklock-crash-{args.mode}-") as tmp:
        folder = Path(tmp) / "marks"
        folder.mkdir()
        first = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=5)
        extra = {} if args.timeout is None else {"timeout": args.timeout}
        jobs = every_second_jobs(args.jobs, folder, first_at=first, **extra)
        run = restart if args.mode == "restart" else replicas
        kills, stored, note, theirs = run(Path(tmp), folder, jobs, random.Random(seed), plan, args.python)
        runs = read_runs(folder)
    found = analyse(runs, kills, [j.name for j in jobs])
    yours = theirs if theirs is not None else [[j.name for j in jobs]] * len(kills)
    print(f"## SIGKILL, {args.mode}: {len(jobs)} jobs every second, job timeout {jobs[0].timeout:g} s, "
          f"wait {wait:g} s, seed {seed}, {args.python}\n\n{note}\n")  # fmt: skip
    print(table(args.mode, found, kills, stored, yours, wait))
    print()
    if args.mode == "restart":
        print("\n".join(kill_lines(found, kills)))
    else:
        for n, (kill, mine, gap) in enumerate(zip(kills, yours, found.gaps, strict=True), 1):
            print(f"kill {n:2d} (pid {kill.pid}, {len(mine)} of its jobs): s from the kill to each of its jobs' "
                  f"next run on a survivor p50/p95/max {spread([gap[j] for j in mine])}")  # fmt: skip
    if found.unexplained:
        print("\nre-runs no kill explains:", *found.unexplained[:20], sep="\n")
    return 0


def table(
    mode: str, found: Findings, kills: Sequence[Kill], stored: int, yours: Sequence[Sequence[str]], wait: float
) -> str:
    gaps = [gap[job] for gap, mine in zip(found.gaps, yours, strict=True) for job in mine]
    seen = [g for g in gaps if g is not None]
    late = sum(1 for g in gaps if g is None or g > wait)
    p50, p95, top = (percentile(seen, q) for q in (50, 95, 100))
    show = " / ".join("-" if v is None else f"{v:.2f}" for v in (p50, p95, top))
    return "\n".join(
        [
            "| mode | kills | fires (store) | runs (marks) | ran twice | of those cut off mid-run "
            "| gap kill → next run p50 / p95 / max (s) | (kill, job) not back within the wait |",
            "|---|---|---|---|---|---|---|---|",
            f"| {mode} | {len(kills)} | {stored:,} | {found.runs:,} | {len(found.twice)} | {len(found.cut_mid_run)} "
            f"| {show} | {late} of {len(gaps)} |",
        ]
    )


def _its_jobs(runs: Sequence[Run], kill: Kill) -> list[str]:
    """The jobs whose last run before ``kill`` was on the process killed."""
    last: dict[str, Run] = {}
    for run in sorted(runs, key=lambda r: r.start_ns):
        if run.start_ns < kill.at_ns:
            last[run.job] = run
    return sorted(job for job, run in last.items() if run.pid == kill.pid)


def restart(
    tmp: Path, folder: Path, jobs: list[Job], rng: random.Random, plan: Plan, python: str
) -> tuple[list[Kill], int, str, list[list[str]] | None]:
    from ticklock.adapters.store.sqlite import SQLiteStore

    db = tmp / "crash.db"
    store = SQLiteStore(db, checkpoint_every=0)
    try:
        store.add_jobs(jobs)
    finally:
        store.close()
    environ = serve_environ(TICKLOCK_DB=str(db))
    started: list[Serve] = []
    try:
        names = {j.id: j.name for j in jobs}
        kills = restart_stream(
            lambda: Serve(environ, tmp / "serve.log", tmp, python),
            folder,
            list(names.values()),
            rng,
            plan,
            started=started,
            running_at_kill=running_in_sqlite(db, names),
        )
    finally:
        for serve in started:
            serve.stop(timeout=60)
    store = SQLiteStore(db, checkpoint_every=0)
    try:
        stored = sum(len(store.list_executions(j.id, limit=1_000_000)) for j in jobs)
    finally:
        store.close()
    return kills, stored, "`ticklock serve` on one SQLite file, restarted at once after each kill.", None


def replicas(
    tmp: Path, folder: Path, jobs: list[Job], rng: random.Random, plan: Plan, python: str
) -> tuple[list[Kill], int, str, list[list[str]] | None]:
    from replicas import DATABASE, started_servers

    from ticklock.adapters.store.mongo import MongoStore

    with started_servers(tmp, ferretdb2=True) as srv:
        store = MongoStore(srv.mongo_uri, database=DATABASE)
        try:
            store.add_jobs(jobs)
        finally:
            store.close()
        environ = serve_environ(TICKLOCK_STORE=srv.mongo_uri, TICKLOCK_LOCK=srv.redis_url)
        started: list[Serve] = []
        client: MongoClient[dict[str, Any]] = MongoClient(srv.mongo_uri, serverSelectionTimeoutMS=5000)
        host = socket.gethostname()

        def held(pid: int) -> set[str]:
            """The jobs claimed by ``pid`` (its default owner name, host:pid)."""
            found = client[DATABASE]["jobs"].find({"lease_owner": f"{host}:{pid}"}, {"name": 1})
            return {doc["name"] for doc in found}

        def start(n: int) -> Serve:
            serve = Serve(environ, tmp / f"serve-{n}.log", tmp, python)
            started.append(serve)
            return serve

        try:
            kills, theirs = _replica_stream(start, held, folder, [j.name for j in jobs], rng, plan)
        finally:
            client.close()
            for serve in started:
                serve.stop(timeout=60)
        store = MongoStore(srv.mongo_uri, database=DATABASE)
        try:
            stored = sum(len(store.list_executions(j.id, limit=1_000_000)) for j in jobs)
        finally:
            store.close()
        note = f"Three `ticklock serve` replicas on {srv.versions}; one killed at a time, started again later."
    return kills, stored, note, theirs


def _replica_stream(
    start: Callable[[int], Serve],
    held: Callable[[int], set[str]],
    folder: Path,
    jobs: Sequence[str],
    rng: random.Random,
    plan: Plan,
) -> tuple[list[Kill], list[list[str]]]:
    """Kill a replica at work (one holding claims, drawn at random), wait for the jobs it held or last ran
    to run on a survivor (``plan.bound`` at most), start it again, and again. Returns the kills and, for
    each, those jobs."""
    live = [start(n) for n in range(REPLICAS)]

    def alive() -> None:
        for serve in live:
            serve.check_alive()

    began = time.monotonic()
    late = wait_back(folder, jobs, since_ns=0, dead=0, until=began + plan.first_run, alive=alive)
    assert not late, f"{len(late)} jobs never ran in the first {plan.first_run:.0f} s"
    kills: list[Kill] = []
    theirs: list[list[str]] = []
    while time.monotonic() - began < plan.cap:
        if len(kills) >= plan.kills and len({r.fire for r in read_runs(folder)}) >= plan.fires:
            break
        time.sleep(rng.uniform(*plan.pause))
        holding = {n: held(serve.pid) for n, serve in enumerate(live)}
        n = rng.choice([n for n, names in holding.items() if names] or list(holding))
        victim = live[n]
        at = victim.kill()
        kills.append(Kill(at, victim.pid, None, None))
        survivors = live[:n] + live[n + 1 :]
        mine = sorted(holding[n] | set(_its_jobs(read_runs(folder), kills[-1])))
        theirs.append(mine)

        def survivors_alive(survivors: list[Serve] = survivors) -> None:
            for serve in survivors:
                serve.check_alive()

        wait_back(
            folder, mine, since_ns=at, dead=victim.pid, until=time.monotonic() + plan.bound, alive=survivors_alive
        )
        live[n] = start(n)
        booted = time.monotonic() + BOOT
        while not any(r.pid == live[n].pid for r in read_runs(folder)) and time.monotonic() < booted:
            live[n].check_alive()
            time.sleep(0.2)
    if kills:  # long gaps measured too: every job's next run after the last kill
        wait_back(
            folder, jobs, since_ns=kills[-1].at_ns, dead=kills[-1].pid, until=time.monotonic() + plan.drain, alive=alive
        )
    return kills, theirs


if __name__ == "__main__":
    raise SystemExit(main())
