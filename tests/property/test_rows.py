"""The SQLite store reads a job's row by position (``job_from_row``, in every claim's hot path), and
writes a job's row and an execution's in column order (``job_row``, every create; ``execution_row``, every
fire's record): checked against the
shared records every store reads and writes (``job_from_record``, ``execution_record``), on jobs and
executions with any mix of their optional fields set, and against what was written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ticklock.adapters.records import EXECUTION_FIELDS, execution_record
from ticklock.adapters.store.sqlite.fires import fast_advance
from ticklock.adapters.store.sqlite.rows import (
    MICROS,
    execution_from_row,
    execution_row,
    job_from_record_row,
    job_from_row,
    job_record_row,
    job_row,
)
from ticklock.domain.executions import Execution, ExecutionStatus, RunSummary
from ticklock.domain.fires import Fire, Lease, Trigger
from ticklock.domain.job_settings import AlertRules, Policy
from ticklock.domain.jobs import Backfill, Hold, HoldKind, Job
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule

AT = datetime(2026, 12, 1, 12, tzinfo=UTC)
moments = st.integers(-(10**9), 10**9).map(lambda us: AT + timedelta(microseconds=us * 997))
maybe = st.none() | moments
texts = st.text(max_size=12)
payloads = st.sampled_from([{}, {"a": 1}, {"é": [1, -0.0, {"x": None}]}, {"n": "{}"}])
schedules = st.sampled_from(
    [IntervalSchedule(1), IntervalSchedule(3600), CronSchedule("0 30 2 * * *", "Europe/Paris"), OnceSchedule(AT)]
)
holds = st.sampled_from(
    [None, Hold(HoldKind.PAUSE, AT, note="n", until=AT + timedelta(hours=1), skipped_from=AT, resumes_at=AT)]
)
alerts = st.sampled_from([None, AlertRules(late_after=30.0, failures_in_a_row=3, email="a@example.com")])
backfills = st.sampled_from([None, Backfill(AT - timedelta(days=2), AT - timedelta(days=1), AT)])
statuses = st.sampled_from(list(ExecutionStatus))
runs = st.none() | st.builds(RunSummary, statuses, moments, st.integers(0, 9), st.integers(0, 9))
leases = st.none() | st.builds(Lease, texts.filter(bool), texts, moments)
jobs = st.builds(
    Job,
    id=texts,
    name=texts,
    handler=texts,
    schedule=schedules,
    payload=payloads,
    timeout=st.floats(0.001, 86_400),
    max_retries=st.integers(0, 10),
    enabled=st.booleans(),
    next_run_at=maybe,
    created_at=moments,
    updated_at=moments,
    version=st.integers(1, 10**6),
    trigger_at=maybe,
    lease=leases,
    disabled_reason=st.none() | texts,
    policy=st.sampled_from([Policy(), Policy(catchup_window=7.5), Policy(max_jitter=30.0)]),
    hold=holds,
    alerts=alerts,
    open_alerts=st.sampled_from([{}, {"late": {"since": AT.isoformat()}}]),
    backfill=backfills,
    last_run=runs,
)


@settings(max_examples=400, deadline=None)
@given(job=jobs, now=moments)
def test_a_row_reads_back_the_same_by_position_and_by_record(job: Job, now: datetime) -> None:
    row = job_row(job, now)
    assert row == job_record_row(job, now)
    assert [type(a) for a in row] == [type(b) for b in job_record_row(job, now)]  # 1 is not 1.0 nor True
    by_position, by_record = job_from_row(row), job_from_record_row(row)
    assert by_position == by_record == job
    assert type(by_position.payload) is dict and by_position.payload is not job.payload  # a fresh dict each read


executions = st.builds(
    Execution,
    id=texts,
    job_id=texts,
    fire_key=texts,
    handler=texts,
    trigger=st.sampled_from(list(Trigger)),
    scheduled_at=moments,
    started_at=moments,
    deadline_at=moments,
    run_token=texts,
    owner=texts,
    status=statuses,
    attempts=st.integers(0, 10),
    resumes=st.integers(0, 10),
    finished_at=maybe,
    duration=st.none() | st.floats(0, 86_400),
    error=st.none() | texts,
    jitter=st.floats(0, 60),
    detached=st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(execution=executions)
def test_an_execution_row_holds_its_record_in_column_order(execution: Execution) -> None:
    record = execution_record(execution, MICROS)
    assert execution_row(execution) == tuple(record[c] for c in EXECUTION_FIELDS)
    assert execution_from_row(execution_row(execution)) == execution


@settings(max_examples=400, deadline=None)
@given(job=jobs, next_run_at=maybe, now=moments)
def test_the_fast_advance_is_what_the_advanced_job_holds(job: Job, next_run_at: datetime | None, now: datetime) -> None:
    job = job.with_changes(trigger_at=None, backfill=None, lease=Lease("tok", "me", now + timedelta(seconds=60)))
    fire = Fire(job, job.next_run_at or now, Trigger.SCHEDULE, "tok")
    advanced = job.advanced(fire, next_run_at)
    assert fast_advance(job, next_run_at) == (advanced.enabled, advanced.due_at(now))
