"""A job and an execution as SQLite rows and back: the shared records (``adapters/records.py``) in column
order, with times as integer microseconds since the epoch (UTC) and the schedule and payload as JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from operator import itemgetter
from typing import Any

from ticklock.adapters.records import (
    DEFINITION_FIELDS,
    EXECUTION_FIELDS,
    Times,
    execution_from_record,
    job_from_record,
    job_record,
    open_alerts_from,
    open_alerts_text,
)
from ticklock.adapters.store.sqlite.schema import JOB_COLUMNS
from ticklock.domain.executions import Execution, ExecutionStatus, RunSummary
from ticklock.domain.fires import Lease, Trigger
from ticklock.domain.job_settings import AlertRules, Policy
from ticklock.domain.jobs import Backfill, Hold, Job
from ticklock.domain.schedules import Schedule, schedule_from_dict, schedule_to_dict


def us(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_now() -> datetime:
    return datetime.now(UTC)


MICROS = Times(us, from_us)
JOB_COLUMN_NAMES = tuple(c.strip() for c in JOB_COLUMNS.split(","))
# the order ``job_from_row`` unpacks a row in
assert JOB_COLUMN_NAMES == (
    "id", "name", "handler", "schedule", "payload", "timeout", "max_retries", "enabled", "next_run_at", "trigger_at",
    "due_at", "lease_token", "lease_owner", "lease_until", "version", "created_at", "updated_at", "disabled_reason",
    "policy", "hold", "alerts", "open_alerts", "backfill", "last_status", "last_at", "runs", "runs_ok", "hold_until",
), JOB_COLUMN_NAMES  # fmt: skip
_in_column_order = itemgetter(*JOB_COLUMN_NAMES)
DEFINITION_COLUMNS = (*DEFINITION_FIELDS, "due_at")  # what a change to a job's definition rewrites


def job_values(job: Job, now: datetime) -> dict[str, Any]:
    """The job's columns by name: the shared record, its schedule, payload, policy, hold, alert rules and
    backfill as JSON text, and ``due_at``."""
    values = job_record(
        job, MICROS, schedule=schedule_text, payload=payload_text, policy=policy_text, nested=json.dumps
    )
    values["enabled"] = int(job.enabled)
    values["due_at"] = us(job.due_at(now))
    return values


def job_row(job: Job, now: datetime) -> tuple[Any, ...]:
    """The job's columns in ``JOB_COLUMNS``' order: what ``job_values`` holds (``job_record_row`` below, kept
    as its check in the tests), built in order rather than through the record's dict of 27 keys, on the
    path of every batch create."""
    lease, last = job.lease, job.last_run
    return (
        job.id, job.name, job.handler, schedule_text(job.schedule), payload_text(job.payload), job.timeout,
        job.max_retries, int(job.enabled), us(job.next_run_at), us(job.trigger_at), us(job.due_at(now)),
        lease.token if lease else None, lease.owner if lease else None, us(lease.until) if lease else None,
        job.version, us(job.created_at), us(job.updated_at), job.disabled_reason, policy_text(job.policy),
        None if job.hold is None else json.dumps(job.hold.to_dict()),
        None if job.alerts is None else json.dumps(job.alerts.to_dict()),
        open_alerts_text(job.open_alerts),
        None if job.backfill is None else json.dumps(job.backfill.to_dict()),
        None if last is None else last.status.value, None if last is None else us(last.at),
        0 if last is None else last.runs, 0 if last is None else last.ok,
        None if job.hold is None else us(job.hold.resumes_at),
    )  # fmt: skip


def job_record_row(job: Job, now: datetime) -> tuple[Any, ...]:
    """The same row as ``job_row``, through the shared record every store writes."""
    return _in_column_order(job_values(job, now))  # type: ignore[no-any-return]


@lru_cache(maxsize=4096)
def schedule_text(schedule: Schedule) -> str:
    # written as often as read (every create and change): each frozen schedule's text is made once
    return json.dumps(schedule_to_dict(schedule))


def payload_text(payload: Mapping[str, Any]) -> str:
    return json.dumps(dict(payload))  # any Mapping (a job's payload is typed as one), as a JSON object


@lru_cache(maxsize=256)
def policy_text(policy: Policy) -> str:
    return json.dumps(policy.to_record())


@lru_cache(maxsize=4096)
def schedule_from_text(text: str) -> Schedule:
    # schedules are frozen values, and most jobs share a handful of them: parse each text once
    return schedule_from_dict(json.loads(text))


def job_from_row(row: tuple[Any, ...]) -> Job:
    """The job a row holds (its columns in ``JOB_COLUMNS``' order). What ``job_from_record`` makes of the
    row's record (``job_from_record_row`` below, kept as its check in the tests), read by position: every
    claim decodes each job it takes, and the record's dict and keyword call were half of that."""
    (
        job_id, name, handler, schedule, payload, timeout, max_retries, enabled, next_run_at, trigger_at, _due_at,
        lease_token, lease_owner, lease_until, version, created_at, updated_at, disabled_reason, policy, hold,
        alerts, open_alerts, backfill, last_status, last_at, runs, runs_ok, _hold_until,
    ) = row  # fmt: skip
    return Job(
        job_id,
        name,
        handler,
        schedule_from_text(schedule),
        {} if payload == "{}" else json.loads(payload),
        float(timeout),
        int(max_retries),
        bool(enabled),
        None if next_run_at is None else from_us(next_run_at),
        from_us(created_at),
        from_us(updated_at),
        int(version),
        None if trigger_at is None else from_us(trigger_at),
        Lease(lease_token, lease_owner, from_us(lease_until)) if lease_token else None,
        disabled_reason,
        policy_from_text(policy),
        hold_from_text(hold),
        alerts_from_text(alerts),
        open_alerts_from(open_alerts),
        backfill_from_text(backfill),
        None if last_status is None or last_at is None else _run(last_status, last_at, runs, runs_ok),
    )


def _run(status: str, at: int, runs: int | None, ok: int | None) -> RunSummary:
    return RunSummary(ExecutionStatus(status), from_us(at), int(runs or 0), int(ok or 0))


def job_from_record_row(row: tuple[Any, ...]) -> Job:
    """The same job as ``job_from_row``, through the shared record every store reads."""
    record = dict(zip(JOB_COLUMN_NAMES, row, strict=True))
    return job_from_record(
        record,
        MICROS,
        schedule=schedule_from_text,
        payload=json.loads,
        policy=policy_from_text,
        hold=hold_from_text,
        alerts=alerts_from_text,
        backfill=backfill_from_text,
    )


def alerts_from_text(text: str | None) -> AlertRules | None:
    return AlertRules.from_dict(json.loads(text)) if text else None


def backfill_from_text(text: str | None) -> Backfill | None:
    return Backfill.from_dict(json.loads(text)) if text else None


def hold_from_text(text: str | None) -> Hold | None:
    return Hold.from_dict(json.loads(text)) if text else None


@lru_cache(maxsize=256)
def policy_from_text(text: str | None) -> Policy:
    return Policy.from_dict(json.loads(text) if text else None)


def execution_row(e: Execution) -> tuple[Any, ...]:
    """The execution's columns (``EXECUTION_FIELDS``' order): what ``execution_record`` holds (the tests
    check the two against each other), built in order rather than through its dict (a fire writes one)."""
    return (
        e.id, e.job_id, e.fire_key, e.handler, e.trigger.value, us(e.scheduled_at), us(e.started_at),
        us(e.deadline_at), e.run_token, e.owner, e.status.value, e.attempts, e.resumes, us(e.finished_at),
        e.duration, e.error, e.jitter, e.detached,
    )  # fmt: skip


# the order ``execution_row`` writes in
assert EXECUTION_FIELDS == (
    "id", "job_id", "fire_key", "handler", "trigger", "scheduled_at", "started_at", "deadline_at", "run_token",
    "owner", "status", "attempts", "resumes", "finished_at", "duration", "error", "jitter", "detached",
), EXECUTION_FIELDS  # fmt: skip


def execution_from_row(row: tuple[Any, ...]) -> Execution:
    """The execution a row holds (``EXECUTION_FIELDS``' order), read by position: what
    ``execution_from_record`` makes of its record (``execution_from_record_row``, the tests' check), in half
    the time (the overview decodes its sample of the latest runs, thousands)."""
    (
        execution_id, job_id, fire_key, handler, trigger, scheduled_at, started_at, deadline_at, run_token, owner,
        status, attempts, resumes, finished_at, duration, error, jitter, detached,
    ) = row  # fmt: skip
    return Execution(
        execution_id, job_id, fire_key, handler, _TRIGGERS[trigger], from_us(scheduled_at), from_us(started_at),
        from_us(deadline_at), run_token, owner, _STATUSES[status], attempts, resumes,
        None if finished_at is None else from_us(finished_at), duration, error, jitter or 0.0, bool(detached),
    )  # fmt: skip


_TRIGGERS = {t.value: t for t in Trigger}
_STATUSES = {s.value: s for s in ExecutionStatus}


def execution_from_record_row(row: tuple[Any, ...]) -> Execution:
    """The same execution as ``execution_from_row``, through the shared record every store reads."""
    return execution_from_record(dict(zip(EXECUTION_FIELDS, row, strict=True)), MICROS)
