"""A job and an execution as SQLite rows and back. Times are integer microseconds since the epoch (UTC)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from ticklock.domain.jobs import Execution, ExecutionStatus, Job, Lease, Trigger
from ticklock.domain.schedules import Schedule, schedule_from_dict, schedule_to_dict


def us(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def from_us_or_none(value: int | None) -> datetime | None:
    return None if value is None else from_us(value)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def us_delta(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def utc_now() -> datetime:
    return datetime.now(UTC)


def job_row(job: Job, now: datetime) -> tuple[Any, ...]:
    return (
        job.id,
        job.name,
        job.handler,
        json.dumps(schedule_to_dict(job.schedule)),
        json.dumps(job.payload),
        job.timeout,
        job.max_retries,
        int(job.enabled),
        us(job.next_run_at),
        us(job.trigger_at),
        us(job.due_at(now)),
        job.lease.token if job.lease else None,
        job.lease.owner if job.lease else None,
        us(job.lease.until) if job.lease else None,
        job.version,
        us(job.created_at),
        us(job.updated_at),
        job.disabled_reason,
    )


@lru_cache(maxsize=4096)
def schedule_from_text(text: str) -> Schedule:
    # schedules are frozen values, and most jobs share a handful of them: parse each text once
    return schedule_from_dict(json.loads(text))


def job_from_row(row: tuple[Any, ...]) -> Job:
    lease = Lease(row[11], row[12], from_us(row[13])) if row[11] else None
    return Job(
        id=row[0],
        name=row[1],
        handler=row[2],
        schedule=schedule_from_text(row[3]),
        payload=json.loads(row[4]),
        timeout=row[5],
        max_retries=row[6],
        enabled=bool(row[7]),
        next_run_at=from_us_or_none(row[8]),
        trigger_at=from_us_or_none(row[9]),
        lease=lease,
        version=row[14],
        created_at=from_us(row[15]),
        updated_at=from_us(row[16]),
        disabled_reason=row[17],
    )


def execution_row(e: Execution) -> tuple[Any, ...]:
    return (
        e.id,
        e.job_id,
        e.fire_key,
        e.handler,
        e.trigger.value,
        us(e.scheduled_at),
        us(e.started_at),
        us(e.deadline_at),
        e.run_token,
        e.owner,
        e.status.value,
        e.attempts,
        e.resumes,
        us(e.finished_at),
        e.duration,
        e.error,
    )


def execution_from_row(row: tuple[Any, ...]) -> Execution:
    return Execution(
        id=row[0],
        job_id=row[1],
        fire_key=row[2],
        handler=row[3],
        trigger=Trigger(row[4]),
        scheduled_at=from_us(row[5]),
        started_at=from_us(row[6]),
        deadline_at=from_us(row[7]),
        run_token=row[8],
        owner=row[9],
        status=ExecutionStatus(row[10]),
        attempts=row[11],
        resumes=row[12],
        finished_at=from_us_or_none(row[13]),
        duration=row[14],
        error=row[15],
    )
