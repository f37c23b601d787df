"""Schedules as the API takes them, and the fires they make: a schedule not saved previewed
(POST /schedules/preview), a job's fires to come (GET /jobs/{id}/upcoming)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ticklock.api.schemas.fields import STRICT, InstantText, WholeNumber, parse_instant
from ticklock.domain.schedules import (
    MAX_PREVIEW,
    CronSchedule,
    Fire,
    IntervalSchedule,
    OnceSchedule,
    Schedule,
    check_new_timezone,
)
from ticklock.domain.upcoming import ComingFire
from ticklock.errors import InvalidJob


class CronIn(BaseModel):
    model_config = STRICT
    kind: Literal["cron"]
    expr: str = Field(
        max_length=200,
        description="six fields, seconds first, or a descriptor like @hourly",
        # the shape, for the document; the validator below checks the fields and says which one is wrong
        json_schema_extra={"pattern": r"^\s*(@[A-Za-z]+|\S+(\s+\S+){5})\s*$"},
    )
    timezone: str = Field("UTC", max_length=64, description="IANA timezone the fields are read in")
    gap: Literal["jump", "skip"] = Field(
        "jump", description="a fire whose wall time a spring-forward skips: run when the clocks jump, or skip it"
    )
    overlap: Literal["auto", "first", "both"] = Field(
        "auto",
        description="a wall time a fall-back repeats: fire on its first pass, on both (by real time), or auto "
        "(both when the hour field selects every hour, else first)",
    )

    @field_validator("expr")
    @classmethod
    def _expr(cls, value: str) -> str:
        return _checked(lambda: CronSchedule(value).expr)

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str) -> str:
        return _checked(lambda: check_new_timezone(value))

    def to_domain(self) -> Schedule:
        return CronSchedule(self.expr, self.timezone, self.gap, self.overlap)


class IntervalIn(BaseModel):
    model_config = STRICT
    kind: Literal["interval"]
    seconds: WholeNumber = Field(ge=1, le=366 * 86400, description="whole seconds between runs")

    def to_domain(self) -> Schedule:
        return IntervalSchedule(self.seconds)


class OnceIn(BaseModel):
    model_config = STRICT
    kind: Literal["once"]
    at: str = Field(
        max_length=64,
        description="the instant to run, RFC 3339 with an offset (Z for UTC)",
        json_schema_extra={"format": "date-time"},
    )

    @field_validator("at")
    @classmethod
    def _at(cls, value: str) -> str:
        parse_instant(value)
        return value

    def to_domain(self) -> Schedule:
        return OnceSchedule(parse_instant(self.at))


def _checked(build: Callable[[], str]) -> str:
    try:
        return build()
    except InvalidJob as exc:
        raise ValueError(exc.message) from None


ScheduleIn = Annotated[CronIn | IntervalIn | OnceIn, Field(discriminator="kind")]


After = Annotated[
    InstantText | None,
    Field(
        max_length=64,
        description="list the fires after this instant (RFC 3339 with an offset; in a query, + as %2B); "
        "now if left out",
        json_schema_extra={"format": "date-time"},
    ),
]


class PreviewRequest(BaseModel):
    model_config = STRICT
    schedule: ScheduleIn
    count: WholeNumber = Field(10, ge=1, le=MAX_PREVIEW, description="how many fires to list")
    after: After = None


class ChangeOut(BaseModel):
    model_config = ConfigDict(serialize_by_alias=True)
    kind: Literal["gap", "overlap"]
    pass_: Literal["first", "second"] | None = Field(
        alias="pass", description="overlap: which pass of the repeated wall time this fire is"
    )
    scheduled: str | None = Field(
        description="gap: the wall time the fire was due at, which did not exist; it ran when the clocks jumped"
    )


class FireOut(BaseModel):
    at: datetime = Field(description="the fire's instant, UTC")
    local: str = Field(description="the same instant on the schedule's wall clock, with its offset")
    change: ChangeOut | None = Field(description="set when a clock change moved or doubled this fire")

    @staticmethod
    def of(fire: Fire) -> FireOut:
        change = None
        if fire.change == "gap":
            scheduled = fire.scheduled.isoformat() if fire.scheduled is not None else None
            change = ChangeOut.model_validate({"kind": "gap", "pass": None, "scheduled": scheduled})
        elif fire.change is not None:
            change = ChangeOut.model_validate({"kind": "overlap", "pass": fire.change.split("-")[1], "scheduled": None})
        return FireOut(at=fire.at, local=fire.local.isoformat(), change=change)


class PreviewOut(BaseModel):
    timezone: str
    description: str = Field(description="the schedule in words")
    fires: list[FireOut] = Field(description="the next fires, earliest first; fewer than asked only past year 9999")


class ComingFireOut(FireOut):
    trigger: Literal["schedule", "manual", "backfill"] = Field(
        description="schedule: a slot of its schedule; manual: a pending trigger; backfill: a backfill's next slot"
    )
    starts_at: datetime = Field(description="when it starts: its slot plus its jitter")
    status: Literal["due", "running", "missed", "paused", "held", "skipped"] = Field(
        description="due: it runs at its time; running: its run has started; missed: it is later than the "
        "job's catch-up window (it will be recorded, not run); paused: the job is paused (it runs only if "
        "resumed by then); held: a pause until an instant keeps it back; skipped: a skip of the next fires "
        "keeps it back"
    )

    @staticmethod
    def of_coming(coming: ComingFire) -> ComingFireOut:
        base = FireOut.of(coming.slot)
        return ComingFireOut(
            at=base.at,
            local=base.local,
            change=base.change,
            trigger=coming.trigger.value,
            starts_at=coming.starts_at,
            status=coming.status.value,
        )


class UpcomingOut(BaseModel):
    timezone: str
    description: str = Field(description="the schedule in words")
    fires: list[ComingFireOut] = Field(
        description="the fires to come as the engine will treat them, earliest start first: from the fire the "
        "job waits for, with what a pause, a hold or a skip keeps back marked"
    )


class UpcomingQuery(BaseModel):
    model_config = STRICT
    count: int = Field(10, ge=1, le=MAX_PREVIEW, description="how many fires to list")
    after: After = None
