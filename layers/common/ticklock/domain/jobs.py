"""Jobs, fires and executions: the core's one representation of each concept."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ticklock.domain.schedules import Schedule
from ticklock.errors import InvalidJob

LOCK_MARGIN = 5.0  # seconds a job's lock outlives its timeout (the reference's timeout + 5 s)


class Trigger(enum.StrEnum):
    """Why a fire exists: its schedule came due, or someone asked for a run now."""

    SCHEDULE = "schedule"
    MANUAL = "manual"


class ExecutionStatus(enum.StrEnum):
    """The states of an execution row. Every state but RUNNING is final."""

    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"  # cut off by a shutdown; the fire is resumed by the next claim
    LOST = "lost"  # its owner vanished too often; given up rather than resumed again

    @property
    def final(self) -> bool:
        return self not in (ExecutionStatus.RUNNING, ExecutionStatus.INTERRUPTED)


MAX_CATCHUP_WINDOW = 30 * 86400.0


@dataclass(frozen=True)
class Policy:
    """How a job's fires are decided, beyond its schedule. The defaults are ticklock's behaviour before
    there were policies.

    ``catchup_window``: seconds a scheduled fire may be late and still run (once, carrying its own time);
    a fire later than that is ``missed`` with ``catchup_window_passed`` and the job moves on. None: any
    lateness is caught up."""

    catchup_window: float | None = None

    def __post_init__(self) -> None:
        window = self.catchup_window
        if window is not None:
            if isinstance(window, bool) or not isinstance(window, int | float):
                raise InvalidJob("must be a number of seconds, or null", field="policy.catchup_window")
            if not 1.0 <= window <= MAX_CATCHUP_WINDOW:
                raise InvalidJob(
                    f"must be from 1 to {MAX_CATCHUP_WINDOW:g} seconds, got {window:g}", field="policy.catchup_window"
                )
            object.__setattr__(self, "catchup_window", float(window))  # 300 and 300.0 are one policy

    def to_dict(self) -> dict[str, Any]:
        return {"catchup_window": self.catchup_window}

    @staticmethod
    def from_dict(data: Mapping[str, Any] | None) -> Policy:
        """A stored or given policy; keys it does not know are refused, missing ones take their default."""
        data = data or {}
        unknown = set(data) - {"catchup_window"}
        if unknown:
            raise InvalidJob(f"unknown policy field {sorted(unknown)[0]!r}", field="policy")
        return Policy(catchup_window=data.get("catchup_window"))


@dataclass(frozen=True)
class Lease:
    """A claim on a job: while it holds, no other claimer can take the job."""

    token: str
    owner: str
    until: datetime


@dataclass(frozen=True)
class Job:
    """A job definition and its scheduling state."""

    id: str
    name: str
    handler: str
    schedule: Schedule
    payload: Mapping[str, Any]
    timeout: float
    max_retries: int
    enabled: bool
    next_run_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int = 1
    trigger_at: datetime | None = None
    lease: Lease | None = None
    disabled_reason: str | None = None  # why ticklock (not a user) disabled it; cleared when it is enabled again
    policy: Policy = field(default_factory=Policy)

    def due_at(self, now: datetime) -> datetime | None:
        """When the job is next claimable: its earliest pending fire, but never inside a live lease."""
        candidates = [t for t in (self.next_run_at if self.enabled else None, self.trigger_at) if t]
        if not candidates:
            return None
        due = min(candidates)
        if self.lease is not None and self.lease.until > now:
            return max(due, self.lease.until)
        return due

    def with_changes(self, **changes: Any) -> Job:
        return replace(self, **changes)

    def pending_at(self) -> datetime:
        """The time of its earliest pending fire, whatever its state (the order claims are handed out in)."""
        times = [t for t in (self.trigger_at, self.next_run_at) if t is not None]
        return min(times) if times else self.created_at

    def advanced(self, fire: Fire, next_run_at: datetime | None) -> Job:
        """This job (as stored now) once ``fire`` is done: the lease dropped; a scheduled fire moves the
        schedule to ``next_run_at`` (None disables) unless the job was edited since the claim; a manual
        fire clears the pending trigger if it is this fire's."""
        job = replace(self, lease=None)
        if fire.trigger is Trigger.MANUAL:
            return replace(job, trigger_at=None) if job.trigger_at == fire.scheduled_at else job
        if job.version != fire.job.version:
            return job
        return replace(job, next_run_at=next_run_at, enabled=job.enabled and next_run_at is not None)


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

    @staticmethod
    def of(job: Job) -> Fire:
        """The fire a freshly claimed job stands for: a pending trigger first, else its schedule."""
        if job.lease is None:
            raise ValueError("only a claimed job has a fire")
        scheduled = job.next_run_at if job.enabled else None
        if job.trigger_at is not None and (scheduled is None or job.trigger_at <= scheduled):
            return Fire(job, job.trigger_at, Trigger.MANUAL, job.lease.token)
        if scheduled is None:
            raise ValueError(f"job {job.id} was claimed with nothing due")
        return Fire(job, scheduled, Trigger.SCHEDULE, job.lease.token)


def fire_key(job_id: str, trigger: Trigger, scheduled_at: datetime) -> str:
    micros = int(scheduled_at.timestamp() * 1_000_000)
    return f"{job_id}:{trigger.value}:{micros}"


@dataclass(frozen=True)
class Execution:
    """The record of one fire: unique per fire key."""

    id: str
    job_id: str
    fire_key: str
    handler: str
    trigger: Trigger
    scheduled_at: datetime
    started_at: datetime
    deadline_at: datetime
    run_token: str
    owner: str
    status: ExecutionStatus = ExecutionStatus.RUNNING
    attempts: int = 0
    resumes: int = 0
    finished_at: datetime | None = None
    duration: float | None = None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def lag(self) -> float:
        return (self.started_at - self.scheduled_at).total_seconds()

    def with_changes(self, **changes: Any) -> Execution:
        return replace(self, **changes)
