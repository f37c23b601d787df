"""A user's holds on a job, through the service and the engine, on every store, with a fake clock: a
pause with a note, a pause until an instant, and a skip of the next N fires. Each is shown on the job
while it holds, and its slots end as one ledger entry (``paused`` or ``skip_next``): written when the job
reaches the fire after the hold, or when the hold ends early (a resume, a pause, a new schedule), and
never twice, never overlapping another entry or a run."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.support.engine import Engine, T
from ticklock.domain.jobs import HoldKind, Job
from ticklock.domain.service import JobService
from ticklock.errors import ConflictError, InvalidJob
from ticklock.ports import Store


@pytest.fixture
def engine(store: Store) -> Iterator[Engine]:
    box = Engine(store)
    yield box
    box.invoker.close()


@pytest.fixture
def service(engine: Engine) -> JobService:
    return JobService(engine.store, engine.registry, engine.clock)


def _at(engine: Engine, job: Job) -> int:
    at = engine.store.get_job(job.id).next_run_at
    assert at is not None
    return int((at - T).total_seconds())


def _fates(service: JobService, job: Job, upto: int) -> list[tuple[int, str, str | None]]:
    fates = service.fires(job.id, start=T, end=T + timedelta(seconds=upto), limit=100)
    return [(int((f.at - T).total_seconds()), f.status, f.reason) for f in reversed(fates)]


def test_a_pause_keeps_its_note_and_its_slots_are_one_paused_entry_at_resume(
    engine: Engine, service: JobService
) -> None:
    job = engine.add()
    engine.clock.advance(-5)  # T - 5 s: the job waits for T
    paused = service.pause(job.id, note="vendor outage, INC-42")
    assert not paused.enabled and paused.active_hold is not None
    assert (paused.active_hold.kind, paused.active_hold.note) == (HoldKind.PAUSE, "vendor outage, INC-42")
    assert service.pause(job.id, note="vendor outage, INC-42").version == paused.version  # the same: no change
    renoted = service.pause(job.id, note="still out")
    assert renoted.active_hold is not None and renoted.active_hold.since == paused.active_hold.since
    engine.clock.advance(30)  # T + 25
    resumed = service.resume(job.id)
    assert resumed.enabled and resumed.active_hold is None and resumed.hold is None
    assert engine.ledger(job) == [("paused", 0, 20, 3)]


def test_a_pause_until_an_instant_resumes_by_itself_at_its_first_fire_after_it(
    engine: Engine, service: JobService
) -> None:
    job = engine.add()
    engine.clock.advance(-5)
    held = service.pause(job.id, until=T + timedelta(seconds=35), note="maintenance window")
    assert held.enabled and _at(engine, job) == 40
    hold = held.active_hold
    assert hold is not None and hold.kind is HoldKind.PAUSE and hold.until == T + timedelta(seconds=35)
    assert (hold.skipped_from, hold.resumes_at) == (T, T + timedelta(seconds=40))
    engine.clock.advance(20)  # T + 15: live, the slots that passed are missed, the others paused
    assert _fates(service, job, 40) == [
        (0, "missed", "paused"),
        (10, "missed", "paused"),
        (20, "paused", "paused"),
        (30, "paused", "paused"),
        (40, "upcoming", None),
    ]
    assert engine.ledger(job) == []  # nothing is written while the hold may still end early
    engine.clock.advance(25)  # T + 40: the job's first fire after the hold
    fire = engine.claim()
    assert fire.scheduled_at == T + timedelta(seconds=40)
    engine.runner().run(fire)
    engine.runner().run(fire)  # a second delivery: written once
    assert engine.ledger(job) == [("paused", 0, 30, 4)]
    assert engine.store.get_job(job.id).active_hold is None and _at(engine, job) == 50
    [event] = [e for e in engine.publisher.events if e.detail_type == "job.fire.missed"]
    assert event.detail()["reason"] == "paused" and event.detail()["count"] == 4


def test_a_pause_until_resumed_early_records_only_the_slots_that_passed(engine: Engine, service: JobService) -> None:
    job = engine.add()
    engine.clock.advance(-5)
    service.pause(job.id, until=T + timedelta(minutes=5))
    engine.clock.advance(20)  # T + 15
    resumed = service.resume(job.id)
    assert resumed.enabled and resumed.active_hold is None and _at(engine, job) == 20
    assert engine.ledger(job) == [("paused", 0, 10, 2)]


def test_skipping_the_next_fires_moves_the_job_past_them_and_records_them_as_skip_next(
    engine: Engine, service: JobService
) -> None:
    job = engine.add()
    engine.clock.advance(-5)
    held = service.skip(job.id, 3, note="quiet day")
    assert _at(engine, job) == 30 and held.active_hold is not None and held.active_hold.count == 3
    assert [s for s in _fates(service, job, 30) if s[1] != "upcoming"] == [
        (0, "skipped", "skip_next"),
        (10, "skipped", "skip_next"),
        (20, "skipped", "skip_next"),
    ]
    more = service.skip(job.id, 2)  # a second skip ends the first (none has passed) and skips on from now
    assert _at(engine, job) == 20 and more.active_hold is not None and more.active_hold.count == 2
    engine.clock.advance(25)  # T + 20
    engine.runner().run(engine.claim())
    assert engine.ledger(job) == [("skip_next", 0, 10, 2)]
    assert ("skipped", "skip_next", 2) in engine.metrics.accounted


def test_a_pause_during_a_skip_ends_it_and_the_two_entries_do_not_overlap(engine: Engine, service: JobService) -> None:
    job = engine.add()
    engine.clock.advance(-5)
    service.skip(job.id, 5)  # T to +40
    engine.clock.advance(20)  # T + 15
    paused = service.pause(job.id, note="hold it all")
    assert not paused.enabled and _at(engine, job) == 20  # the skip ended: it waits for the first after now
    engine.clock.advance(30)  # T + 45
    service.resume(job.id)
    assert engine.ledger(job) == [("skip_next", 0, 10, 2), ("paused", 20, 40, 3)]


def test_a_hold_on_a_paused_job_records_the_pause_so_far_and_then_holds(engine: Engine, service: JobService) -> None:
    job = engine.add()
    engine.clock.advance(-5)
    service.pause(job.id)
    engine.clock.advance(20)  # T + 15
    held = service.pause(job.id, until=T + timedelta(seconds=45))
    assert held.enabled and _at(engine, job) == 50
    assert engine.ledger(job) == [("paused", 0, 10, 2)]
    assert held.active_hold is not None and held.active_hold.skipped_from == T + timedelta(seconds=20)


def test_a_skip_leaves_a_fire_that_is_already_running_to_run(engine: Engine, service: JobService) -> None:
    job = engine.add()
    fire = engine.claim()  # the fire at T is claimed, about to run
    held = service.skip(job.id, 2)
    assert held.active_hold is not None and held.active_hold.skipped_from == T + timedelta(seconds=10)
    engine.runner().run(fire)  # it runs; its advance keeps the skip (the job was changed since its claim)
    assert _at(engine, job) == 30 and engine.ledger(job) == []


def test_holds_that_cannot_hold_are_refused_and_change_nothing(engine: Engine, service: JobService) -> None:
    from ticklock.domain.schedules import OnceSchedule

    job = engine.add()
    with pytest.raises(InvalidJob) as past:
        service.pause(job.id, until=T - timedelta(seconds=1))
    assert past.value.field == "until"
    with pytest.raises(InvalidJob) as many:
        service.skip(job.id, 0)
    assert many.value.field == "count"
    with pytest.raises(InvalidJob) as long:
        service.pause(job.id, note="x" * 501)
    assert long.value.field == "note"
    service.pause(job.id)
    with pytest.raises(ConflictError, match="paused"):
        service.skip(job.id, 1)
    once = engine.add(schedule=OnceSchedule(T + timedelta(hours=1)))
    with pytest.raises(ConflictError, match="one-shot"):
        service.skip(once.id, 1)
    assert engine.store.get_job(once.id).version == 1 and engine.store.get_job(once.id).hold is None
