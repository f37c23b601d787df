"""A job's state, as the API, the command line and the dashboard show it: one model, decided here.

A job is in exactly one state, and may carry conditions on top of it:

- ``enabled``: it fires on its schedule.
- ``paused``: a user stopped it until it is resumed.
- ``held``: a user held it back until an instant that is still ahead: paused until then, or skipping its
  next fires (``Hold``); it fires again by itself at ``hold.resumes_at``.
- ``disabled``: ticklock stopped it (``disabled_reason`` says why: its schedule found no next fire).
- ``done``: a one-shot job that has fired; nothing is left to run.

Conditions: ``failing`` (its last run failed, timed out or was lost) and ``alerting`` (an alert is raised).

The stores filter and count by the same rules (``Store.find_jobs``, ``Store.count_jobs``), and a contract
test checks them against ``job_state`` for every job it makes.
"""

from __future__ import annotations

import enum
from datetime import datetime

from ticklock.domain.jobs import Job


class JobState(enum.StrEnum):
    """What a job is doing (one of them at a time)."""

    ENABLED = "enabled"
    PAUSED = "paused"
    HELD = "held"
    DISABLED = "disabled"
    DONE = "done"


class JobCondition(enum.StrEnum):
    """What may be wrong with a job, whatever its state."""

    FAILING = "failing"
    ALERTING = "alerting"


# the values a jobs listing filters on: each state, then each condition
JOB_FILTERS = (*(s.value for s in JobState), *(c.value for c in JobCondition))


def job_state(job: Job, now: datetime) -> JobState:
    """The job's state at ``now``. A timed hold counts while its end is ahead: once ``resumes_at`` has
    come the job is due again (``enabled``), even before its fire at that instant has been claimed."""
    if job.enabled:
        hold = job.hold
        if hold is not None and hold.resumes_at is not None and hold.resumes_at > now:
            return JobState.HELD
        return JobState.ENABLED
    if job.disabled_reason is not None:
        return JobState.DISABLED
    return JobState.PAUSED if job.next_run_at is not None else JobState.DONE


def job_conditions(job: Job) -> list[JobCondition]:
    """The job's conditions, in ``JobCondition``'s order."""
    found = []
    if job.last_run is not None and job.last_run.failing:
        found.append(JobCondition.FAILING)
    if job.open_alerts:
        found.append(JobCondition.ALERTING)
    return found
