"""The fires a job's page lists as coming (``coming_fires``) are the ones the engine runs: for random
interval, cron and once jobs (with jitter or not, a catch-up window or not, any overlap policy) put
through random pauses, holds, skips, resumes, triggers and backfills at random times, the first fire
listed as one the engine takes (due, running or missed) is the one the real store's claim hands out next,
not a moment before its start, however late the engine gets to it; while claimed it is listed as
running; when the engine is on time the fire it takes after it is the second listed; no fire listed as
kept back (held, skipped, paused) is ever claimed; a job that lists none is claimed by nobody. The oracle
is the engine itself (SQLite store, claim, runner) on a fake clock, checked over several fires in a row."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.engine import Engine, T
from tests.support.factories import make_job
from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.domain.fires import Fire, Trigger
from ticklock.domain.job_settings import Policy
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule
from ticklock.domain.service import JobService
from ticklock.domain.upcoming import Coming, coming_fires
from ticklock.errors import ConflictError, InvalidJob

SCHEDULES = st.one_of(
    st.sampled_from([7, 10, 60, 3600]).map(IntervalSchedule),
    st.sampled_from(
        [
            CronSchedule("*/10 * * * * *"),
            CronSchedule("0 */5 * * * *"),
            CronSchedule("30 15 9 * * *", "Europe/London"),
            CronSchedule("0 30 1 * * 0", "America/New_York"),
        ]
    ),
    st.integers(1, 86_400).map(lambda s: OnceSchedule(T + timedelta(seconds=s))),
)
ACTIONS = st.lists(
    st.tuples(
        st.integers(0, 400),  # seconds the clock moves before the action
        st.sampled_from(["pause", "pause_until", "skip", "resume", "trigger", "backfill", "nothing"]),
        st.integers(1, 7200),  # the hold's length in seconds, or the skip's count (mod 5, + 1)
    ),
    max_size=6,
)
EARLY = timedelta(milliseconds=1)
TAKEN = (Coming.DUE, Coming.RUNNING, Coming.MISSED)  # the fires a claim takes (a missed one is recorded)


def _act(service: JobService, engine: Engine, job_id: str, action: str, n: int) -> None:
    now = engine.clock.now()
    try:
        if action == "pause":
            service.pause(job_id, note="a pause")
        elif action == "pause_until":
            service.pause(job_id, until=now + timedelta(seconds=n))
        elif action == "skip":
            service.skip(job_id, n % 5 + 1)
        elif action == "resume":
            service.resume(job_id)
        elif action == "trigger":
            service.trigger(job_id)
        elif action == "backfill":
            service.backfill(job_id, start=now - timedelta(seconds=n % 120 + 1), end=now)
    except (ConflictError, InvalidJob):
        pass  # refused (a one-shot cannot be held, a paused job skipped): the job is as it was


POLICIES = st.builds(
    Policy,
    catchup_window=st.sampled_from([None, None, 60.0, 3600.0]),
    overlap=st.sampled_from(["skip", "skip", "buffer_one", "buffer_all", "cancel_other"]),
    max_jitter=st.sampled_from([0.0, 0.0, 5.0]),
)
LATE = st.sampled_from([0.0, 0.0, 0.0, 0.4, 30.0, 7200.0])  # seconds the engine takes the fire after its start


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=SCHEDULES, policy=POLICIES, actions=ACTIONS, data=st.data())
def test_the_first_fire_listed_due_is_the_one_the_engine_claims(
    schedule: Schedule, policy: Policy, actions: list[tuple[int, str, int]], data: Any
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "store.db")
        engine = Engine(store)
        try:
            service = JobService(store, engine.registry, engine.clock)
            created = make_job(schedule=schedule, next_run_at=schedule.first_after(T), created_at=T, timeout=60)
            job = store.add_job(created.with_changes(policy=policy))
            for wait, action, n in actions:
                engine.clock.advance(wait)
                _act(service, engine, job.id, action, n)
            kept_back: set[tuple[datetime, str]] = set()
            for _ in range(4):  # fire after fire
                if not _next_is_claimed(engine, job.id, data, kept_back):
                    break
        finally:
            engine.invoker.close()
            store.close()


def _next_is_claimed(engine: Engine, job_id: str, data: Any, kept_back: set[tuple[datetime, str]]) -> bool:
    """Check the first fire listed as one the engine takes against the claim (and, when on time, the one
    after it), and that no fire listed as kept back is ever claimed; run it; False when none is listed."""
    now = engine.clock.now()
    job = engine.store.get_job(job_id)
    listed = coming_fires(job, now, 10)
    kept_back |= {(f.slot.at, f.trigger.value) for f in listed if f.status not in TAKEN}
    assert [f.starts_at for f in listed] == sorted(f.starts_at for f in listed)
    coming = [f for f in listed if f.status in TAKEN]
    if not coming:
        engine.clock.advance(3 * 86_400)
        assert _claim(engine, job_id) is None, (job, listed)
        return False
    first = coming[0]
    if first.starts_at - EARLY > now:  # not a moment before its start
        _move_to(engine, first.starts_at - EARLY)
        assert _claim(engine, job_id) is None, (job, first)
    _move_to(engine, max(first.starts_at, engine.clock.now()))
    late = data.draw(LATE, label="seconds late")
    engine.clock.advance(late)
    fire = _claim(engine, job_id)
    assert fire is not None, (job, first)
    if first.trigger is Trigger.BACKFILL and fire.trigger is Trigger.SCHEDULE:
        # a backfill fills the time no scheduled fire is due: taken late, a scheduled fire listed as due by
        # then goes first (Fire.of)
        # looked for past the ten listed: a timed hold's slots, listed before it, may fill them
        longer = [f for f in coming_fires(job, now, 10_000) if f.status in TAKEN]
        due_by_then = [f for f in longer if f.trigger is Trigger.SCHEDULE and f.starts_at <= engine.clock.now()]
        assert late and due_by_then and (fire.scheduled_at, fire.trigger) == (due_by_then[0].slot.at, Trigger.SCHEDULE)
        first = due_by_then[0]
    assert (fire.scheduled_at, fire.trigger) == (first.slot.at, first.trigger), (job, listed)
    assert (fire.scheduled_at, fire.trigger.value) not in kept_back, (job, listed)
    claimed = coming_fires(engine.store.get_job(job_id), engine.clock.now(), 10)
    [running] = [f for f in claimed if (f.slot.at, f.trigger) == (fire.scheduled_at, fire.trigger)]
    assert running.status is Coming.RUNNING, claimed
    engine.runner().run(fire)
    ran = engine.store.execution_for(job_id, fire.trigger, fire.scheduled_at) is not None
    if first.status is Coming.MISSED:  # past its catch-up window when listed: recorded, never run
        assert not ran, (job, first)
    elif late == 0:
        assert ran, (job, first)
    then = [f for f in coming_fires(engine.store.get_job(job_id), engine.clock.now(), 10) if f.status in TAKEN]
    if late == 0 and len(coming) > 1 and then:  # taken at its start (or now): the second comes next
        assert (then[0].slot.at, then[0].trigger) == (coming[1].slot.at, coming[1].trigger), (job, coming, then)
    return True


def _move_to(engine: Engine, moment: datetime) -> None:
    engine.clock.advance((moment - engine.clock.now()).total_seconds())


def _claim(engine: Engine, job_id: str) -> Fire | None:
    """The fire the store hands out for the job now, if any (the dispatcher's own claim)."""
    now = engine.clock.now()
    claimed = engine.store.claim_due(now=now, horizon=now, limit=10, owner="test", slack=timedelta(seconds=120))
    return next((Fire.of(j, now) for j in claimed if j.id == job_id), None)
