"""Backfill through the service and the engine, on every store, with a fake clock: the fires of a past
window of a job's schedule run again, each once however often it is asked (twice, or by two processes),
in turn or side by side, without moving the schedule; a dry run lists them and runs nothing."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from tests.support.engine import Engine, T
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.fires import Trigger
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import IntervalSchedule
from ticklock.domain.service import JobService
from ticklock.errors import ConflictError, InvalidJob
from ticklock.handlers.contract import HandlerContext


def _runs(engine: Engine, job: Job) -> list[tuple[str, int]]:
    runs = engine.store.list_executions(job.id, limit=500)
    return sorted((e.trigger.value, int((e.scheduled_at - T).total_seconds())) for e in runs)


def _drain(engine: Engine) -> None:
    """Claim and run until nothing is due now."""
    for _ in range(100):
        now = engine.clock.now()
        claimed = engine.store.claim_due(now=now, horizon=now, limit=10, owner="t", slack=timedelta(seconds=120))
        if not claimed:
            return
        from ticklock.domain.fires import Fire

        for job in claimed:
            engine.runner().run(Fire.of(job, now))


def test_a_backfill_runs_each_fire_of_a_past_window_once_without_moving_the_schedule(
    engine: Engine, service: JobService
) -> None:
    job = engine.add()
    engine.clock.advance(5)  # T + 5: the fire at T is due
    _drain(engine)  # it runs; the job waits for +10
    _, fires = service.backfill(job.id, start=T - timedelta(seconds=30), end=T)
    assert [int((at - T).total_seconds()) for at, _ in fires] == [-30, -20, -10, 0]
    _drain(engine)
    assert _runs(engine, job) == [
        ("backfill", -30),
        ("backfill", -20),
        ("backfill", -10),
        ("backfill", 0),
        ("schedule", 0),
    ]
    after = engine.store.get_job(job.id)
    assert after.next_run_at == T + timedelta(seconds=10) and after.backfill is None  # the schedule did not move
    again, fires = service.backfill(job.id, start=T - timedelta(seconds=30), end=T)  # asked again: nothing runs
    assert all(done for _, done in fires) and again.backfill is None
    _drain(engine)
    assert len(_runs(engine, job)) == 5


def test_a_scheduled_fire_due_during_a_backfill_runs_first(engine: Engine, service: JobService) -> None:
    job = engine.add()
    engine.clock.advance(-1)  # T - 1
    service.backfill(job.id, start=T - timedelta(seconds=60), end=T - timedelta(seconds=50))
    engine.clock.advance(1)  # T: the scheduled fire is due as well
    first = engine.claim()
    assert first.trigger is Trigger.SCHEDULE and first.scheduled_at == T
    engine.runner().run(first)
    assert engine.claim().trigger is Trigger.BACKFILL


def test_the_same_backfill_asked_twice_and_by_two_processes_runs_each_fire_once(
    engine: Engine, service: JobService
) -> None:
    job = engine.add()
    engine.clock.advance(5)
    _drain(engine)
    other = JobService(engine.store, engine.registry, engine.clock)
    start, end = T - timedelta(seconds=50), T - timedelta(seconds=10)
    threads = [
        threading.Thread(target=s.backfill, args=(job.id,), kwargs={"start": start, "end": end})
        for s in (service, other, service)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    _drain(engine)
    assert _runs(engine, job) == [("backfill", t) for t in (-50, -40, -30, -20, -10)] + [("schedule", 0)]


def test_a_dry_run_lists_the_fires_and_runs_none(engine: Engine, service: JobService) -> None:
    job = engine.add()
    engine.clock.advance(5)
    before = engine.store.get_job(job.id)
    same, fires = service.backfill(job.id, start=T - timedelta(seconds=20), end=T, dry_run=True)
    # T is the fire the job waits for (due, not yet run): it runs on its schedule, not in the backfill
    assert [at for at, _ in fires] == [T - timedelta(seconds=20), T - timedelta(seconds=10)]
    assert not any(done for _, done in fires)
    assert same.version == before.version and engine.store.get_job(job.id).backfill is None


def test_a_backfill_side_by_side_starts_each_fire_while_the_others_run(engine: Engine, service: JobService) -> None:
    release, started = threading.Event(), threading.Semaphore(0)

    def held(ctx: HandlerContext) -> None:
        started.release()
        release.wait(30)

    engine.registry.register("held", held)
    job = engine.add("held")
    engine.clock.advance(-1)  # nothing scheduled is due
    service.backfill(job.id, start=T - timedelta(seconds=30), end=T - timedelta(seconds=10), overlap="allow_all")
    runner = engine.runner()
    threads = []
    for _ in range(3):
        fire = engine.claim()  # claimable again at once: the backfill moved on when the fire started
        assert fire.trigger is Trigger.BACKFILL
        thread = threading.Thread(target=runner.run, args=(fire,))
        thread.start()
        threads.append(thread)
        assert started.acquire(timeout=10)
    release.set()
    for thread in threads:
        thread.join(10)
    assert _runs(engine, job) == [("backfill", -30), ("backfill", -20), ("backfill", -10)]
    assert all(e.status is ExecutionStatus.SUCCESS for e in engine.store.list_executions(job.id))


def test_a_backfill_that_cannot_be_is_refused_and_writes_nothing(engine: Engine, service: JobService) -> None:
    job = engine.add()
    with pytest.raises(InvalidJob) as future:
        service.backfill(job.id, start=T - timedelta(seconds=10), end=T + timedelta(seconds=10))
    assert future.value.field == "to"
    with pytest.raises(InvalidJob, match="more than 1000") as many:
        service.backfill(job.id, start=T - timedelta(hours=3), end=T)
    assert many.value.field == "from"
    with pytest.raises(InvalidJob) as empty:
        service.backfill(job.id, start=T - timedelta(seconds=5), end=T - timedelta(seconds=1))
    assert empty.value.field == "from"
    interval = engine.add(schedule=IntervalSchedule(30))
    with pytest.raises(ConflictError, match="interval"):
        service.backfill(interval.id, start=T - timedelta(minutes=1), end=T)
    assert engine.store.get_job(job.id).version == 1 and engine.store.get_job(job.id).backfill is None


def test_a_second_window_extends_a_pending_backfill_it_meets_and_is_refused_across_a_gap(
    engine: Engine, service: JobService
) -> None:
    job = engine.add()
    engine.clock.advance(-1)  # nothing scheduled is due
    service.backfill(job.id, start=T - timedelta(seconds=60), end=T - timedelta(seconds=50))
    extended, _ = service.backfill(job.id, start=T - timedelta(seconds=40), end=T - timedelta(seconds=30))
    assert extended.backfill is not None and extended.backfill.until == T - timedelta(seconds=30)
    with pytest.raises(ConflictError, match="pending"):
        service.backfill(job.id, start=T - timedelta(hours=2), end=T - timedelta(hours=2) + timedelta(seconds=10))


def test_a_new_schedule_ends_a_pending_backfill(engine: Engine, service: JobService) -> None:
    from ticklock.domain.schedules import CronSchedule

    job = engine.add()
    engine.clock.advance(-1)
    service.backfill(job.id, start=T - timedelta(seconds=60), end=T - timedelta(seconds=10))
    changed = service.update(job.id, {"schedule": CronSchedule("* * * * * *")})
    assert changed.backfill is None


def test_backfill_runs_outlive_the_per_job_pruning_so_a_repost_runs_nothing(
    engine: Engine, service: JobService
) -> None:
    job = engine.add()
    engine.clock.advance(-1)
    service.backfill(job.id, start=T - timedelta(seconds=30), end=T - timedelta(seconds=10))
    _drain(engine)
    assert engine.store.prune_executions(older_than=T - timedelta(days=30), keep_per_job=0) == 0
    _, fires = service.backfill(job.id, start=T - timedelta(seconds=30), end=T - timedelta(seconds=10))
    assert all(done for _, done in fires)
