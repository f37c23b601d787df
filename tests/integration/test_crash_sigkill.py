"""``ticklock serve`` on an SQLite file, killed with SIGKILL again and again during a stream of fires and
started again at once on the same file: the only fires run twice are runs cut off before their final
write, every fire is accounted for, and every job is back at work soon after each restart.

The jobs run every second (``* * * * * *``, so the ledger has a slot to account for each second); their
handler (tests/support/crash_handler.py) marks each run's start and end in files of its own. Each kill
comes at a random moment (seeded: CRASH_SEED) once every job has run again since the last one; the test
reads the file's executions still running at each kill (its writer dead, exactly what had been
committed), then starts the next process. A run "cut off before its final write" is one whose execution
was still running at the kill: mostly a start mark without an end, but also a run killed between its
handler's return (its end mark) and the final write, which the marks alone cannot tell from a run recorded
and then run again. Settings are the defaults but for these: a port of its own for
each process, the test's handler module, and TICKLOCK_FIRE_LOG=each (a log line per fire, so that a fire
the test finds wrong can be followed in the log).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.crash import (
    Plan,
    Serve,
    analyse,
    at_ms,
    every_second_jobs,
    kill_lines,
    log_about,
    read_runs,
    restart_stream,
    running_in_sqlite,
    serve_environ,
)
from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.ledger import account

# the stream is capped at PLAN.cap s; the first process gets a minute to start, the last a minute to stop
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(420)]

JOBS = 48  # every second each: all due at the start of each second, on the default 30 workers
PLAN = Plan(kills=20, fires=5_000, bound=15.0, pause=(0.3, 3.0), cap=210.0)
BACK_WITHIN = 15.0  # s after a restart by which every job has run again (a behavioural bound, generous)


def test_sigkill_reruns_only_runs_cut_off_and_every_job_is_soon_back(tmp_path: Path) -> None:
    seed = int(os.environ.get("CRASH_SEED", "0")) or random.randrange(1, 1 << 30)
    rng = random.Random(seed)
    db, folder = tmp_path / "crash.db", tmp_path / "marks"
    folder.mkdir()
    store = SQLiteStore(db, checkpoint_every=0)
    try:
        first = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
        jobs = every_second_jobs(JOBS, folder, first_at=first)
        store.add_jobs(jobs)
    finally:
        store.close()
    names = [job.name for job in jobs]
    environ = serve_environ(TICKLOCK_DB=str(db))
    started: list[Serve] = []

    def start() -> Serve:
        return Serve(environ, tmp_path / "serve.log", tmp_path)

    try:
        kills = restart_stream(start, folder, names, rng, PLAN, started=started,
                               running_at_kill=running_in_sqlite(db, {j.id: j.name for j in jobs}))  # fmt: skip
        last = started[-1]  # its jobs are back at work (or the bound passed): an orderly stop ends the runs open
        assert last.stop() == 0, last.log.read_text(errors="replace")[-3000:]
    finally:
        for serve in started:
            serve.stop(timeout=10)

    runs = read_runs(folder)
    found = analyse(runs, kills, names)
    seen = (f"(CRASH_SEED={seed}: {len(kills)} kills, {found.fires} fires, {found.runs} runs; ran twice "
            f"{len(found.twice)}, of them cut off mid-run {len(found.cut_mid_run)}, after the handler returned "
            f"and before the final write {len(found.ended_unwritten)})")  # fmt: skip
    print(seen, *kill_lines(found, kills), sep="\n")

    # the one re-run a crash may cause: of a run cut off before its final write (by a kill of its process)
    log = tmp_path / "serve.log"
    assert not found.unexplained, "\n".join(
        [seen, *found.unexplained[:10], *log_about(log, found.unexplained_fires[:3])]
    )

    # every fire accounted for: the store's executions against the marks, and the ledger for every slot
    store = SQLiteStore(db, checkpoint_every=0)
    try:
        executions = {j.name: store.list_executions(j.id, limit=100_000) for j in jobs}
        stored = {j.name: store.get_job(j.id) for j in jobs}
        end = datetime.now(UTC)
        entries = {j.name: store.list_fires(j.id, start=first, end=end, limit=100_000) for j in jobs}
    finally:
        store.close()
    by_fire = {(name, _ms(e.scheduled_at)): e for name, rows in executions.items() for e in rows}
    assert sum(len(rows) for rows in executions.values()) == len(by_fire), "two executions of one fire"
    marked = {r.fire for r in runs}
    ended = {r.fire for r in runs if r.ended}
    assert marked <= set(by_fire), f"runs without an execution: {sorted(marked - set(by_fire))[:5]} {seen}"
    statuses = Counter(e.status for e in by_fire.values())
    succeeded = {f for f, e in by_fire.items() if e.status is ExecutionStatus.SUCCESS}
    assert succeeded <= ended, f"recorded as succeeded, never returned: {sorted(succeeded - ended)[:5]} {seen}"
    unmarked = {f: e.status.value for f, e in by_fire.items() if f not in marked}
    assert all(s != "success" for s in unmarked.values()), f"{unmarked} {seen}"
    left = {f for f, e in by_fire.items() if not e.status.final}
    assert left <= {f for k in kills for f in (k.running or ())} | set(unmarked), f"open: {sorted(left)[:5]} {seen}"
    fates: Counter[str] = Counter()
    for name in names:
        job = stored[name]
        latest = max((r.slot for r in runs if r.job == name), default=None)
        assert latest is not None, f"{name} never ran {seen}"
        window = account(job, start=first, end=at_ms(latest), now=end, executions=executions[name],
                         entries=entries[name], limit=100_000)  # fmt: skip
        fates.update(f.status for f in window)
        lost = [f.at.isoformat() for f in window if f.status == "unaccounted"]
        assert not lost, f"{name}: slots that nothing accounts for: {lost[:5]} {seen}"
    print(f"store: executions by status {dict(statuses)}; slots by fate {dict(fates)}")

    # back at work soon after each restart, on the same file (see the module's docstring)
    slow = {n: {job: s for job, s in since.items() if s is None or s > BACK_WITHIN}
            for n, since in enumerate(found.from_restart, 1)}  # fmt: skip
    slow = {n: jobs_ for n, jobs_ in slow.items() if jobs_}
    assert not slow, f"jobs not run again within {BACK_WITHIN:g} s of a restart, by kill: {slow} {seen}"

    # and the stream was what this test is about
    assert len(kills) >= PLAN.kills and statuses[ExecutionStatus.SUCCESS] >= PLAN.fires, seen


def _ms(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
