"""Pydantic models at the API edge; converted to the core's dataclasses and back."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

from ticklock.domain.jobs import Execution, Job
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule
from ticklock.errors import InvalidJob

_STRICT = ConfigDict(extra="forbid")
Name = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]*$",
        description="unique; letters, digits and _ . : @ / -",
    ),
]


class CronIn(BaseModel):
    model_config = _STRICT
    kind: Literal["cron"]
    expr: str = Field(max_length=200, description="six fields, seconds first, or a descriptor like @hourly")
    timezone: str = Field("UTC", max_length=64, description="IANA timezone the fields are read in")

    @field_validator("expr")
    @classmethod
    def _expr(cls, value: str) -> str:
        return _checked(lambda: CronSchedule(value).expr)

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str) -> str:
        return _checked(lambda: CronSchedule("@hourly", value).timezone)

    def to_domain(self) -> Schedule:
        return CronSchedule(self.expr, self.timezone)


class IntervalIn(BaseModel):
    model_config = _STRICT
    kind: Literal["interval"]
    seconds: StrictInt = Field(ge=1, le=366 * 86400, description="whole seconds between runs")

    def to_domain(self) -> Schedule:
        return IntervalSchedule(self.seconds)


class OnceIn(BaseModel):
    model_config = _STRICT
    kind: Literal["once"]
    at: AwareDatetime = Field(description="the instant to run, ISO-8601 with an offset (Z for UTC)")

    def to_domain(self) -> Schedule:
        return OnceSchedule(self.at)


ScheduleIn = Annotated[CronIn | IntervalIn | OnceIn, Field(discriminator="kind")]
Payload = Annotated[dict[str, Any], Field(description="a JSON object handed to the handler")]


class JobCreate(BaseModel):
    model_config = _STRICT
    name: Name
    handler: str = Field(min_length=1, max_length=200)
    schedule: ScheduleIn
    payload: Payload = Field(default_factory=dict)
    timeout: StrictFloat = Field(60.0, gt=0, description="seconds; the deadline of the whole run, retries included")
    max_retries: StrictInt = Field(0, ge=0, le=25)
    enabled: bool = True


class JobPatch(BaseModel):
    model_config = _STRICT
    name: Name | None = None
    handler: str | None = Field(None, min_length=1, max_length=200)
    schedule: ScheduleIn | None = None
    payload: Payload | None = None
    timeout: StrictFloat | None = Field(None, gt=0)
    max_retries: StrictInt | None = Field(None, ge=0, le=25)
    enabled: bool | None = None

    def changes(self) -> dict[str, Any]:
        fields = self.model_dump(exclude_unset=True)
        for key, value in fields.items():
            if value is None:
                raise InvalidJob(f"{key} cannot be null", field=key)
        if self.schedule is not None:
            fields["schedule"] = self.schedule.to_domain()
        return fields


class JobOut(BaseModel):
    id: str
    name: str
    handler: str
    schedule: dict[str, Any]
    payload: dict[str, Any]
    timeout: float
    max_retries: int
    enabled: bool
    next_run_at: datetime | None
    trigger_pending_at: datetime | None
    running: bool = Field(description="claimed by a dispatcher right now")
    version: int
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def of(job: Job) -> JobOut:
        from ticklock.domain.schedules import schedule_to_dict

        return JobOut(
            id=job.id,
            name=job.name,
            handler=job.handler,
            schedule=schedule_to_dict(job.schedule),
            payload=dict(job.payload),
            timeout=job.timeout,
            max_retries=job.max_retries,
            enabled=job.enabled,
            next_run_at=job.next_run_at,
            trigger_pending_at=job.trigger_at,
            running=job.lease is not None and job.lease.until > datetime.now(UTC),
            version=job.version,
            created_at=job.created_at,
            updated_at=job.updated_at,
        )


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
    lag: float = Field(description="seconds from the scheduled time to the start")
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
            attempts=e.attempts,
            resumes=e.resumes,
            error=e.error,
            owner=e.owner,
        )


class JobPage(BaseModel):
    items: list[JobOut]
    next: str | None = Field(description="pass as ?after= for the next page; null on the last")


class ExecutionPage(BaseModel):
    items: list[ExecutionOut]
    next: str | None = Field(description="pass as ?before= for the next page; null on the last")


class HandlerOut(BaseModel):
    name: str
    description: str
    is_async: bool


def _checked(build: Callable[[], str]) -> str:
    try:
        return build()
    except InvalidJob as exc:
        raise ValueError(exc.message) from None
