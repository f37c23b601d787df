"""A fire, one run of a job that is due (its identity: the job, the trigger and the slot), and the lease
a claim holds on its job while the fire is handled."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a fire carries its job; the job module needs Trigger and Lease from here
    from ticklock.domain.jobs import Job

LOCK_MARGIN = 5.0  # seconds a job's lock outlives its timeout (the reference's timeout + 5 s)


class Trigger(enum.StrEnum):
    """Why a fire exists: its schedule came due, or someone asked for a run now."""

    SCHEDULE = "schedule"
    MANUAL = "manual"
    BACKFILL = "backfill"  # a past slot of its schedule, asked for again (``POST /jobs/{id}/backfill``)


@dataclass(frozen=True)
class Lease:
    """A claim on a job: while it holds, no other claimer can take the job."""

    token: str
    owner: str
    until: datetime


@dataclass(frozen=True)
class Fire:
    """One scheduled (or triggered) run of a job: its identity is (job id, trigger, time)."""

    job: Job
    scheduled_at: datetime
    trigger: Trigger
    lease_token: str

    @property
    def key(self) -> str:
        return fire_key(self.job.id, self.trigger, self.scheduled_at)

    @property
    def jitter(self) -> float:
        """Seconds after its slot the fire starts (a manual fire has none: it was asked for now)."""
        return self.job.policy.jitter(self.job.id, self.scheduled_at) if self.trigger is Trigger.SCHEDULE else 0.0

    @property
    def due(self) -> datetime:
        """When the fire starts: its slot plus its jitter."""
        if self.trigger is not Trigger.SCHEDULE:
            return self.scheduled_at
        return self.job.jittered(self.scheduled_at) or self.scheduled_at

    @staticmethod
    def of(job: Job, horizon: datetime | None = None) -> Fire:
        """The fire a freshly claimed job stands for: a pending trigger first, else its schedule; a backfill's
        next slot when neither is due by ``horizon`` (the claim's; None: when neither is pending)."""
        if job.lease is None:
            raise ValueError("only a claimed job has a fire")
        scheduled = job.next_run_at if job.enabled else None
        if job.backfill is not None and job.trigger_at is None:
            due = job.jittered(scheduled)
            if due is None or (horizon is not None and due > horizon):
                return Fire(job, job.backfill.next_at, Trigger.BACKFILL, job.lease.token)
        if job.trigger_at is not None and (
            scheduled is None or job.trigger_at <= (job.jittered(scheduled) or scheduled)
        ):
            return Fire(job, job.trigger_at, Trigger.MANUAL, job.lease.token)
        if scheduled is None:
            raise ValueError(f"job {job.id} was claimed with nothing due")
        return Fire(job, scheduled, Trigger.SCHEDULE, job.lease.token)


def fire_key(job_id: str, trigger: Trigger, scheduled_at: datetime) -> str:
    micros = int(scheduled_at.timestamp() * 1_000_000)
    return f"{job_id}:{trigger.value}:{micros}"
