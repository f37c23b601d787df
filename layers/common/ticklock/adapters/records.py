"""A job, a fire, an execution and a ledger entry as flat records of plain values: the one mapping of
their fields that the SQLite row, the MongoDB document and the SQS message share. Each of those says
only how it writes a time (``Times``) and what it changes on top (a column's text, ``_id``, its own
bookkeeping fields).

A record's keys are the fields' names as every store spells them; the lease is three fields
(``lease_token``, ``lease_owner``, ``lease_until``), all None without a lease.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ticklock.domain.executions import Execution, ExecutionStatus, RunSummary
from ticklock.domain.fires import Fire, Lease, Trigger
from ticklock.domain.job_settings import AlertRules, Policy
from ticklock.domain.jobs import Backfill, Hold, Job
from ticklock.domain.ledger import LedgerEntry, Reason
from ticklock.domain.schedules import Schedule, schedule_from_dict, schedule_to_dict

JOB_FIELDS = (
    "id",
    "name",
    "handler",
    "schedule",
    "payload",
    "timeout",
    "max_retries",
    "enabled",
    "next_run_at",
    "trigger_at",
    "lease_token",
    "lease_owner",
    "lease_until",
    "version",
    "created_at",
    "updated_at",
    "disabled_reason",
    "policy",
    "hold",
    "hold_until",
    "alerts",
    "open_alerts",
    "backfill",
    "last_status",
    "last_at",
    "runs",
    "runs_ok",
)
# the summary of the job's runs (``Job.last_run``), written as runs finish
RUN_FIELDS = ("last_status", "last_at", "runs", "runs_ok")
# what a change to a job's definition writes (PATCH, pause, resume): not its id, creation, lease, the
# alerts raised (``Store.set_open_alerts`` writes those) or its runs' summary
DEFINITION_FIELDS = tuple(
    f
    for f in JOB_FIELDS
    if f not in ("id", "created_at", "lease_token", "lease_owner", "lease_until", "open_alerts", *RUN_FIELDS)
)
EXECUTION_FIELDS = (
    "id",
    "job_id",
    "fire_key",
    "handler",
    "trigger",
    "scheduled_at",
    "started_at",
    "deadline_at",
    "run_token",
    "owner",
    "status",
    "attempts",
    "resumes",
    "finished_at",
    "duration",
    "error",
    "jitter",
    "detached",
)


@dataclass(frozen=True)
class Times:
    """How a record writes a time, and reads it back: aware UTC datetimes in and out."""

    encode: Callable[[datetime], Any]
    decode: Callable[[Any], datetime]

    def out(self, moment: datetime | None) -> Any:
        return None if moment is None else self.encode(moment)

    def back(self, value: Any) -> datetime | None:
        return None if value is None else self.decode(value)


def _same(value: dict[str, Any]) -> Any:
    return value


def job_record(
    job: Job,
    times: Times,
    *,
    schedule: Callable[[Schedule], Any] = schedule_to_dict,
    payload: Callable[[Mapping[str, Any]], Any] = dict,
    policy: Callable[[Policy], Any] = Policy.to_record,
    nested: Callable[[dict[str, Any]], Any] = _same,
) -> dict[str, Any]:
    """Every field of ``job`` (``JOB_FIELDS``); ``schedule``, ``payload`` and ``policy`` write those fields
    as the record keeps them, and ``nested`` the dicts of its hold, alert rules and backfill (by default
    dicts all: a store that keeps them as text says so here, rather than undo them after)."""
    lease = job.lease
    return {
        "id": job.id,
        "name": job.name,
        "handler": job.handler,
        "schedule": schedule(job.schedule),
        "payload": payload(job.payload),
        "timeout": job.timeout,
        "max_retries": job.max_retries,
        "enabled": job.enabled,
        "next_run_at": times.out(job.next_run_at),
        "trigger_at": times.out(job.trigger_at),
        "lease_token": lease.token if lease else None,
        "lease_owner": lease.owner if lease else None,
        "lease_until": times.encode(lease.until) if lease else None,
        "version": job.version,
        "created_at": times.encode(job.created_at),
        "updated_at": times.encode(job.updated_at),
        "disabled_reason": job.disabled_reason,
        "policy": policy(job.policy),
        "hold": None if job.hold is None else nested(job.hold.to_dict()),
        # the timed hold's end, as a time of its own: the stores filter and count held jobs by it
        "hold_until": times.out(job.hold.resumes_at) if job.hold is not None else None,
        "alerts": None if job.alerts is None else nested(job.alerts.to_dict()),
        "open_alerts": open_alerts_text(job.open_alerts),
        "backfill": None if job.backfill is None else nested(job.backfill.to_dict()),
        **run_record(job.last_run, times),
    }


def run_record(summary: RunSummary | None, times: Times) -> dict[str, Any]:
    """The run summary's fields (``RUN_FIELDS``); a job that never ran has no status and no counts."""
    if summary is None:
        return {"last_status": None, "last_at": None, "runs": 0, "runs_ok": 0}
    return {
        "last_status": summary.status.value,
        "last_at": times.encode(summary.at),
        "runs": summary.runs,
        "runs_ok": summary.ok,
    }


def run_from_record(record: Mapping[str, Any], times: Times) -> RunSummary | None:
    status, at = record.get("last_status"), record.get("last_at")
    if status is None or at is None:
        return None
    runs, ok = int(record.get("runs") or 0), int(record.get("runs_ok") or 0)
    return RunSummary(ExecutionStatus(status), times.decode(at), runs, ok)


def open_alerts_text(alerts: Mapping[str, Any]) -> str | None:
    """The alerts raised, as every store keeps them: one canonical JSON text (so that a compare-and-set
    compares text), or None when none is open."""
    return json.dumps(alerts, sort_keys=True, separators=(",", ":")) if alerts else None


def open_alerts_from(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text else {}


def job_from_record(
    record: Mapping[str, Any],
    times: Times,
    *,
    schedule: Callable[[Any], Schedule] = schedule_from_dict,
    payload: Callable[[Any], Mapping[str, Any]] = dict,
    policy: Callable[[Any], Policy] = Policy.from_dict,
    hold: Callable[[Any], Hold | None] = Hold.from_dict,
    alerts: Callable[[Any], AlertRules | None] = AlertRules.from_dict,
    backfill: Callable[[Any], Backfill | None] = Backfill.from_dict,
) -> Job:
    """The job a record holds; ``schedule``, ``payload``, ``policy`` and ``hold`` read those fields as the
    record keeps them (a record written before policies or holds has none: the defaults)."""
    token = record.get("lease_token")  # .get: the fields a document written before them lacks
    return Job(
        id=record["id"],
        name=record["name"],
        handler=record["handler"],
        schedule=schedule(record["schedule"]),
        payload=payload(record["payload"]),
        timeout=float(record["timeout"]),
        max_retries=int(record["max_retries"]),
        enabled=bool(record["enabled"]),
        next_run_at=times.back(record.get("next_run_at")),
        trigger_at=times.back(record.get("trigger_at")),
        lease=Lease(token, record["lease_owner"], times.decode(record["lease_until"])) if token else None,
        version=int(record["version"]),
        created_at=times.decode(record["created_at"]),
        updated_at=times.decode(record["updated_at"]),
        disabled_reason=record.get("disabled_reason"),
        policy=policy(record.get("policy")),
        hold=hold(record.get("hold")),
        alerts=alerts(record.get("alerts")),
        open_alerts=open_alerts_from(record.get("open_alerts")),
        backfill=backfill(record.get("backfill")),
        last_run=run_from_record(record, times),
    )


def fire_record(fire: Fire, times: Times) -> dict[str, Any]:
    """A fire: the job as claimed, when it is for, why, and the claim's token."""
    return {
        "scheduled_at": times.encode(fire.scheduled_at),
        "trigger": fire.trigger.value,
        "lease_token": fire.lease_token,
        "job": job_record(fire.job, times),
    }


def fire_from_record(record: Mapping[str, Any], times: Times) -> Fire:
    return Fire(
        job_from_record(record["job"], times),
        times.decode(record["scheduled_at"]),
        Trigger(record["trigger"]),
        record["lease_token"],
    )


def execution_record(e: Execution, times: Times) -> dict[str, Any]:
    """Every field of an execution (``EXECUTION_FIELDS``)."""
    return {
        "id": e.id,
        "job_id": e.job_id,
        "fire_key": e.fire_key,
        "handler": e.handler,
        "trigger": e.trigger.value,
        "scheduled_at": times.encode(e.scheduled_at),
        "started_at": times.encode(e.started_at),
        "deadline_at": times.encode(e.deadline_at),
        "run_token": e.run_token,
        "owner": e.owner,
        "status": e.status.value,
        "attempts": e.attempts,
        "resumes": e.resumes,
        "finished_at": times.out(e.finished_at),
        "duration": e.duration,
        "error": e.error,
        "jitter": e.jitter,
        "detached": e.detached,
    }


def execution_from_record(record: Mapping[str, Any], times: Times) -> Execution:
    return Execution(
        id=record["id"],
        job_id=record["job_id"],
        fire_key=record["fire_key"],
        handler=record["handler"],
        trigger=Trigger(record["trigger"]),
        scheduled_at=times.decode(record["scheduled_at"]),
        started_at=times.decode(record["started_at"]),
        deadline_at=times.decode(record["deadline_at"]),
        run_token=record["run_token"],
        owner=record["owner"],
        status=ExecutionStatus(record["status"]),
        attempts=record["attempts"],
        resumes=record["resumes"],
        finished_at=times.back(record.get("finished_at")),
        duration=record.get("duration"),
        error=record.get("error"),
        jitter=record.get("jitter") or 0.0,  # rows from before jitter have none
        detached=bool(record.get("detached")),
    )


LEDGER_FIELDS = (
    "id",
    "job_id",
    "outcome",
    "reason",
    "first_at",
    "last_at",
    "count",
    "capped",
    "trigger",
    "recorded_at",
)


def ledger_record(entry: LedgerEntry, times: Times) -> dict[str, Any]:
    """A fire that did not run (``LEDGER_FIELDS``)."""
    return {
        "id": entry.id,
        "job_id": entry.job_id,
        "outcome": entry.outcome.value,
        "reason": entry.reason.value,
        "first_at": times.encode(entry.first_at),
        "last_at": times.encode(entry.last_at),
        "count": entry.count,
        "capped": entry.capped,
        "trigger": entry.trigger.value,
        "recorded_at": times.encode(entry.recorded_at),
    }


def ledger_from_record(record: Mapping[str, Any], times: Times) -> LedgerEntry:
    return LedgerEntry(
        job_id=record["job_id"],
        reason=Reason(record["reason"]),
        first_at=times.decode(record["first_at"]),
        last_at=times.decode(record["last_at"]),
        count=int(record["count"]),
        recorded_at=times.decode(record["recorded_at"]),
        trigger=Trigger(record["trigger"]),
        capped=bool(record["capped"]),
    )


ISO = Times(datetime.isoformat, datetime.fromisoformat)
"""RFC 3339 text (the SQS message)."""
