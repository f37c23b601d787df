"""Where a job goes on after a fire: the overlap policy's answer (``jobs.Overlap``).

The slots that passed since a fire's slot, while it was late or while its run went on, are the policy's
to decide: ``skip`` (and ``allow_all``, whose runs never wait for one another) go on at the first slot
after now; ``buffer_one`` at the latest slot that passed, ``buffer_all`` at the oldest of the newest
``BUFFER_ALL_CAP`` that passed (each then runs in turn, carrying its own time); ``cancel_other`` at the
first slot after its run started, the one whose coming due cancelled it. With jitter, a slot is due at
its jittered time: one whose offset has not yet come is not passed. A job's catch-up window bounds what
the buffers keep: a slot older than it is not run. Whatever the job does not go on to is recorded
by the lifecycle (``collapsed`` before the run started, ``overlap_skip`` while it ran). Interval and
once schedules have no slots to pass: they go on as they always did.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ticklock.domain.job_settings import BUFFER_ALL_CAP, Overlap
from ticklock.domain.jobs import Job
from ticklock.domain.ledger import newest_slots
from ticklock.domain.schedules import CronSchedule, next_fire

_BUFFERED = {Overlap.BUFFER_ONE: 1, Overlap.BUFFER_ALL: BUFFER_ALL_CAP}


def following(job: Job, slot: datetime, started: datetime | None, now: datetime) -> datetime | None:
    """The slot ``job`` goes on to after its scheduled fire at ``slot``, whose run started at ``started``
    (None: it did not run) and ended at ``now``. None: the schedule has no more."""
    schedule, overlap, jitter = job.schedule, job.policy.overlap, job.policy.max_jitter
    if not isinstance(schedule, CronSchedule):
        return next_fire(schedule, now=max(now, slot))
    if overlap is Overlap.CANCEL_OTHER and started is not None:
        return schedule.next_after(max(started, slot))
    keep = _BUFFERED.get(overlap)
    if keep is not None:
        window = job.policy.catchup_window
        # the window is measured from a fire's jittered time: a slot up to max_jitter older may be within it
        oldest = slot if window is None else max(slot, now - timedelta(seconds=window + jitter, microseconds=1))
        # the newest slots that came due (with jitter, the newest may still wait for its offset)
        waiting = [s for s in newest_slots(schedule, oldest, now, keep + 1) if (job.jittered(s) or s) <= now][-keep:]
        if waiting:
            return waiting[0]
    # the first slot not yet due: with jitter, a slot already past may still be waiting for its offset
    at = schedule.next_after(max(now - timedelta(seconds=jitter), slot) if jitter else max(now, slot))
    while jitter and at is not None and (job.jittered(at) or at) <= now:
        at = schedule.next_after(at)
    return at
