"""Build jobs and executions for tests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from ticklock.domain.executions import Execution
from ticklock.domain.fires import Fire, Trigger
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import IntervalSchedule, Schedule

T0 = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)


def make_job(
    name: str | None = None,
    *,
    next_run_at: datetime | None = T0,
    schedule: Schedule | None = None,
    handler: str = "noop",
    enabled: bool = True,
    timeout: float = 10.0,
    max_retries: int = 0,
    payload: dict[str, Any] | None = None,
    created_at: datetime = T0 - timedelta(hours=1),
) -> Job:
    return Job(
        id=uuid.uuid4().hex,
        name=name or f"job-{uuid.uuid4().hex[:8]}",
        handler=handler,
        schedule=schedule or IntervalSchedule(60),
        payload=payload or {},
        timeout=timeout,
        max_retries=max_retries,
        enabled=enabled,
        next_run_at=next_run_at,
        created_at=created_at,
        updated_at=created_at,
    )


def make_execution(fire: Fire, *, started_at: datetime | None = None, owner: str = "test") -> Execution:
    started = started_at or fire.scheduled_at
    return Execution(
        id=uuid.uuid4().hex,
        job_id=fire.job.id,
        fire_key=fire.key,
        handler=fire.job.handler,
        trigger=fire.trigger,
        scheduled_at=fire.scheduled_at,
        started_at=started,
        deadline_at=started + timedelta(seconds=fire.job.timeout),
        run_token=uuid.uuid4().hex,
        owner=owner,
    )


def manual_fire(job: Job, at: datetime) -> Fire:
    return Fire(job, at, Trigger.MANUAL, job.lease.token if job.lease else "none")
