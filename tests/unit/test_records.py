"""One serialisation of a job, a fire and an execution (``adapters/records.py``) under the SQLite row, the
MongoDB document and the SQS message: the same fields in each, each with its own time encoding, and every
value back as it went in; the fire message in the layout the release before wrote (v1), and v2 read too."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from ticklock.adapters.queue.sqs import decode_fire, encode_fire
from ticklock.adapters.records import EXECUTION_FIELDS, ISO, JOB_FIELDS, fire_record
from ticklock.adapters.store.mongo.documents import (
    execution_doc,
    execution_from_doc,
    fast_advance,
    job_doc,
    job_from_doc,
    setting,
)
from ticklock.adapters.store.sqlite.rows import (
    JOB_COLUMN_NAMES,
    execution_from_row,
    execution_row,
    job_from_row,
    job_row,
)
from ticklock.adapters.store.sqlite.schema import EXEC_COLUMNS
from ticklock.domain.executions import Execution, ExecutionStatus, RunSummary
from ticklock.domain.fires import Fire, Lease, Trigger
from ticklock.domain.job_settings import AlertRules, Policy
from ticklock.domain.jobs import Backfill, Hold, HoldKind, Job
from ticklock.domain.schedules import CronSchedule

AT = datetime(2026, 12, 1, 12, 0, 0, 123000, tzinfo=UTC)
JOB = Job(
    id="j1",
    name="nightly",
    handler="noop",
    schedule=CronSchedule("0 30 2 * * *", "Europe/Paris"),
    payload={"é": [1, -0.0, {"x": None}]},
    timeout=12.5,
    max_retries=2,
    enabled=True,
    next_run_at=AT,
    trigger_at=AT + timedelta(seconds=1),
    lease=Lease("tok", "host:1", AT + timedelta(seconds=70)),
    version=4,
    created_at=AT - timedelta(days=1),
    updated_at=AT - timedelta(hours=1),
    disabled_reason=None,
    policy=Policy(catchup_window=7.5),
)
FULL_JOB = JOB.with_changes(  # every field set
    enabled=False,
    disabled_reason="paused by ops",
    hold=Hold(
        HoldKind.PAUSE,
        AT - timedelta(minutes=5),
        note="maintenance",
        until=AT + timedelta(hours=1),
        skipped_from=AT,
        resumes_at=AT + timedelta(hours=1),
    ),
    alerts=AlertRules(late_after=30.0, failures_in_a_row=3, webhook="https://hooks.example/x", email="a@example.com"),
    open_alerts={"late": {"since": AT.isoformat()}},
    backfill=Backfill(AT - timedelta(days=2), AT - timedelta(days=1), AT - timedelta(minutes=1)),
    last_run=RunSummary(ExecutionStatus.FAILED, AT - timedelta(minutes=2), runs=7, ok=6),
)
EXECUTION = Execution(
    id="e1",
    job_id="j1",
    fire_key="j1:1",
    handler="noop",
    trigger=Trigger.MANUAL,
    scheduled_at=AT,
    started_at=AT + timedelta(milliseconds=5),
    deadline_at=AT + timedelta(seconds=12),
    run_token="run",
    owner="host:1",
    status=ExecutionStatus.FAILED,
    attempts=3,
    resumes=1,
    finished_at=AT + timedelta(seconds=2),
    duration=2.0,
    error="RuntimeError: no",
)


def test_every_encoding_holds_the_same_fields() -> None:
    assert set(JOB_COLUMN_NAMES) == {*JOB_FIELDS, "due_at"}
    # the MongoDB document leaves its null fields out (documents.py, ``_present``): the ones the SQLite row
    # holds as NULL
    null = {name for name, value in zip(JOB_COLUMN_NAMES, job_row(JOB, AT), strict=True) if value is None}
    assert null == {
        "disabled_reason",
        "hold",
        "hold_until",
        "alerts",
        "open_alerts",
        "backfill",
        "last_status",
        "last_at",
    }
    assert set(job_doc(JOB, AT)) == {*JOB_FIELDS, "due_at", "seq"} - {"id"} - null | {"_id"}
    # a job with every field set: its document holds all of them, and reads back as it was
    row = job_row(FULL_JOB, AT)
    assert None not in row
    assert set(job_doc(FULL_JOB, AT)) == {*JOB_FIELDS, "due_at", "seq"} - {"id"} | {"_id"}
    assert job_from_doc(job_doc(FULL_JOB, AT)) == job_from_row(row) == FULL_JOB
    message = json.loads(encode_fire(Fire(JOB, AT, Trigger.SCHEDULE, "tok")))
    lease = {"lease_token", "lease_owner", "lease_until"}
    assert message["v"] == 1 and set(message["job"]) == set(JOB_FIELDS) - lease | {"lease"}  # v1's layout
    assert EXEC_COLUMNS.split(", ") == list(EXECUTION_FIELDS)
    assert set(execution_doc(EXECUTION)) == {*EXECUTION_FIELDS} - {"id"} | {"_id"}  # none of its fields null
    running = EXECUTION.with_changes(status=ExecutionStatus.RUNNING, finished_at=None, duration=None, error=None)
    assert set(execution_doc(running)) == {*EXECUTION_FIELDS} - {"id", "finished_at", "duration", "error"} | {"_id"}


def test_each_gives_back_what_it_was_given() -> None:
    assert job_from_row(job_row(JOB, AT)) == JOB
    assert job_from_doc(job_doc(JOB, AT)) == JOB
    fire = Fire(JOB, AT, Trigger.MANUAL, "tok")
    assert decode_fire(encode_fire(fire)) == fire
    assert execution_from_row(execution_row(EXECUTION)) == EXECUTION
    assert execution_from_doc(execution_doc(EXECUTION)) == EXECUTION


def test_a_mongodb_document_with_its_null_fields_written_out_reads_the_same() -> None:
    """Documents written before null fields were left out hold them as nulls; both read as one job."""
    slim = job_doc(JOB, AT)
    written_out = {**{name: None for name in JOB_FIELDS if name != "id"}, **slim}
    assert len(written_out) > len(slim)
    assert job_from_doc(written_out) == job_from_doc(slim) == JOB
    running = EXECUTION.with_changes(status=ExecutionStatus.RUNNING, finished_at=None, duration=None, error=None)
    doc = execution_doc(running)
    assert execution_from_doc({**doc, "finished_at": None, "duration": None, "error": None}) == running


def test_a_fast_advance_unsets_the_lease_rather_than_writing_nulls() -> None:
    lease = {"lease_token", "lease_owner", "lease_until"}
    summary = EXECUTION.with_changes(status=ExecutionStatus.SUCCESS, error=None)
    for finished in (None, summary):
        where, change = fast_advance(Fire(JOB, AT, Trigger.SCHEDULE, "tok"), AT + timedelta(days=1), finished)
        assert where["lease_token"] == "tok"
        assert set(change["$unset"]) == lease
        assert not lease & (set(change["$set"]) | set(change["$inc"]))
    assert change["$set"]["last_run_token"] == "run" and change["$inc"]["runs"] == 1


V1 = (  # a message as the release before wrote it (81c8d18's encode_fire), one with a lease and one without
    '{"v":1,"scheduled_at":"2026-06-01T12:00:00+00:00","trigger":"schedule","lease_token":"t1","job":{"id":"j1",'
    '"name":"heartbeat","handler":"noop","schedule":{"kind":"interval","seconds":60},"payload":{"k":[1]},'
    '"timeout":10.0,"max_retries":0,"enabled":true,"version":3,"next_run_at":"2026-06-01T12:00:00+00:00",'
    '"trigger_at":null,"created_at":"2026-06-01T11:00:00+00:00","updated_at":"2026-06-01T11:30:00+00:00",'
    '"lease":LEASE}}'
)


def test_a_version_1_message_is_read_and_a_version_2_one_too() -> None:
    noon = datetime(2026, 6, 1, 12, tzinfo=UTC)
    leased = decode_fire(V1.replace("LEASE", '{"token":"t1","owner":"tick","until":"2026-06-01T12:01:10+00:00"}'))
    assert leased.job.lease == Lease("t1", "tick", noon + timedelta(seconds=70))
    assert (leased.scheduled_at, leased.trigger, leased.lease_token) == (noon, Trigger.SCHEDULE, "t1")
    assert leased.job.payload == {"k": [1]} and leased.job.version == 3 and leased.job.disabled_reason is None
    assert leased.job.policy == Policy()  # written before policies: the defaults
    assert decode_fire(V1.replace("LEASE", "null")).job.lease is None
    fire = Fire(JOB, AT, Trigger.MANUAL, "tok")
    version_2 = json.dumps({"v": 2, **fire_record(fire, ISO)})  # what the next release writes
    assert decode_fire(version_2) == fire
    with pytest.raises(ValueError, match="unknown fire message version 3"):
        decode_fire(json.dumps({"v": 3, **fire_record(fire, ISO)}))


def test_an_update_sets_the_values_and_unsets_the_nulls_never_with_an_empty_operator() -> None:
    assert setting({"a": 1, "b": None, "c": 0, "d": False}) == {
        "$set": {"a": 1, "c": 0, "d": False},
        "$unset": {"b": ""},
    }
    assert setting({"a": None}) == {"$unset": {"a": ""}}
    assert setting({"a": "x"}) == {"$set": {"a": "x"}}
