"""A job's executions (GET /jobs/{id}/executions)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from ticklock.api.schemas.fields import STRICT
from ticklock.domain.executions import Execution


class ExecutionOut(BaseModel):
    id: str
    job_id: str
    handler: str
    trigger: str
    status: str
    scheduled_at: datetime
    started_at: datetime
    finished_at: datetime | None
    duration: float | None
    lag: float = Field(
        description="seconds from when the fire was due (its scheduled time plus its jitter) to its start"
    )
    jitter: float = Field(description="seconds after its scheduled time the fire was due (the job's max_jitter)")
    attempts: int
    resumes: int
    error: str | None
    owner: str

    @staticmethod
    def of(e: Execution) -> ExecutionOut:
        return ExecutionOut(
            id=e.id,
            job_id=e.job_id,
            handler=e.handler,
            trigger=e.trigger.value,
            status=e.status.value,
            scheduled_at=e.scheduled_at,
            started_at=e.started_at,
            finished_at=e.finished_at,
            duration=e.duration,
            lag=e.lag,
            jitter=e.jitter,
            attempts=e.attempts,
            resumes=e.resumes,
            error=e.error,
            owner=e.owner,
        )


class ExecutionPage(BaseModel):
    items: list[ExecutionOut]
    next: str | None = Field(description="pass as ?before= for the next page; null on the last")


class ExecutionsQuery(BaseModel):
    model_config = STRICT
    limit: int = Field(50, ge=1, le=500)
    before: str | None = Field(None, min_length=1, max_length=64, description="the `next` of the previous page")
