"""A user's holds on a job, through the service and the engine, on every store, with a fake clock: a
pause with a note, a pause until an instant, and a skip of the next N fires. Each is shown on the job
while it holds, and its slots end as one ledger entry (``paused`` or ``skip_next``): written when the job
reaches the fire after the hold, or when the hold ends early (a resume, a pause, a new schedule), and
never twice, never overlapping another entry or a run."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from tests.support.engine import Engine, T
from ticklock.domain.jobs import HoldKind, Job
from ticklock.domain.service import JobService
from ticklock.errors import ConflictError, InvalidJob


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


def _no_double(engine: Engine, job: Job) -> None:
    """No slot in two entries, and no entry over a slot that ran."""
    entries = sorted(engine.ledger(job), key=lambda e: e[1])
    for (_, _, last, _), (_, first, _, _) in itertools.pairwise(entries):
        assert last < first, entries
    ran = {int((e.scheduled_at - T).total_seconds()) for e in engine.store.list_executions(job.id, limit=500)}
    assert not [(e, r) for e in entries for r in ran if e[1] <= r <= e[2]], (entries, ran)


def test_a_new_schedule_ends_a_hold_none_of_whose_slots_came(engine: Engine, service: JobService) -> None:
    from ticklock.domain.schedules import CronSchedule

    job = engine.add()
    engine.clock.advance(-5)
    service.skip(job.id, 3)
    changed = service.update(job.id, {"schedule": CronSchedule("*/15 * * * * *")})
    assert changed.hold is None and changed.active_hold is None and _at(engine, job) == 0
    for _ in range(3):
        engine.clock.advance((engine.store.get_job(job.id).next_run_at - engine.clock.now()).total_seconds())  # type: ignore[operator]
        engine.runner().run(engine.claim())
    assert engine.ledger(job) == []  # 0, 15 and 30 ran: nothing says they were skipped
    _no_double(engine, job)


def test_a_patch_that_pauses_a_held_job_ends_the_hold_and_leaves_no_gap(engine: Engine, service: JobService) -> None:
    job = engine.add()
    engine.clock.advance(-5)
    service.skip(job.id, 3)  # 0, 10, 20
    service.update(job.id, {"enabled": False})
    engine.clock.advance(30)  # T + 25
    service.resume(job.id)
    assert _at(engine, job) == 30
    assert [s for s in _fates(service, job, 25) if s[1] == "unaccounted"] == []
    assert engine.ledger(job) == [("paused", 0, 20, 3)]


def test_a_patch_that_gives_enabled_as_it_is_keeps_the_hold(engine: Engine, service: JobService) -> None:
    job = engine.add()
    engine.clock.advance(-5)
    service.skip(job.id, 2)
    kept = service.update(job.id, {"enabled": True, "timeout": 5.0})
    assert kept.active_hold is not None and _at(engine, job) == 20


def test_a_run_that_ends_where_a_hold_resumes_does_not_record_the_holds_slots_twice(
    engine: Engine, service: JobService
) -> None:
    job = engine.add("long")  # runs 25 s from T
    fire = engine.claim()
    engine.clock.advance(5)
    service.pause(job.id, until=T + timedelta(seconds=25))  # holds 10 and 20; resumes at 30
    engine.runner().run(fire)  # from T + 5 to T + 30: its own next fire would be 30 or later
    engine.clock.advance(5)
    engine.runner().run(engine.claim())  # the fire at 30, from T + 35 to T + 60
    assert engine.ledger(job) == [("paused", 10, 20, 2), ("overlap_skip", 40, 60, 3)]  # 10, 20: once
    _no_double(engine, job)


def test_a_hold_asked_while_a_trigger_is_claimed_holds_the_scheduled_fire(engine: Engine, service: JobService) -> None:
    job = engine.add()
    engine.clock.advance(-5)
    current = engine.store.get_job(job.id)
    engine.store.update_job(current.with_changes(trigger_at=T - timedelta(seconds=5)), expected_version=1)
    claimed = engine.store.claim_due(
        now=engine.clock.now(), horizon=engine.clock.now(), limit=10, owner="t", slack=timedelta(seconds=60)
    )
    assert [j.trigger_at for j in claimed] == [T - timedelta(seconds=5)]  # the trigger's claim, not T's
    held = service.skip(job.id, 1)
    assert held.active_hold is not None and held.active_hold.skipped_from == T  # T itself is the one skipped
    assert _at(engine, job) == 10


def test_a_pause_with_a_note_is_gone_once_a_new_schedule_enables_the_job(engine: Engine, service: JobService) -> None:
    from ticklock.domain.schedules import OnceSchedule

    job = engine.add()
    service.pause(job.id, note="db migration")
    once = service.update(job.id, {"schedule": OnceSchedule(T + timedelta(minutes=5))})
    assert once.enabled and once.hold is None
    later = service.pause(job.id)
    assert later.active_hold is not None and later.active_hold.note is None


def test_a_pause_until_the_end_of_time_is_refused(engine: Engine, service: JobService) -> None:
    from datetime import UTC, datetime

    job = engine.add()
    with pytest.raises(InvalidJob) as raised:
        service.pause(job.id, until=datetime(9999, 12, 31, 23, 59, tzinfo=UTC))
    assert raised.value.field == "until"


def test_a_resume_does_not_record_a_fire_claimed_before_the_pause(engine: Engine, service: JobService) -> None:
    job = engine.add()
    fire = engine.claim()  # T is claimed; its run has not started
    service.pause(job.id)
    engine.clock.advance(25)
    service.resume(job.id)
    engine.runner().run(fire)  # the claim runs it all the same
    assert engine.ledger(job) == [("paused", 10, 20, 2)]
    _no_double(engine, job)
