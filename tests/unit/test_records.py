"""One serialisation of a job, a fire and an execution (``adapters/records.py``) under the SQLite row, the
MongoDB document and the SQS message: the same fields in each, each with its own time encoding, and every
value back as it went in (the v1 fire message, still in a queue during a deployment, too)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from ticklock.adapters.queue.sqs import decode_fire, encode_fire
from ticklock.adapters.records import EXECUTION_FIELDS, JOB_FIELDS
from ticklock.adapters.store.mongo.documents import execution_doc, execution_from_doc, job_doc, job_from_doc
from ticklock.adapters.store.sqlite.rows import (
    JOB_COLUMN_NAMES,
    execution_from_row,
    execution_row,
    job_from_row,
    job_row,
)
from ticklock.adapters.store.sqlite.schema import EXEC_COLUMNS
from ticklock.domain.jobs import Execution, ExecutionStatus, Fire, Job, Lease, Trigger
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
    assert set(job_doc(JOB, AT)) == {*JOB_FIELDS, "due_at", "seq"} - {"id"} | {"_id"}
    assert set(json.loads(encode_fire(Fire(JOB, AT, Trigger.SCHEDULE, "tok")))["job"]) == set(JOB_FIELDS)
    assert EXEC_COLUMNS.split(", ") == list(EXECUTION_FIELDS)
    assert set(execution_doc(EXECUTION)) == {*EXECUTION_FIELDS} - {"id"} | {"_id"}


def test_each_gives_back_what_it_was_given() -> None:
    assert job_from_row(job_row(JOB, AT)) == JOB
    assert job_from_doc(job_doc(JOB, AT)) == JOB
    fire = Fire(JOB, AT, Trigger.MANUAL, "tok")
    assert decode_fire(encode_fire(fire)) == fire
    assert execution_from_row(execution_row(EXECUTION)) == EXECUTION
    assert execution_from_doc(execution_doc(EXECUTION)) == EXECUTION


def test_a_version_1_fire_message_is_still_read() -> None:
    fire = Fire(JOB.with_changes(payload={"a": 1}), AT, Trigger.SCHEDULE, "tok")
    current = json.loads(encode_fire(fire))
    job = current["job"]
    old = {
        "v": 1,
        "scheduled_at": current["scheduled_at"],
        "trigger": "schedule",
        "lease_token": "tok",
        "job": {
            **{k: v for k, v in job.items() if not k.startswith("lease_") and k != "disabled_reason"},
            "lease": {"token": job["lease_token"], "owner": job["lease_owner"], "until": job["lease_until"]},
        },
    }
    assert decode_fire(json.dumps(old)) == fire
    assert current["v"] == 2
