"""The fire ledger through the engine, on every store (SQLite, FerretDB on both backends), with a fake
clock: each fire that did not run ends as one entry with its reason - slots collapsed by lateness, slots
skipped while the job's run went on, a missing handler, a failed lock backend - and the metrics and the
events tell the same story; the fires that are not ends (a duplicate delivery, a held lock) leave none."""

from __future__ import annotations

from datetime import timedelta

from tests.support.engine import EVERY_10, Engine, T
from tests.support.factories import make_execution, make_job
from tests.support.recorders import DownLocker
from ticklock.adapters.lock.local import LocalLocker
from ticklock.domain.fire_rules import SkipReason
from ticklock.domain.job_settings import Policy
from ticklock.domain.ledger import LedgerEntry, Reason, account
from ticklock.domain.schedules import CronSchedule, IntervalSchedule
from ticklock.engine.job_lock import LockFailure
from ticklock.handlers.contract import HandlerContext


def test_slots_that_passed_while_the_fire_was_late_are_missed_as_collapsed(engine: Engine) -> None:
    job = engine.add()
    engine.clock.advance(35)  # the dispatcher was down: the slots at +10, +20, +30 pass
    outcome = engine.runner().run(engine.claim())
    assert outcome.execution is not None and outcome.execution.scheduled_at == T  # run once, at its own time
    assert engine.ledger(job) == [("collapsed", 10, 30, 3)]
    assert engine.store.get_job(job.id).next_run_at == T + timedelta(seconds=40)
    assert ("missed", "collapsed", 3) in engine.metrics.accounted and ("ran", "success", 1) in engine.metrics.accounted
    [event] = [e for e in engine.publisher.events if e.detail_type == "job.fire.missed"]
    assert event.detail()["reason"] == "collapsed" and event.detail()["count"] == 3
    assert event.detail()["fire_time"] == (T + timedelta(seconds=10)).isoformat()


def test_slots_that_passed_while_the_run_went_on_are_skipped_as_overlap(engine: Engine) -> None:
    job = engine.add("long")
    engine.clock.advance(12)  # late by 12 s: the slot at +10 passed before the run started
    engine.runner().run(engine.claim())  # then it runs 25 s: +20 and +30 pass while it runs
    assert engine.ledger(job) == [("collapsed", 10, 10, 1), ("overlap_skip", 20, 30, 2)]
    assert [e.outcome.value for e in engine.store.list_fires(job.id, start=T, end=T + timedelta(minutes=1))] == [
        "skipped",
        "missed",
    ]
    assert ("skipped", "overlap_skip", 2) in engine.metrics.accounted


def test_an_unknown_handler_and_a_failed_lock_backend_skip_the_fire_with_their_reason(engine: Engine) -> None:
    ghost = engine.add("not-registered")
    assert engine.runner().run(engine.claim()).skipped is SkipReason.UNKNOWN_HANDLER
    assert engine.ledger(ghost) == [("unknown_handler", 0, 0, 1)]
    locked = engine.add()
    engine.store.update_job(engine.store.get_job(ghost.id).with_changes(enabled=False), expected_version=2)
    assert engine.runner(DownLocker(), LockFailure.SKIP).run(engine.claim()).skipped is SkipReason.LOCK_UNAVAILABLE
    assert engine.ledger(locked) == [("lock_unavailable", 0, 0, 1)]
    types = [e.detail_type for e in engine.publisher.events]
    assert types.count("job.fire.skipped") == 2


def test_a_fire_that_runs_anyway_leaves_no_entry(engine: Engine) -> None:
    job = engine.add()
    fire = engine.claim()
    locker = LocalLocker(engine.clock)
    held = locker.acquire(f"job:{job.id}", 60)  # its own earlier delivery holds the job
    assert held is not None
    assert engine.runner(locker).run(fire).skipped is SkipReason.LOCK_HELD
    locker.release(f"job:{job.id}", held)
    engine.runner(locker).run(fire)  # it runs
    engine.runner(locker).run(fire)  # a duplicate delivery after it
    assert engine.ledger(job) == []
    assert [(o, r) for o, r, _ in engine.metrics.accounted] == [("ran", "success")]


def test_a_manual_fire_and_an_interval_job_have_no_slots_to_miss(engine: Engine) -> None:
    interval = engine.add(schedule=IntervalSchedule(10))
    engine.clock.advance(35)
    engine.runner().run(engine.claim())
    assert engine.ledger(interval) == []
    cron = engine.add()
    stored = engine.store.get_job(cron.id)
    paused = stored.with_changes(enabled=False, trigger_at=T + timedelta(seconds=35))  # only the trigger is due
    engine.store.update_job(paused, expected_version=stored.version)
    engine.clock.advance(30)  # a late manual fire: slots +10 .. +60 pass, but they are not the manual fire's
    manual = engine.claim(cron)
    assert manual.trigger.value == "manual" and engine.runner().run(manual).execution is not None
    assert engine.ledger(cron) == []


def test_account_says_what_became_of_every_slot_of_a_window(engine: Engine) -> None:
    job = engine.add("long")
    engine.clock.advance(12)
    engine.runner().run(engine.claim())  # ran at 0, collapsed 10, overlap 20-30; now is +37, next is +40
    stored = engine.store.get_job(job.id)
    fates = account(
        stored,
        start=T - timedelta(minutes=1, seconds=10),
        end=T + timedelta(seconds=60),
        now=engine.clock.now(),
        executions=engine.store.list_executions(job.id),
        entries=engine.store.list_fires(job.id, start=T - timedelta(hours=1), end=T + timedelta(hours=1)),
        limit=100,
    )
    by_second = {int((f.at - T).total_seconds()): (f.status, f.reason) for f in fates}
    assert by_second[0] == ("ran", None) and by_second[10] == ("missed", "collapsed")
    assert by_second[20] == by_second[30] == ("skipped", "overlap_skip")
    assert by_second[40] == by_second[60] == ("upcoming", None)
    assert by_second[-70] == by_second[-60] == ("before_created", None)  # created at -60
    assert by_second[-50] == ("unaccounted", None)  # a slot of its life that nothing accounts for
    assert [int((f.at - T).total_seconds()) for f in fates][:3] == [60, 50, 40]  # newest first
    paused = stored.with_changes(enabled=False)
    later = account(
        paused,
        start=T,
        end=T + timedelta(seconds=90),
        now=T + timedelta(seconds=65),
        executions=[],
        entries=[],
        limit=5,
    )
    assert [(int((f.at - T).total_seconds()), f.status) for f in later] == [
        (90, "paused"),
        (80, "paused"),
        (70, "paused"),
        (60, "missed"),
        (50, "missed"),
    ]


def test_a_collapsed_range_is_counted_up_to_its_cap() -> None:
    every_second = CronSchedule("* * * * * *")
    entry = LedgerEntry("j", Reason.COLLAPSED, T, T, 1, T)
    assert entry.outcome.value == "missed" and entry.id == f"j:missed:schedule:{T.isoformat()}"
    from ticklock.domain.ledger import MAX_COUNTED, slots_between

    passed = slots_between(every_second, T, T + timedelta(seconds=5))
    assert passed == (T + timedelta(seconds=1), T + timedelta(seconds=4), 4, False)
    capped = slots_between(every_second, T, T + timedelta(days=3))
    assert capped is not None and capped[2] == MAX_COUNTED and capped[3] is True
    assert capped[1] == T + timedelta(days=3, seconds=-1)  # the range is exact: only its count stops
    assert slots_between(IntervalSchedule(1), T, T + timedelta(days=1)) is None


def test_a_fire_later_than_its_catch_up_window_is_missed_and_the_job_moves_on(engine: Engine) -> None:
    job = engine.store.add_job(
        make_job(
            handler="noop",
            schedule=EVERY_10,
            next_run_at=T,
            created_at=T - timedelta(minutes=1),
            timeout=60,
        ).with_changes(policy=Policy(catchup_window=5.0))
    )
    engine.clock.advance(4)  # inside the window: it runs, at its own time
    assert engine.runner().run(engine.claim()).execution is not None
    engine.clock.advance(6 + 15)  # the next slot (+10) is 10 s late at +20... and +20 is due
    fire = engine.claim()
    assert fire.scheduled_at == T + timedelta(seconds=10)
    assert engine.runner().run(fire).skipped is SkipReason.CATCHUP_WINDOW_PASSED
    assert engine.ledger(job) == [("catchup_window_passed", 10, 10, 1), ("collapsed", 20, 20, 1)]
    assert engine.store.get_job(job.id).next_run_at == T + timedelta(seconds=30)
    assert ("missed", "catchup_window_passed", 1) in engine.metrics.accounted
    # a manual fire is never too late
    stored = engine.store.get_job(job.id)
    engine.store.update_job(stored.with_changes(trigger_at=T), expected_version=stored.version)
    manual = engine.claim()
    assert manual.trigger.value == "manual" and engine.runner().run(manual).execution is not None


def test_a_long_window_of_a_dense_schedule_lists_its_newest_slots() -> None:
    every_second = CronSchedule("* * * * * *")
    job = make_job(schedule=every_second, next_run_at=T, created_at=T - timedelta(days=40))
    fates = account(job, start=T - timedelta(days=31), end=T, now=T, executions=[], entries=[], limit=3)
    assert [f.at for f in fates] == [T, T - timedelta(seconds=1), T - timedelta(seconds=2)]


def test_a_job_paused_while_its_fire_runs_is_accounted_once(engine: Engine) -> None:
    job = engine.add("long")
    fire = engine.claim()

    def pause_meanwhile(ctx: HandlerContext) -> None:
        engine.clock.advance(25)  # +10, +20 pass while it runs, and the job is paused meanwhile
        stored = engine.store.get_job(job.id)
        engine.store.update_job(stored.with_changes(enabled=False), expected_version=stored.version)

    engine.registry._handlers.pop("long")
    engine.registry.register("long", pause_meanwhile)
    assert engine.runner().run(fire).execution is not None
    assert engine.ledger(job) == []  # the advance kept the paused job's schedule: not this fire's slots
    from ticklock.domain.service import JobService

    engine.clock.advance(20)  # +45: resume
    JobService(engine.store, engine.registry, engine.clock).resume(job.id)
    assert engine.ledger(job) == [("paused", 10, 40, 4)]  # from after the slot that ran (0) to +40


def test_a_late_second_delivery_of_a_fire_that_ran_leaves_no_entry(engine: Engine) -> None:
    job = engine.store.add_job(
        make_job(schedule=EVERY_10, next_run_at=T, created_at=T - timedelta(minutes=1), timeout=60).with_changes(
            policy=Policy(catchup_window=5.0)
        )
    )
    fire = engine.claim()
    first = LocalLocker(engine.clock)
    held = first.acquire(f"job:{job.id}", 60)  # the first delivery is running and holds the lock
    assert held is not None
    engine.store.start_execution(make_execution(fire))
    engine.clock.advance(8)  # the second delivery comes 8 s late: past the window, but the fire runs
    outcome = engine.runner(first).run(fire)
    assert outcome.skipped is SkipReason.LOCK_HELD
    assert engine.ledger(job) == []
    assert engine.store.get_job(job.id).lease is not None  # its claim is left to the run that holds it


def test_a_run_started_before_its_time_by_a_skewed_clock_does_not_skip_its_own_slot(engine: Engine) -> None:
    job = engine.add("long")
    fire = engine.claim()
    engine.clock.advance(-1)  # this runner's clock is a second behind: the run starts before its slot
    engine.runner().run(fire)  # runs 25 s: +10 and +20 pass while it runs
    assert engine.ledger(job) == [("overlap_skip", 10, 20, 2)]
