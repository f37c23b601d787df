"""Which past slots a backfill runs, as functions of the job, the window asked for and the time: the
window's checks and its slots (``backfill_slots``), and the pending backfill once a window joins it
(``joined``). The service reads which slots were backfilled already and stores the result."""

from __future__ import annotations

from datetime import datetime, timedelta

from ticklock.domain.jobs import MAX_BACKFILL, Backfill, Job
from ticklock.domain.ledger import newest_slots
from ticklock.domain.schedules import IntervalSchedule
from ticklock.errors import ConflictError, InvalidJob

BACKFILL_OVERLAPS = ("buffer_all", "allow_all")  # a backfill's fires in turn, or side by side


def backfill_slots(job: Job, start: datetime, end: datetime, overlap: str, now: datetime) -> list[datetime]:
    """The slots of ``job``'s schedule in [start, end] a backfill would run, oldest first: at most
    MAX_BACKFILL, all past, and before the slot the job waits for (that one runs anyway)."""
    if overlap not in BACKFILL_OVERLAPS:
        raise InvalidJob(f"must be one of {', '.join(BACKFILL_OVERLAPS)}, not {overlap!r}", field="overlap")
    if end > now:
        raise InvalidJob(f"must not be in the future (now {now.isoformat()}): a backfill runs past fires", field="to")
    if start > end:
        raise InvalidJob("the window's start is after its end", field="from")
    if isinstance(job.schedule, IntervalSchedule):
        raise ConflictError("an interval job has no slots of its own to backfill: trigger it")
    try:
        slots = newest_slots(job.schedule, start - timedelta(microseconds=1), end, MAX_BACKFILL + 1)
    except OverflowError:
        raise InvalidJob("is too far in the past for the calendar", field="from") from None
    if len(slots) > MAX_BACKFILL:
        raise InvalidJob(
            f"the window holds more than {MAX_BACKFILL} fires of the schedule: backfill a shorter one", field="from"
        )
    waiting = job.next_run_at if job.enabled else None
    slots = [at for at in slots if waiting is None or at < waiting]
    if not slots:
        raise InvalidJob("the window holds no past fire of the schedule", field="from")
    return slots


def joined(job: Job, slots: list[datetime], overlap: str, now: datetime) -> Backfill:
    """The job's backfill once the window of ``slots`` is asked for: a new one, or the pending one
    extended by a window that meets or overlaps it (one queue per job)."""
    pending = job.backfill
    first, last = slots[0], slots[-1]
    if pending is not None:
        after_pending = job.schedule.next_after(pending.until) or pending.until
        after_window = job.schedule.next_after(last) or last
        if first > after_pending or after_window < pending.next_at:  # neither meets nor overlaps it
            raise ConflictError(
                f"a backfill is pending ({pending.next_at.isoformat()} to {pending.until.isoformat()}): "
                "post a window that meets it, or wait for it to end"
            )
        first, last = min(first, pending.next_at), max(last, pending.until)
        if len(newest_slots(job.schedule, first - timedelta(microseconds=1), last, MAX_BACKFILL + 1)) > MAX_BACKFILL:
            raise InvalidJob(f"with the pending backfill, more than {MAX_BACKFILL} fires", field="from")
        overlap = pending.overlap if overlap == "buffer_all" else overlap
    return Backfill(next_at=first, until=last, requested_at=now, overlap=overlap)
