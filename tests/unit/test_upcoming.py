"""A job's fires to come in the cases an operator opens the page for (domain/upcoming.py): a job paused while
its fire runs, a service that fell behind, a catch-up window passed, a backfill beside the schedule, and a
hold that has lasted long. tests/property/test_upcoming.py checks the same list against the engine."""

from __future__ import annotations

from datetime import timedelta

from tests.support.factories import T0, make_job
from ticklock.domain.fires import Lease, Trigger
from ticklock.domain.job_settings import Policy
from ticklock.domain.jobs import Backfill, Hold, HoldKind
from ticklock.domain.schedules import CronSchedule
from ticklock.domain.upcoming import Coming, coming_fires

EVERY_MINUTE = CronSchedule("0 * * * * *")
MINUTE = timedelta(minutes=1)


def _listed(fires: list) -> list[tuple[int, str, str]]:  # type: ignore[type-arg]
    return [(int((f.slot.at - T0) / MINUTE), f.trigger.value, f.status.value) for f in fires]


def test_a_job_paused_while_its_fire_runs_lists_its_paused_fires() -> None:
    job = make_job(schedule=EVERY_MINUTE, next_run_at=T0, enabled=False)
    job = job.with_changes(lease=Lease("token", "owner", T0 + timedelta(minutes=5)))
    fires = coming_fires(job, T0 + timedelta(seconds=1), 3)  # the claim outlives the pause: no error
    assert [f.status for f in fires] == [Coming.PAUSED] * 3


def test_a_service_that_fell_behind_lists_the_late_fire_then_the_first_not_yet_due() -> None:
    job = make_job(schedule=EVERY_MINUTE, next_run_at=T0)
    now = T0 + timedelta(hours=1, seconds=30)
    assert _listed(coming_fires(job, now, 3)) == [(0, "schedule", "due"), (61, "schedule", "due"),
                                                 (62, "schedule", "due")]  # fmt: skip


def test_a_fire_past_its_catch_up_window_is_listed_missed() -> None:
    job = make_job(schedule=EVERY_MINUTE, next_run_at=T0).with_changes(policy=Policy(catchup_window=60))
    assert _listed(coming_fires(job, T0 + timedelta(minutes=5), 2)) == [(0, "schedule", "missed"),
                                                                       (6, "schedule", "due")]  # fmt: skip
    assert coming_fires(job, T0 + timedelta(seconds=59), 1)[0].status is Coming.DUE


def test_a_backfill_runs_while_no_scheduled_fire_is_due_and_each_of_its_slots_is_listed() -> None:
    backfill = Backfill(next_at=T0 - 3 * MINUTE, until=T0 - MINUTE, requested_at=T0)
    job = make_job(schedule=EVERY_MINUTE, next_run_at=T0 + MINUTE).with_changes(backfill=backfill)
    assert _listed(coming_fires(job, T0, 5)) == [(-3, "backfill", "due"), (-2, "backfill", "due"),
                                                (-1, "backfill", "due"), (1, "schedule", "due"),
                                                (2, "schedule", "due")]  # fmt: skip
    late = job.with_changes(next_run_at=T0 - MINUTE)  # a scheduled fire is due: it goes first
    assert _listed(coming_fires(late, T0, 2)) == [(-1, "schedule", "due"), (-3, "backfill", "due")]


def test_a_pending_trigger_goes_first_and_the_running_fire_is_marked() -> None:
    job = make_job(schedule=EVERY_MINUTE, next_run_at=T0).with_changes(trigger_at=T0 - timedelta(seconds=5))
    fires = coming_fires(job.with_changes(lease=Lease("t", "o", T0 + MINUTE)), T0 - timedelta(seconds=4), 2)
    assert [(f.trigger, f.status) for f in fires] == [(Trigger.MANUAL, Coming.RUNNING), (Trigger.SCHEDULE, Coming.DUE)]


def test_a_long_hold_lists_the_slots_still_ahead_and_the_first_fire_that_runs() -> None:
    every_second = CronSchedule("* * * * * *")
    ends = T0 + timedelta(days=30)
    hold = Hold(HoldKind.PAUSE, T0 - timedelta(days=3), skipped_from=T0 - timedelta(days=3), resumes_at=ends)
    job = make_job(schedule=every_second, next_run_at=ends).with_changes(hold=hold)
    fires = coming_fires(job, T0, 4)  # walks from now, not from the hold's start three days back
    assert [f.status for f in fires] == [Coming.HELD] * 3 + [Coming.DUE]
    assert fires[0].slot.at == T0 + timedelta(seconds=1) and fires[-1].slot.at == ends
    with_trigger = coming_fires(job.with_changes(trigger_at=T0), T0, 2)  # the first that runs: the trigger
    assert [(f.trigger, f.status) for f in with_trigger] == [
        (Trigger.MANUAL, Coming.DUE),
        (Trigger.SCHEDULE, Coming.HELD),
    ]
