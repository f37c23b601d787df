"""Where a user's hold puts a job, as functions of the job and the time: the fire a pause until an instant
or a skip of some fires resumes at, ending a timed hold early (with the ledger entry for the slots it held
back), and resuming a paused job. The service reads and writes the store around them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ticklock.domain.job_rules import first_fire
from ticklock.domain.jobs import MAX_NOTE, MAX_SKIP, Job
from ticklock.domain.ledger import LedgerEntry, held_entry, hold_reason
from ticklock.domain.schedules import IntervalSchedule, OnceSchedule, Schedule
from ticklock.errors import ConflictError, InvalidJob

LAST_HOLD = datetime(9999, 12, 30, tzinfo=UTC)  # a pause ends before this (schedules end there)


def in_flight(job: Job, slot: datetime, now: datetime) -> bool:
    """Whether the scheduled fire at ``slot`` is claimed right now: it will run, whatever a hold says."""
    if job.lease is None or job.lease.until <= now:
        return False
    return job.trigger_at is None or job.trigger_at > (job.jittered(slot) or slot)  # the claim is not a trigger's


def check_hold(note: str | None, count: int | None) -> None:
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE):
        raise InvalidJob(f"must be text of at most {MAX_NOTE} characters", field="note")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SKIP):
        raise InvalidJob(f"must be a whole number from 1 to {MAX_SKIP}", field="count")


def after_hold(schedule: Schedule, waiting: datetime, *, until: datetime | None, count: int) -> datetime | None:
    """The fire a hold resumes at: the first at or after ``until``, or the one after ``count`` fires from
    ``waiting`` (the fire the job waits for, the first held back)."""
    if until is not None:
        if isinstance(schedule, IntervalSchedule):
            return max(until, waiting)
        return schedule.next_after(max(until, waiting) - timedelta(microseconds=1))
    at: datetime | None = waiting
    try:
        for _ in range(count):
            if at is None:
                return None
            at = schedule.next_after(at)
    except OverflowError:  # an interval's fires past the year 9999
        return None
    return at


def end_hold(job: Job, now: datetime) -> tuple[Job, LedgerEntry | None]:
    """End ``job``'s timed hold now, if one is in force: the job as it goes on (its next fire the first
    after now, no hold) and the entry for the hold's slots that came by (None if none did)."""
    hold = job.active_hold
    if hold is None or hold.resumes_at is None or hold.skipped_from is None:
        return job, None
    ended = job.with_changes(hold=None)
    if hold.resumes_at > now:
        ended = ended.with_changes(next_run_at=first_fire(job.schedule, now))
    until = min(hold.resumes_at, now + timedelta(microseconds=1))
    after = hold.skipped_from - timedelta(microseconds=1)
    return ended, held_entry(job.id, job.schedule, hold_reason(hold), after, until, now)


def resumed(job: Job, now: datetime) -> Job:
    """``job`` scheduled again from ``now``: fires missed while it was paused are not run."""
    if isinstance(job.schedule, OnceSchedule):
        if job.next_run_at is None:
            raise ConflictError("this one-shot job has already run: trigger it, or give it a new schedule")
        return job.with_changes(enabled=True, disabled_reason=None, hold=None)
    try:
        first = first_fire(job.schedule, now)
    except InvalidJob as exc:
        raise ConflictError(f"cannot resume: {exc}") from None
    return job.with_changes(enabled=True, disabled_reason=None, next_run_at=first, hold=None)
