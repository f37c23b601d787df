"""Pydantic models at the API edge; converted to the core's dataclasses and back."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
)

from ticklock.domain.jobs import (
    BUFFER_ALL_CAP,
    MAX_ALERT_SECONDS,
    MAX_CATCHUP_WINDOW,
    MAX_FAILURES_IN_A_ROW,
    MAX_JITTER,
    MAX_NOTE,
    MAX_SKIP,
    AlertRules,
    Execution,
    Job,
    Overlap,
    Policy,
    RunSummary,
)
from ticklock.domain.ledger import LedgerEntry, Reason, SlotFate
from ticklock.domain.schedules import (
    MAX_PREVIEW,
    CronSchedule,
    Fire,
    IntervalSchedule,
    OnceSchedule,
    Schedule,
    check_new_timezone,
    schedule_to_dict,
)
from ticklock.domain.service import MAX_BATCH, MIN_TIMEOUT, JobSpec
from ticklock.domain.states import JobCondition, JobState, job_conditions, job_state
from ticklock.domain.upcoming import ComingFire
from ticklock.domain.words import describe
from ticklock.errors import InvalidJob
from ticklock.ports import JobQuery

_STRICT = ConfigDict(extra="forbid")


def _whole(value: Any) -> Any:
    # JSON Schema counts 5.0 as an integer; true and "5" are not numbers at all
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


WholeNumber = Annotated[StrictInt, BeforeValidator(_whole)]
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]*$"


def _name_text(value: str) -> str:
    # said in words: pydantic's own message quotes the regular expression
    if not re.match(NAME_PATTERN, value):
        raise ValueError("must start with a letter or a digit, then only letters, digits and _ . : @ / -")
    return value


Name = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="unique; letters, digits and _ . : @ / -",
        json_schema_extra={"pattern": NAME_PATTERN},
    ),
    AfterValidator(_name_text),
]


class CronIn(BaseModel):
    model_config = _STRICT
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
    model_config = _STRICT
    kind: Literal["interval"]
    seconds: WholeNumber = Field(ge=1, le=366 * 86400, description="whole seconds between runs")

    def to_domain(self) -> Schedule:
        return IntervalSchedule(self.seconds)


class OnceIn(BaseModel):
    model_config = _STRICT
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


def parse_instant(text: str) -> datetime:
    """An RFC 3339 date-time with an offset; a number, a date alone or a local time is refused."""
    if not _RFC3339.fullmatch(text):
        raise ValueError(f"{text[:64]!r} is not an RFC 3339 date-time with an offset, such as 2026-12-24T18:00:00Z")
    try:
        return datetime.fromisoformat(text.upper()).astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{text[:64]!r} is out of range once in UTC") from None
    except ValueError as exc:
        raise ValueError(f"{text[:64]!r} is not a valid date-time: {exc}") from None


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)


ScheduleIn = Annotated[CronIn | IntervalIn | OnceIn, Field(discriminator="kind")]
Payload = Annotated[dict[str, Any], Field(description="a JSON object handed to the handler")]


class PolicyIn(BaseModel):
    """How the job's fires are decided beyond its schedule; every field may be left out (its default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # its default is one instance, shared
    catchup_window: StrictFloat | None = Field(
        None,
        ge=1.0,
        le=MAX_CATCHUP_WINDOW,
        description="seconds a scheduled fire may be late and still run (once, at its own time); later, it is "
        "missed (catchup_window_passed) and the job moves on; null: any lateness is caught up",
    )
    overlap: Overlap = Field(
        Overlap.SKIP,
        description="a fire that comes due while the job's run goes on: skip it (overlap_skip); buffer_one (the "
        "latest runs right after); buffer_all (each in turn, at most " + str(BUFFER_ALL_CAP) + " waiting); "
        "cancel_other (the run is cancelled and the new fire starts); allow_all (runs of the job overlap)",
    )
    max_jitter: StrictFloat = Field(
        0.0,
        ge=0.0,
        le=MAX_JITTER,
        description="each scheduled fire starts up to this many seconds after its slot, by an offset fixed per "
        "fire (the same on every replica and retry); 0: on the slot",
    )

    def to_domain(self) -> Policy:
        if self is _NO_POLICY:
            return DEFAULT_POLICY  # a job given no policy (most of a batch's): one shared, frozen default
        return Policy(catchup_window=self.catchup_window, overlap=self.overlap, max_jitter=self.max_jitter)


_NO_POLICY = PolicyIn.model_construct()  # every field its default (nothing to validate); frozen
DEFAULT_POLICY = Policy()


class AlertsIn(BaseModel):
    """When the job's alerts are raised, and where they go beside the event bus; a rule left out is not
    checked, and ``{}`` is no alerts."""

    model_config = _STRICT
    late_after: StrictFloat | None = Field(
        None, ge=1.0, le=MAX_ALERT_SECONDS, description="seconds after a fire was due with no start: raised"
    )
    no_success_for: StrictFloat | None = Field(
        None, ge=1.0, le=MAX_ALERT_SECONDS, description="seconds with no successful run: raised"
    )
    failures_in_a_row: WholeNumber | None = Field(
        None, ge=1, le=MAX_FAILURES_IN_A_ROW, description="this many runs failed in a row: raised"
    )
    webhook: StrictStr | None = Field(
        None, max_length=2000, pattern=r"^https?://\S+$", description="POST each alert here (default: the deployment's)"
    )
    email: StrictStr | None = Field(
        None,
        max_length=320,
        pattern=r"^[^@\s]+@[^@\s]+$",
        description="mail each alert here (default: the deployment's)",
    )

    def to_domain(self) -> AlertRules | None:
        return AlertRules.from_dict(self.model_dump(exclude_none=True))


class AlertOut(BaseModel):
    job_id: str
    job_name: str
    condition: Literal["late", "no_success", "failures_in_a_row"]
    raised_at: datetime
    detail: str

    @staticmethod
    def all_of(job: Job) -> list[AlertOut]:
        return [
            AlertOut.model_validate(
                {
                    "job_id": job.id,
                    "job_name": job.name,
                    "condition": c,
                    "raised_at": a["raised_at"],
                    "detail": a["detail"],
                }
            )
            for c, a in sorted(job.open_alerts.items())
        ]


class AlertPage(BaseModel):
    items: list[AlertOut] = Field(description="every alert raised and not cleared, by job")


class JobCreate(BaseModel):
    model_config = _STRICT
    name: Name
    handler: str = Field(min_length=1, max_length=200)
    schedule: ScheduleIn
    payload: Payload = Field(default_factory=dict)
    timeout: StrictFloat = Field(
        60.0, ge=MIN_TIMEOUT, description="seconds; the deadline of the whole run, retries included"
    )
    max_retries: WholeNumber = Field(0, ge=0, le=25)
    enabled: StrictBool = True
    policy: PolicyIn = Field(default_factory=lambda: _NO_POLICY)
    alerts: AlertsIn | None = None

    def to_spec(self) -> JobSpec:
        return JobSpec(
            name=self.name,
            handler=self.handler,
            schedule=self.schedule.to_domain(),
            payload=self.payload,
            timeout=self.timeout,
            max_retries=self.max_retries,
            enabled=self.enabled,
            policy=self.policy.to_domain(),
            alerts=None if self.alerts is None else self.alerts.to_domain(),
        )


class JobBatch(BaseModel):
    model_config = _STRICT
    jobs: list[JobCreate] = Field(
        min_length=1, max_length=MAX_BATCH, description=f"the jobs, 1 to {MAX_BATCH}, each as POST /jobs takes one"
    )


def _optional_fields(schema: dict[str, Any]) -> None:
    # Every field may be left out, none may be null: the document says so, rather than "default: null".
    for name, prop in schema.get("properties", {}).items():
        prop.pop("default", None)
        branches = [b for b in prop.get("anyOf", []) if b.get("type") != "null"]
        if len(branches) == 1:
            prop.pop("anyOf")
            prop.update(branches[0])
        schema["properties"][name] = prop


class JobPatch(BaseModel):
    """The fields to change; any left out keep their value. ``{}`` changes nothing."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_optional_fields)
    name: Name | None = None
    handler: str | None = Field(None, min_length=1, max_length=200)
    schedule: ScheduleIn | None = None
    payload: Payload | None = None
    timeout: StrictFloat | None = Field(None, ge=MIN_TIMEOUT)
    max_retries: WholeNumber | None = Field(None, ge=0, le=25)
    enabled: StrictBool | None = None
    policy: PolicyIn | None = Field(None, description="the whole policy: a field left out is reset")
    alerts: AlertsIn | None = Field(None, description="the whole set of alert rules: a rule left out is dropped")

    @field_validator("*", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        # Only given fields are validated: left out means "keep", null is refused like any other wrong type.
        if value is None:
            raise ValueError("must not be null; leave the field out to keep its value")
        return value

    def changes(self) -> dict[str, Any]:
        fields = {key: getattr(self, key) for key in self.model_fields_set}
        if self.schedule is not None:
            fields["schedule"] = self.schedule.to_domain()
        if self.policy is not None:
            fields["policy"] = self.policy.to_domain()
        if self.alerts is not None:
            fields["alerts"] = self.alerts.to_domain()
        return fields


class HoldOut(BaseModel):
    kind: Literal["pause", "skip"]
    since: datetime = Field(description="when it was asked for")
    note: str | None
    until: datetime | None = Field(description="a pause's end, as asked; null: until resumed")
    skipped_from: datetime | None = Field(description="the first fire it holds back")
    resumes_at: datetime | None = Field(description="the job's first fire after it; null: until resumed")
    count: int | None = Field(description="how many fires a skip holds back")


class RunOut(BaseModel):
    status: str = Field(description="the last run's status")
    at: datetime = Field(description="when the last run ended")
    runs: int = Field(description="runs ended since the job was created")
    ok: int = Field(description="of those, the ones that succeeded")
    success_rate: float = Field(description="ok / runs")

    @staticmethod
    def of(summary: RunSummary | None) -> dict[str, Any] | None:
        if summary is None:
            return None
        return {
            "status": summary.status.value,
            "at": summary.at,
            "runs": summary.runs,
            "ok": summary.ok,
            "success_rate": round(summary.success_rate, 4),
        }


class JobOut(BaseModel):
    id: str
    name: str
    handler: str
    schedule: dict[str, Any]
    schedule_text: str = Field(description="the schedule in words")
    payload: dict[str, Any]
    timeout: float
    max_retries: int
    enabled: bool
    state: JobState = Field(
        description="enabled; paused (by a user, until resumed); held (until hold.resumes_at: paused until an "
        "instant, or skipping its next fires); disabled (by ticklock, see disabled_reason); done (a one-shot "
        "job that has fired)"
    )
    conditions: list[JobCondition] = Field(
        description="what may be wrong whatever the state: failing (the last run failed, timed out or was "
        "lost), alerting (an alert is raised)"
    )
    next_run_at: datetime | None
    trigger_pending_at: datetime | None
    running: bool = Field(description="claimed by a dispatcher right now")
    disabled_reason: str | None = Field(
        description="why ticklock disabled the job (its schedule found no next fire); cleared when it is resumed"
    )
    policy: dict[str, Any]
    hold: HoldOut | None = Field(description="a user's pause or skip in force: what it holds back, until when")
    alerts: dict[str, Any] | None = Field(description="the job's alert rules; null: none")
    backfill: dict[str, Any] | None = Field(description="a backfill still to run: next_at, until, overlap")
    open_alerts: list[AlertOut] = Field(description="its alerts raised and not cleared")
    last_run: RunOut | None = Field(
        description="how its runs went: the last one, and how many succeeded; null: none yet"
    )
    version: int
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def of(job: Job, now: datetime) -> JobOut:
        return JobOut.model_validate(JobOut.fields(job, now))

    @staticmethod
    def fields(job: Job, now: datetime) -> dict[str, Any]:
        """The job as this model's fields at ``now``, to validate many at once (a page) in one call."""
        state = job_state(job, now)
        # the hold shown is the one its state names: a paused job's pause, a held job's hold, no other
        hold = job.hold if state in (JobState.PAUSED, JobState.HELD) else None
        return {
            "id": job.id,
            "name": job.name,
            "handler": job.handler,
            "schedule": schedule_to_dict(job.schedule),
            "schedule_text": describe(job.schedule),
            "payload": job.payload,
            "timeout": job.timeout,
            "max_retries": job.max_retries,
            "enabled": job.enabled,
            "state": state,
            "conditions": job_conditions(job),
            "next_run_at": job.next_run_at,
            "trigger_pending_at": job.trigger_at,
            "running": job.lease is not None and job.lease.until > now,
            "disabled_reason": job.disabled_reason,
            "policy": job.policy.to_dict(),
            "hold": None if hold is None else hold.to_dict(),
            "alerts": None if job.alerts is None else job.alerts.to_dict(),
            "backfill": None if job.backfill is None else job.backfill.to_dict(),
            "open_alerts": AlertOut.all_of(job),
            "last_run": RunOut.of(job.last_run),
            "version": job.version,
            "created_at": job.created_at,
            "updated_at": job.updated_at,
        }


def _instant_text(value: str) -> str:
    parse_instant(value)  # raises with the reason
    return value


After = Annotated[
    Annotated[str, AfterValidator(_instant_text)] | None,
    Field(
        max_length=64,
        description="list the fires after this instant (RFC 3339 with an offset; in a query, + as %2B); "
        "now if left out",
        json_schema_extra={"format": "date-time"},
    ),
]


class PreviewRequest(BaseModel):
    model_config = _STRICT
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


class JobPage(BaseModel):
    items: list[JobOut]
    next: str | None = Field(description="pass as ?after= for the next page; null on the last")


class JobCreatedOut(BaseModel):
    id: str
    name: str
    enabled: bool = Field(description="false: created paused, and it does not fire until resumed")
    next_run_at: datetime | None = Field(description="its schedule's first fire")


class JobBatchOut(BaseModel):
    items: list[JobCreatedOut] = Field(
        description="the jobs created, in the order given: each one's id, name, state and first fire (GET /jobs/{id} "
        "has the rest; sending each back whole took a fifth of a batch's time)"
    )


class ExecutionPage(BaseModel):
    items: list[ExecutionOut]
    next: str | None = Field(description="pass as ?before= for the next page; null on the last")


class HandlerOut(BaseModel):
    name: str
    description: str
    is_async: bool


class ErrorDetail(BaseModel):
    field: str = Field(description="the field at fault: body, payload.x, schedule.cron.expr, query.limit ...")
    message: str


class ErrorBody(BaseModel):
    """Every 4xx and 5xx answer."""

    error: str = Field(description="a stable code: validation_error, not_found, unauthorized, overloaded ...")
    message: str = Field(description="what is wrong, for a person; leads with the field when one is at fault")
    details: list[ErrorDetail]


class Health(BaseModel):
    """What anyone may learn: up or not."""

    status: Literal["ok", "unavailable"]


class CheckOut(BaseModel):
    """One plug-in health check's answer."""

    name: str = Field(description="<plug-in>.<check>")
    status: Literal["ok", "failing"]
    error: str | None = Field(description="what is wrong, when it is failing")


class HealthDetails(BaseModel):
    """With a valid token (or on a loopback-only server without one): why. ``degraded``: the store answers
    (the scheduler runs, so the status code is 200) but a plug-in's check fails."""

    status: Literal["ok", "degraded", "unavailable"]
    store: Literal["ok", "unavailable"]
    store_error: str | None = Field(description="the store's error, when it is unavailable")
    checks: list[CheckOut] = Field(description="the installed plug-ins' health checks")
    version: str


JobSort = Literal[
    "id", "name", "-name", "next_run_at", "-next_run_at", "last_at", "-last_at"
]  # fmt: skip
Outcome = Literal["none", "success", "failed", "timeout", "lost", "cancelled"]


class ListJobsQuery(BaseModel):
    model_config = _STRICT
    q: str | None = Field(
        None, min_length=1, max_length=200, description="only jobs whose name or handler contains this (any case)"
    )
    handler: str | None = Field(None, min_length=1, max_length=200, description="only jobs of this handler")
    enabled: bool | None = Field(None, description="only enabled (true) or not enabled (false) jobs")
    state: Literal["enabled", "paused", "held", "disabled", "done", "failing", "alerting"] | None = Field(
        None,
        description="a state (enabled; paused by a user; held until an instant; disabled by ticklock, see "
        "disabled_reason; done: a one-shot job that has fired) or a condition (failing: the last run failed, "
        "timed out or was lost; alerting: an alert raised)",
    )
    outcome: Outcome | None = Field(None, description="only jobs whose last run ended so (none: never ran)")
    sort: JobSort = Field(
        "id", description="the order: by id, name, next fire or last run; a leading '-' for descending"
    )
    limit: int = Field(50, ge=1, le=500)
    after: str | None = Field(None, min_length=1, max_length=400, description="the `next` of the previous page")

    def to_query(self, now: datetime) -> JobQuery:
        """The store's query at ``now``; raises ``InvalidJob`` (a 422 on ``query.after``) for a cursor it
        cannot read."""
        sort = self.sort.lstrip("-")
        return JobQuery(
            search=self.q,
            handler=self.handler,
            enabled=self.enabled,
            state=self.state,
            outcome=self.outcome,
            sort=sort,
            descending=self.sort.startswith("-"),
            after=None if self.after is None else read_cursor(self.after, self.sort),
            at=now,
        )


def job_cursor(job: Job, sort: str) -> str:
    """The ``next`` after ``job`` in a listing by ``sort`` (as given: ``-name``...): its id by id (as before
    sorting existed), else the sort, its value and the id, opaque (base64url of JSON)."""
    key = sort.lstrip("-")
    if key == "id":
        return job.id
    if key == "name":
        value: Any = job.name
    else:
        # by next fire, a job that is not enabled is in the part without a value (``JobQuery``)
        if key == "next_run_at":
            moment = job.next_run_at if job.enabled else None
        else:
            moment = job.last_run.at if job.last_run else None
        value = None if moment is None else moment.isoformat()
    return base64.urlsafe_b64encode(json.dumps([sort, value, job.id]).encode()).decode().rstrip("=")


def read_cursor(text: str, sort: str) -> tuple[Any, str]:
    """The (value, id) a ``job_cursor`` made for ``sort`` holds; ``InvalidJob`` for any other text."""
    if sort == "id":
        return text, text
    problem = "query.after: not a `next` of this listing (pass it back as it came, with the same sort)"
    try:
        made_for, value, job_id = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if made_for != sort or not isinstance(job_id, str) or not (value is None or isinstance(value, str)):
            raise ValueError(problem)
        if sort.lstrip("-") != "name" and value is not None:
            value = parse_instant(value)
    except (ValueError, TypeError, InvalidJob):
        raise InvalidJob(problem, field="query.after") from None
    return value, job_id


class UpcomingQuery(BaseModel):
    model_config = _STRICT
    count: int = Field(10, ge=1, le=MAX_PREVIEW, description="how many fires to list")
    after: After = None


Instant = Annotated[
    Annotated[str, AfterValidator(_instant_text)] | None,
    Field(max_length=64, json_schema_extra={"format": "date-time"}),
]


Note = Annotated[StrictStr | None, Field(max_length=MAX_NOTE, description="why, for whoever looks next")]


class PauseIn(BaseModel):
    """A pause: until resumed, or ``until`` an instant (its first fire at or after it); both with a note."""

    model_config = _STRICT
    note: Note = None
    until: Instant = Field(
        None, description="resume by itself at the first fire at or after this instant (RFC 3339); null: until resumed"
    )


class SkipIn(BaseModel):
    model_config = _STRICT
    count: WholeNumber = Field(ge=1, le=MAX_SKIP, description="how many of the job's next fires to skip")
    note: Note = None


MAX_WINDOW = timedelta(days=31)  # the longest window /fires accounts for in one answer
LEDGER_REASONS = tuple(r.value for r in Reason)


class BackfillIn(BaseModel):
    """A past window of the job's schedule to run again."""

    model_config = ConfigDict(extra="forbid")
    from_: Annotated[str, AfterValidator(_instant_text)] = Field(
        alias="from",
        max_length=64,
        description="the window's start (RFC 3339)",
        json_schema_extra={"format": "date-time"},
    )
    to: Annotated[str, AfterValidator(_instant_text)] = Field(
        max_length=64,
        description="the window's end (RFC 3339), not after now",
        json_schema_extra={"format": "date-time"},
    )
    overlap: Literal["buffer_all", "allow_all"] = Field(
        "buffer_all", description="its fires one after another (buffer_all), or side by side (allow_all)"
    )
    dry_run: StrictBool = Field(False, description="list the fires it would run, and run none")


class BackfillFireOut(BaseModel):
    at: datetime
    backfilled: bool = Field(description="already run by an earlier backfill: it is not run again")


class BackfillOut(BaseModel):
    job_id: str
    dry_run: bool
    count: int = Field(description="the window's fires that will run (or would, with dry_run)")
    fires: list[BackfillFireOut] = Field(description="every fire of the window, oldest first")
    pending: dict[str, Any] | None = Field(description="the job's backfill still to run: next_at, until, overlap")


class FiresQuery(BaseModel):
    model_config = _STRICT
    from_: Instant = Field(
        None, alias="from", description="the window's start (RFC 3339); `to` less an hour if left out"
    )
    to: Instant = Field(None, description="the window's end (RFC 3339); now if left out")
    limit: int = Field(100, ge=1, le=1000, description="at most this many fires, the newest")

    def window(self, now: datetime) -> tuple[datetime, datetime]:
        """(start, end); raises ``ValueError`` for an empty or too long one (a 422 on ``query.from``)."""
        end = parse_instant(self.to) if self.to else now
        start = parse_instant(self.from_) if self.from_ else end - timedelta(hours=1)
        if start > end:
            raise InvalidJob("query.from: the window's start is after its end", field="query.from")
        if end - start > MAX_WINDOW:
            raise InvalidJob(f"query.from: a window is at most {MAX_WINDOW.days} days", field="query.from")
        return start, end


class AllFiresQuery(FiresQuery):
    status: Literal["skipped", "missed", "ran", "success", "failed", "timeout", "cancelled", "lost"] | None = Field(
        None, description="only the fires that ended so: not run (skipped, missed), or ran (any final status, or one)"
    )
    reason: Literal[LEDGER_REASONS] | None = Field(None, description="only the fires with this reason")  # type: ignore[valid-type]


class RangeOut(BaseModel):
    first: datetime = Field(description="the first slot of the run of slots this one is part of")
    last: datetime
    count: int = Field(description="how many slots the run has (counted up to 10,000)")


class SlotOut(BaseModel):
    at: datetime = Field(description="the fire's time: a slot of the schedule, or a manual trigger's")
    status: Literal["ran", "skipped", "missed", "due", "upcoming", "paused", "before_created", "unaccounted"]
    reason: str | None = Field(description="why it did not run (skipped, missed), from a closed set")
    trigger: str
    execution_id: str | None = Field(description="the execution, when it ran")
    execution_status: str | None
    range: RangeOut | None = Field(description="set when the ledger holds this slot in a run of slots")

    @staticmethod
    def of(fate: SlotFate) -> SlotOut:
        e, entry = fate.execution, fate.entry
        trigger = e.trigger.value if e else entry.trigger.value if entry else "schedule"
        span = RangeOut(first=entry.first_at, last=entry.last_at, count=entry.count) if entry else None
        return SlotOut(
            at=fate.at,
            status=fate.status,  # type: ignore[arg-type]
            reason=fate.reason,
            trigger=trigger,
            execution_id=e.id if e else None,
            execution_status=e.status.value if e else None,
            range=span if entry and entry.count > 1 else None,
        )


class JobFires(BaseModel):
    job_id: str
    start: datetime = Field(alias="from")
    end: datetime = Field(alias="to")
    items: list[SlotOut] = Field(description="every expected slot of the window and every fire in it, newest first")
    model_config = ConfigDict(serialize_by_alias=True)


class LedgerEntryOut(BaseModel):
    job_id: str
    outcome: str = Field(description="ran, skipped or missed")
    reason: str = Field(description="why it did not run; for a run, its execution's status")
    first_at: datetime
    last_at: datetime
    count: int
    capped: bool
    trigger: str
    recorded_at: datetime = Field(description="when it was decided (a run: when it finished)")
    execution_id: str | None = Field(None, description="the execution, for a run")

    @staticmethod
    def ran(e: Execution) -> LedgerEntryOut:
        return LedgerEntryOut(
            job_id=e.job_id,
            outcome="ran",
            reason=e.status.value,
            first_at=e.scheduled_at,
            last_at=e.scheduled_at,
            count=1,
            capped=False,
            trigger=e.trigger.value,
            recorded_at=e.finished_at or e.started_at,
            execution_id=e.id,
        )

    @staticmethod
    def of(e: LedgerEntry) -> LedgerEntryOut:
        return LedgerEntryOut(
            job_id=e.job_id,
            outcome=e.outcome.value,
            reason=e.reason.value,
            first_at=e.first_at,
            last_at=e.last_at,
            count=e.count,
            capped=e.capped,
            trigger=e.trigger.value,
            recorded_at=e.recorded_at,
            execution_id=None,
        )


class LedgerPage(BaseModel):
    items: list[LedgerEntryOut] = Field(description="the fires of the window, latest first")


class ExecutionsQuery(BaseModel):
    model_config = _STRICT
    limit: int = Field(50, ge=1, le=500)
    before: str | None = Field(None, min_length=1, max_length=64, description="the `next` of the previous page")


def _checked(build: Callable[[], str]) -> str:
    try:
        return build()
    except InvalidJob as exc:
        raise ValueError(exc.message) from None


class ActivityOut(BaseModel):
    at: datetime = Field(description="the start of the step")
    counts: dict[str, int] = Field(
        description="the fires scheduled in this step by what became of them: each run's final status (and "
        "running), skipped and missed"
    )


class LagOut(BaseModel):
    p50: float | None = Field(description="seconds; null without runs")
    p99: float | None
    max: float | None
    sample: int = Field(description="how many of the latest runs of the window these are of")


class OverviewOut(BaseModel):
    now: datetime
    jobs: dict[str, int] = Field(
        description="how many jobs there are (total), in each state and with each condition (see a job's state)"
    )
    window: int = Field(description="the window's length, in minutes")
    step: int = Field(description="the length of each step of activity, in seconds")
    activity: list[ActivityOut] = Field(description="the window's fires by step, earliest first (every step)")
    lag: LagOut = Field(description="dispatch lag: from when a fire was due to when its run started")
    failures: list[ExecutionOut] = Field(description="the latest runs that failed, timed out or were lost")
    alerts: list[AlertOut] = Field(
        description="the alerts raised and not cleared of the first jobs by name (at most the query's alerts)"
    )


class OverviewQuery(BaseModel):
    model_config = _STRICT
    window: int = Field(60, ge=1, le=1440, description="minutes of activity, to now")
    step: int = Field(60, ge=10, le=3600, description="seconds per step of activity")
    failures: int = Field(10, ge=0, le=100, description="how many of the latest failures to list")
    alerts: int = Field(
        20, ge=0, le=100, description="how many jobs' open alerts to list, by job name (jobs.alerting counts them all)"
    )
