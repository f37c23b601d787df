"""A job's fires still to come, as the engine will treat them (``GET /jobs/{id}/upcoming``, the job page,
``ticklock jobs show``). A property test checks them against the engine's own claims.

They start from the slot the dispatcher waits for (``next_run_at``), not from now; a late one is followed
by the slot the engine goes on to after it (``overlap.following``, as if each run took no time), and is
``missed`` if it is past the job's catch-up window. What a user keeps back is listed, marked, not hidden:
a timed hold's slots up to its end as ``held`` (paused until an instant) or ``skipped`` (the next fires
skipped); a paused job's slots, as it would fire once resumed now, as ``paused``. A pending manual trigger
and a backfill's slots are fires to come too, in the order a claim takes them (``Fire.of``). However many
fires are kept back, the first fire that will run is always among those listed.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import islice, takewhile

from ticklock.domain.fires import Fire, Trigger
from ticklock.domain.jobs import HoldKind, Job
from ticklock.domain.overlap import following
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule, upcoming
from ticklock.domain.schedules import Fire as Slot
from ticklock.domain.states import JobState, job_state

_JUST = timedelta(microseconds=1)
_ORDER = {Trigger.MANUAL: 0, Trigger.SCHEDULE: 1, Trigger.BACKFILL: 2}  # a claim's choice on a tie


class Coming(enum.StrEnum):
    """What will become of a fire to come."""

    DUE = "due"  # it runs at its time
    RUNNING = "running"  # its run has started
    MISSED = "missed"  # it is later than the job's catch-up window: it will be recorded, not run
    PAUSED = "paused"  # the job is paused: it runs only if the job is resumed by then
    HELD = "held"  # a pause until an instant keeps it back
    SKIPPED = "skipped"  # a skip of the next fires keeps it back


RUNS = (Coming.DUE, Coming.RUNNING)


@dataclass(frozen=True)
class ComingFire:
    """One fire to come: its slot (with its wall clock and any clock change), why it exists, when it starts
    (the slot plus its jitter; a backfill's slot as soon as it is claimed) and what will become of it."""

    slot: Slot
    trigger: Trigger
    starts_at: datetime
    status: Coming


def coming_fires(job: Job, now: datetime, count: int, after: datetime | None = None) -> list[ComingFire]:
    """The job's next ``count`` fires (after ``after``, if given), in the order they start."""
    state = job_state(job, now)
    fires = list(_extra_fires(job, now, count))
    if state is JobState.PAUSED:
        first = job.next_run_at if isinstance(job.schedule, OnceSchedule) else job.schedule.first_after(now)
        fires += _marked(job, _walk(job.schedule, first, after), count, Coming.PAUSED)
    elif state in (JobState.ENABLED, JobState.HELD) and job.next_run_at is not None:
        hold = job.hold if state is JobState.HELD else None
        if hold is not None and hold.skipped_from is not None and hold.resumes_at is not None:
            kept = Coming.SKIPPED if hold.kind is HoldKind.SKIP else Coming.HELD
            ends = hold.resumes_at
            since = max(after or now, now)  # the slots already passed are not to come (nor walked)
            fires += _marked(job, takewhile(lambda s: s.at < ends, _walk(job.schedule, hold.skipped_from, since)),
                             count, kept)  # fmt: skip
        fires += _scheduled(job, job.next_run_at, now, count, after)
    fires = _running(job, now, fires)
    if after is not None:
        fires = [f for f in fires if f.slot.at > after]
    fires.sort(key=lambda f: (f.starts_at, _ORDER[f.trigger]))
    listed = fires[:count]
    runs = next((f for f in fires if f.status in RUNS), None)
    if runs is not None and runs not in listed:  # kept-back fires fill the list: the one that runs ends it
        listed[-1] = runs
    return listed


def _scheduled(job: Job, first: datetime, now: datetime, count: int, after: datetime | None) -> list[ComingFire]:
    """The schedule's fires from ``first``: it, then the slot the engine goes on to once it has run (if it
    is late, the first not yet due, or those a buffering overlap policy keeps), then each slot after."""
    starts = job.jittered(first) or first
    window = job.policy.catchup_window
    missed = window is not None and (now - starts).total_seconds() > window
    head = _marked(job, _walk(job.schedule, first, None), 1, Coming.MISSED if missed else Coming.DUE)
    ran = max(now, starts)
    try:
        then = following(job, first, None if missed else ran, ran)
    except OverflowError:  # past the year 9999
        then = None
    return head + _marked(job, _walk(job.schedule, then, after), count, Coming.DUE)


def _extra_fires(job: Job, now: datetime, count: int) -> Iterator[ComingFire]:
    """The fires that are not the schedule's: a pending manual trigger; a backfill's slots, each as soon as
    a claim takes it (a claim takes one when no scheduled fire is due)."""
    if job.trigger_at is not None:
        yield ComingFire(Slot(job.trigger_at, job.trigger_at), Trigger.MANUAL, job.trigger_at, Coming.DUE)
    backfill = job.backfill
    if backfill is not None:
        soon = max(now, backfill.next_at)
        slots = takewhile(lambda s: s.at <= backfill.until, _walk(job.schedule, backfill.next_at, None))
        for slot in islice(slots, count):
            yield ComingFire(slot, Trigger.BACKFILL, soon, Coming.DUE)


def _running(job: Job, now: datetime, fires: list[ComingFire]) -> list[ComingFire]:
    """``fires`` with the one a live claim is running marked so."""
    if job.lease is None or job.lease.until <= now:
        return fires
    try:
        claimed = Fire.of(job, now)
    except ValueError:  # claimed, then paused or disabled: its fire is no longer among those to come
        return fires
    running = (claimed.scheduled_at, claimed.trigger)
    return [replace(f, status=Coming.RUNNING) if (f.slot.at, f.trigger) == running else f for f in fires]


def _marked(job: Job, slots: Iterator[Slot], count: int, status: Coming) -> list[ComingFire]:
    return [
        ComingFire(slot, Trigger.SCHEDULE, job.jittered(slot.at) or slot.at, status) for slot in islice(slots, count)
    ]


def _walk(schedule: Schedule, first: datetime | None, after: datetime | None) -> Iterator[Slot]:
    """The schedule's slots from ``first`` on (``first`` included), past ``after`` if given, each with its
    wall clock and any clock change (``schedules.upcoming``); a cron's are found from ``after`` at once."""
    if first is None:
        return
    if isinstance(schedule, CronSchedule):
        moment = first - _JUST if after is None else max(first - _JUST, after)
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
