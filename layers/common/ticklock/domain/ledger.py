"""The fire ledger: what became of every fire that came due.

A fire that ran is its execution. A fire that did not run is a ``LedgerEntry``: ``skipped`` (ticklock
decided not to run it: the previous run still held the job, its handler is not registered, the lock
backend failed) or ``missed`` (its time passed without a run: slots that passed while a run was late,
or while the job was paused). Consecutive slots that went the same way for the same reason are one
entry with their range and count. Entries are written once: the id is the job, the outcome, the trigger
and the first slot, so replicas and retries recording the same thing leave one.

``account`` answers "what became of each expected slot of this window", from the schedule, the
executions and the entries; a slot none of them explains gets a status that says why (not yet due,
before the job existed, unaccounted).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice

from ticklock.domain.executions import Execution
from ticklock.domain.fires import Trigger
from ticklock.domain.jobs import Hold, HoldKind, Job
from ticklock.domain.schedules import CronSchedule, OnceSchedule, Schedule

MAX_COUNTED = 10_000  # slots counted in one range; past it the count stops here (`capped`), the range does not


class Outcome(enum.StrEnum):
    RAN = "ran"
    SKIPPED = "skipped"
    MISSED = "missed"


class Reason(enum.StrEnum):
    """Why a fire did not run: a closed set (the API, the metrics and the events use these names)."""

    OVERLAP_SKIP = "overlap_skip"  # the slot passed while the job's run went on (one run of a job at a time)
    UNKNOWN_HANDLER = "unknown_handler"  # no handler of the job's name is registered here
    LOCK_UNAVAILABLE = "lock_unavailable"  # the lock backend failed and TICKLOCK_LOCK_FAILURE=skip
    COLLAPSED = "collapsed"  # the slot passed while an earlier fire of the job was late or running
    PAUSED = "paused"  # the slot passed while the job was paused
    CATCHUP_WINDOW_PASSED = "catchup_window_passed"  # the fire came later than its job's catch-up window
    SKIP_NEXT = "skip_next"  # a user asked to skip the job's next fires


OUTCOME_OF = {
    Reason.OVERLAP_SKIP: Outcome.SKIPPED,
    Reason.UNKNOWN_HANDLER: Outcome.SKIPPED,
    Reason.LOCK_UNAVAILABLE: Outcome.SKIPPED,
    Reason.COLLAPSED: Outcome.MISSED,
    Reason.PAUSED: Outcome.MISSED,
    Reason.CATCHUP_WINDOW_PASSED: Outcome.MISSED,
    Reason.SKIP_NEXT: Outcome.SKIPPED,
}


def hold_reason(hold: Hold) -> Reason:
    """The ledger's reason for the slots a user's hold kept back."""
    return Reason.SKIP_NEXT if hold.kind is HoldKind.SKIP else Reason.PAUSED


@dataclass(frozen=True)
class LedgerEntry:
    """One slot, or a run of consecutive slots, that did not run, and why."""

    job_id: str
    reason: Reason
    first_at: datetime  # the first slot (its scheduled time)
    last_at: datetime  # the last slot; equal to first_at for one
    count: int
    recorded_at: datetime
    trigger: Trigger = Trigger.SCHEDULE
    capped: bool = False  # more than MAX_COUNTED slots: count stops there

    @property
    def outcome(self) -> Outcome:
        return OUTCOME_OF[self.reason]

    @property
    def id(self) -> str:
        return f"{self.job_id}:{self.outcome.value}:{self.trigger.value}:{self.first_at.isoformat()}"

    @staticmethod
    def one(job_id: str, reason: Reason, at: datetime, now: datetime, trigger: Trigger) -> LedgerEntry:
        return LedgerEntry(job_id, reason, at, at, 1, now, trigger)


def slots_between(schedule: Schedule, after: datetime, before: datetime) -> tuple[datetime, datetime, int, bool] | None:
    """The schedule's slots strictly between ``after`` and ``before``: (first, last, count, capped), or None.
    Interval schedules have no slots of their own (the next is measured from the end of a run)."""
    found = _slots(schedule, after, before, MAX_COUNTED + 1, inclusive=False)
    if not found:
        return None
    if len(found) <= MAX_COUNTED:
        return found[0], found[-1], len(found), False
    [last] = _slots(schedule, after, before - _JUST, 1, inclusive=True)  # the true last slot, found from the end
    return found[0], last, MAX_COUNTED, True


@dataclass(frozen=True)
class SlotFate:
    """One expected slot of a window (or a fire that is not a slot: a manual trigger, an interval job's
    run) and what became of it: ``ran``, ``skipped``, ``missed``, or, with no record, ``due`` (its time
    came and it is about to run), ``upcoming``, ``paused`` (a paused job's future slot),
    ``before_created`` or ``unaccounted``."""

    at: datetime
    status: str
    reason: str | None = None
    execution: Execution | None = None
    entry: LedgerEntry | None = None


def account(
    job: Job,
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    executions: Iterable[Execution],
    entries: Sequence[LedgerEntry],
    limit: int,
) -> list[SlotFate]:
    """What became of every fire of ``job`` in [start, end]: each expected slot of its schedule, and each
    fire that ran or was recorded there; newest first, at most ``limit``."""
    fates: dict[tuple[datetime, str], SlotFate] = {}
    for e in executions:
        if start <= e.scheduled_at <= end:
            fates[e.scheduled_at, e.trigger.value] = SlotFate(e.scheduled_at, Outcome.RAN.value, execution=e)
    for entry in entries:
        if entry.first_at == entry.last_at and start <= entry.first_at <= end:
            fate = SlotFate(entry.first_at, entry.outcome.value, entry.reason.value, entry=entry)
            fates.setdefault((entry.first_at, entry.trigger.value), fate)
    waiting = job.next_run_at
    hold = job.active_hold
    held = None
    if hold is not None and hold.skipped_from is not None and hold.resumes_at is not None:
        held = (hold.skipped_from, hold.resumes_at, hold_reason(hold))
    for at in _slots(job.schedule, start, end, limit, inclusive=True):
        key = (at, Trigger.SCHEDULE.value)
        if key in fates:
            continue
        covering = next((e for e in entries if e.first_at <= at <= e.last_at and e.trigger is Trigger.SCHEDULE), None)
        if covering is not None:
            fates[key] = SlotFate(at, covering.outcome.value, covering.reason.value, entry=covering)
        elif held is not None and held[0] <= at < held[1]:  # kept back by a user's timed hold, live
            status = "paused" if held[2] is Reason.PAUSED and at > now else OUTCOME_OF[held[2]].value
            fates[key] = SlotFate(at, status, held[2].value)
        elif waiting is not None and at >= waiting:  # the slot the job waits for, or one after it
            if job.enabled:
                fates[key] = SlotFate(at, "upcoming" if at > now else "due")
            else:
                fates[key] = (
                    SlotFate(at, "paused") if at > now else SlotFate(at, Outcome.MISSED.value, Reason.PAUSED.value)
                )
        elif at <= job.created_at:  # a new job's first fire is after its creation
            fates[key] = SlotFate(at, "before_created")
        else:
            fates[key] = SlotFate(at, "unaccounted")
    return sorted(fates.values(), key=lambda f: f.at, reverse=True)[:limit]


def _slots(schedule: Schedule, start: datetime, end: datetime, limit: int, *, inclusive: bool) -> list[datetime]:
    """The schedule's slots from ``start`` to ``end`` (both included, or neither): with ``inclusive``
    the latest ``limit`` of them (a window's newest), else the earliest ``limit``."""
    if isinstance(schedule, OnceSchedule):
        once = schedule.at
        inside = start <= once <= end if inclusive else start < once < end
        return [once] if inside else []
    if not isinstance(schedule, CronSchedule):
        return []
    if not inclusive:
        return list(islice(_walk(schedule, start, lambda at: at < end), limit))
    # the newest: walk a span before the end, twice as long each time, until it holds enough, keeping
    # the newest ``limit`` of each walk (a walk is bounded; a sparse-then-dense schedule may hit the bound)
    span = timedelta(minutes=1)
    while True:
        begin = max(start, end - span)
        newest = deque(islice(_walk(schedule, begin - _JUST, lambda at: at <= end), MAX_WALK), maxlen=limit)
        if len(newest) >= limit or begin == start:
            return list(newest)
        span *= 2


_JUST = timedelta(microseconds=1)
MAX_WALK = 200_000  # slots one listing walks at most


def _walk(schedule: CronSchedule, after: datetime, inside: Callable[[datetime], bool]) -> Iterator[datetime]:
    """The slots after ``after``, while ``inside`` holds."""
    at = schedule.next_after(after)
    while at is not None and inside(at):
        yield at
        at = schedule.next_after(at)


def held_entry(
    job_id: str, schedule: Schedule, reason: Reason, after: datetime, before: datetime, now: datetime
) -> LedgerEntry | None:
    """The one entry for the slots strictly between ``after`` and ``before`` that ``reason`` kept from
    running (a pause, a hold), or None if there are none."""
    passed = slots_between(schedule, after, before)
    if passed is None:
        return None
    first, last, count, capped = passed
    return LedgerEntry(job_id, reason, first, last, count, now, capped=capped)


def newest_slots(schedule: Schedule, after: datetime, upto: datetime, limit: int) -> list[datetime]:
    """The newest ``limit`` slots of the schedule in (after, upto], oldest first."""
    if upto <= after:
        return []
    return _slots(schedule, after + _JUST, upto, limit, inclusive=True)
