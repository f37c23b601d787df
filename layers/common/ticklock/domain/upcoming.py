"""A job's fires still to come, as the engine will treat them (``GET /jobs/{id}/upcoming``, the job page,
``ticklock jobs show``). A property test checks that the first one ``due`` is the fire the engine claims.

They start from the slot the dispatcher waits for (``next_run_at``), not from now. What a user's hold
keeps back is listed, marked, not hidden: a timed hold's slots up to its end as ``held`` (paused until an
instant) or ``skipped`` (the next fires skipped), at most all but one of those asked for, so that the fire
it resumes at is listed too; a paused job's slots, as it would fire once resumed now, as ``paused``. A
pending manual trigger and a backfill's next slot are fires to come too.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice, takewhile

from ticklock.domain.jobs import Fire, HoldKind, Job, Trigger
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule, upcoming
from ticklock.domain.schedules import Fire as Slot
from ticklock.domain.states import JobState, job_state

_JUST = timedelta(microseconds=1)


class Coming(enum.StrEnum):
    """What will become of a fire to come."""

    DUE = "due"  # it runs at its time
    RUNNING = "running"  # its run has started
    PAUSED = "paused"  # the job is paused: it runs only if the job is resumed by then
    HELD = "held"  # a pause until an instant keeps it back
    SKIPPED = "skipped"  # a skip of the next fires keeps it back


@dataclass(frozen=True)
class ComingFire:
    """One fire to come: its slot (with its wall clock and any clock change), why it exists, when it starts
    (the slot plus its jitter) and what will become of it."""

    slot: Slot
    trigger: Trigger
    starts_at: datetime
    status: Coming


def coming_fires(job: Job, now: datetime, count: int, after: datetime | None = None) -> list[ComingFire]:
    """The job's next ``count`` fires (after ``after``, if given), earliest start first."""
    state = job_state(job, now)
    fires = list(_extra_fires(job))
    if state is JobState.PAUSED:
        first = job.next_run_at if isinstance(job.schedule, OnceSchedule) else job.schedule.first_after(now)
        fires += _marked(job, _walk(job.schedule, first, after), count, Coming.PAUSED)
    elif state in (JobState.ENABLED, JobState.HELD) and job.next_run_at is not None:
        hold = job.hold if state is JobState.HELD else None
        if hold is not None and hold.skipped_from is not None and hold.resumes_at is not None:
            kept = Coming.SKIPPED if hold.kind is HoldKind.SKIP else Coming.HELD
            ends = hold.resumes_at
            kept_back = takewhile(lambda s: s.at < ends, _walk(job.schedule, hold.skipped_from, after))
            # at most count - 1 of them: the fire it resumes at is always listed
            fires += _marked(job, (s for s in kept_back if s.at > now), count - 1, kept)
        fires += _marked(job, _walk(job.schedule, job.next_run_at, after), count, Coming.DUE)
    if job.lease is not None and job.lease.until > now:
        claimed = Fire.of(job, now)  # the fire the live claim is running
        fires = [
            ComingFire(f.slot, f.trigger, f.starts_at, Coming.RUNNING)
            if (f.slot.at, f.trigger) == (claimed.scheduled_at, claimed.trigger)
            else f
            for f in fires
        ]
    if after is not None:
        fires = [f for f in fires if f.slot.at > after]
    fires.sort(key=lambda f: (f.starts_at, f.trigger is Trigger.SCHEDULE))
    return fires[:count]


def _extra_fires(job: Job) -> Iterator[ComingFire]:
    """The fires that are not the schedule's next: a pending manual trigger, a backfill's next slot."""
    if job.trigger_at is not None:
        yield ComingFire(Slot(job.trigger_at, job.trigger_at), Trigger.MANUAL, job.trigger_at, Coming.DUE)
    if job.backfill is not None:
        at = job.backfill.next_at
        yield ComingFire(Slot(at, at), Trigger.BACKFILL, at, Coming.DUE)


def _marked(job: Job, slots: Iterator[Slot], count: int, status: Coming) -> list[ComingFire]:
    return [
        ComingFire(slot, Trigger.SCHEDULE, job.jittered(slot.at) or slot.at, status) for slot in islice(slots, count)
    ]


def _walk(schedule: Schedule, first: datetime | None, after: datetime | None) -> Iterator[Slot]:
    """The schedule's slots from ``first`` on (``first`` included), past ``after`` if given."""
    if first is None:
        return
    if isinstance(schedule, CronSchedule):
        start = first - _JUST if after is None else max(first - _JUST, after)
        moment = start
        while True:  # in chunks: the caller takes what it needs
            chunk = upcoming(schedule, after=moment, count=20)
            yield from chunk
            if len(chunk) < 20:
                return
            moment = chunk[-1].at
    elif isinstance(schedule, IntervalSchedule):
        step = timedelta(seconds=schedule.seconds)
        n = 0 if after is None or after < first else (after - first) // step + 1
        try:
            while True:
                at = first + n * step
                yield Slot(at, at)
                n += 1
        except OverflowError:  # past the year 9999
            return
    elif after is None or first > after:
        yield Slot(first, first)
