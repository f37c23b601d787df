"""A job: created (one, or a batch), changed, and as the API shows it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, field_validator

from ticklock.api.schemas.alerts import AlertOut, AlertsIn
from ticklock.api.schemas.fields import STRICT, Name, Payload, WholeNumber
from ticklock.api.schemas.holds import HoldOut
from ticklock.api.schemas.schedules import ScheduleIn
from ticklock.domain.executions import RunSummary
from ticklock.domain.job_rules import MIN_TIMEOUT
from ticklock.domain.job_settings import BUFFER_ALL_CAP, MAX_CATCHUP_WINDOW, MAX_JITTER, Overlap, Policy
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import schedule_to_dict
from ticklock.domain.service import MAX_BATCH, JobSpec
from ticklock.domain.states import JobCondition, JobState, job_conditions, job_state
from ticklock.domain.words import describe


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


class JobCreate(BaseModel):
    model_config = STRICT
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
    model_config = STRICT
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
