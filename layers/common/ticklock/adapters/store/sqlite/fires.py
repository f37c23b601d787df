"""The ``FireStore`` role: claim the due jobs, start, take over and finish their executions, advance the jobs."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ticklock.adapters.store.sqlite.connection import Connection
from ticklock.adapters.store.sqlite.rows import execution_from_row, execution_row, from_us, job_from_row, us, utc_now
from ticklock.adapters.store.sqlite.schema import EXEC_COLUMNS, EXEC_SLOTS, JOB_COLUMNS
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fires import Fire, Lease, Trigger
from ticklock.domain.jobs import Job
from ticklock.ports import Completion, FireStore, Started

# A fire's statements, named so that bench/fire_path.py runs the very same text as its SQL floor.
# The claim: the due jobs' leases taken and their due times moved past their leases, in one statement.
CLAIM = f"""UPDATE jobs SET lease_token = ?, lease_owner = ?, lease_until = ?, due_at = ?
            WHERE id IN (SELECT id FROM jobs WHERE due_at <= ? ORDER BY due_at LIMIT ?)
            RETURNING {JOB_COLUMNS}"""
# A heartbeat: a claim still held lasts longer; the job's due time never falls inside it.
EXTEND = "UPDATE jobs SET lease_until = ?, due_at = MAX(due_at, ?) WHERE id = ? AND lease_token = ?"
START = (
    f"INSERT INTO executions ({EXEC_COLUMNS}) VALUES ({EXEC_SLOTS}) "
    "ON CONFLICT(job_id, scheduled_at, trigger) DO NOTHING"  # the fire's: schema.FIRE_UNIQUE
)
FINISH = (
    "UPDATE executions SET status=?, attempts=?, finished_at=?, duration=?, error=? "
    "WHERE id=? AND run_token=? AND status IN ('running', 'interrupted')"
)


class Fires(Connection, FireStore):
    def claim_due(self, *, now: datetime, horizon: datetime, limit: int, owner: str, slack: timedelta) -> list[Job]:
        token = uuid.uuid4().hex
        until = us(horizon + slack)
        with self._tx() as conn:
            rows = conn.execute(CLAIM, (token, owner, until, until, us(horizon), limit)).fetchall()
        jobs = [job_from_row(r) for r in rows]
        jobs.sort(key=lambda j: (j.pending_at(), j.id))
        return jobs

    def extend_claims(self, claims: Sequence[tuple[str, str]], *, until: datetime) -> int:
        at = us(until)
        rows = [(at, at, job_id, token) for job_id, token in claims]
        if not rows:
            return 0
        with self._tx() as conn:
            return conn.executemany(EXTEND, rows).rowcount

    def live_claims(self, *, now: datetime) -> list[tuple[str, Lease]]:
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT id, lease_token, lease_owner, lease_until FROM jobs WHERE lease_until > ?", (us(now),)
            ).fetchall()
        return [(job_id, Lease(token, owner, from_us(until))) for job_id, token, owner, until in rows]

    # The writes of a fire's steps go through ``_write``: the runners' threads' writes share commits.
    def release(self, job_id: str, lease_token: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ? AND lease_token = ?", (job_id, lease_token)
            ).fetchone()
            if row is None:
                return
            job = job_from_row(row).with_changes(lease=None)
            conn.execute(
                "UPDATE jobs SET lease_token=NULL, lease_owner=NULL, lease_until=NULL, due_at=? WHERE id=?",
                (us(job.due_at(utc_now())), job_id),
            )

        self._write(op)

    def advance(self, fire: Fire, *, next_run_at: datetime | None, now: datetime) -> bool:
        return self._write(lambda conn: _advance(conn, fire, next_run_at, now))

    def start_execution(self, execution: Execution) -> Started:
        row = execution_row(execution)
        return self._write(lambda conn: _start(conn, execution, row))

    def start_executions(self, executions: Sequence[Execution]) -> list[Started]:
        rows = [(execution, execution_row(execution)) for execution in executions]
        return self._write(lambda conn: [_start(conn, execution, row) for execution, row in rows])

    def take_over_execution(self, execution: Execution, *, previous_token: str) -> bool:
        def op(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "UPDATE executions SET run_token=?, owner=?, status=?, started_at=?, deadline_at=?, resumes=?, "
                "finished_at=NULL, duration=NULL WHERE id=? AND run_token=?",
                (
                    execution.run_token,
                    execution.owner,
                    execution.status.value,
                    us(execution.started_at),
                    us(execution.deadline_at),
                    execution.resumes,
                    execution.id,
                    previous_token,
                ),
            ).rowcount

        return bool(self._write(op))

    def finish_execution(self, execution: Execution) -> bool:
        return self._write(lambda conn: _finish(conn, execution))

    def complete(
        self, execution: Execution, fire: Fire, *, next_run_at: datetime | None, now: datetime
    ) -> tuple[bool, bool]:
        return self._write(lambda conn: _complete(conn, execution, fire, next_run_at, now))

    def complete_many(self, completions: Sequence[Completion], *, now: datetime) -> list[tuple[bool, bool]]:
        return self._write(lambda conn: [_complete(conn, c.execution, c.fire, c.next_run_at, now) for c in completions])


BY_FIRE = f"SELECT {EXEC_COLUMNS} FROM executions WHERE job_id = ? AND scheduled_at = ? AND trigger = ?"


def _start(conn: sqlite3.Connection, execution: Execution, row: tuple[Any, ...]) -> Started:
    if conn.execute(START, row).rowcount:
        return Started(execution, created=True)
    fire = (execution.job_id, us(execution.scheduled_at), execution.trigger.value)
    return Started(execution_from_row(conn.execute(BY_FIRE, fire).fetchone()), created=False)


def _complete(
    conn: sqlite3.Connection, execution: Execution, fire: Fire, next_run_at: datetime | None, now: datetime
) -> tuple[bool, bool]:
    if not _finish(conn, execution, summarise=False):
        return False, False
    # the run's summary rides on the advance's update of the job's row (one write of it, not two)
    if _advance(conn, fire, next_run_at, now, summary=execution if execution.status.final else None):
        return True, True
    if execution.status.final:
        _summarise(conn, execution)
    return True, False


def _finish(conn: sqlite3.Connection, execution: Execution, *, summarise: bool = True) -> bool:
    changed = conn.execute(
        FINISH,
        (
            execution.status.value,
            execution.attempts,
            us(execution.finished_at),
            execution.duration,
            execution.error,
            execution.id,
            execution.run_token,
        ),
    ).rowcount
    if changed and summarise and execution.status.final:
        _summarise(conn, execution)
    return bool(changed)


# the job's runs' summary, in the transaction that finishes a run; a run that ended before the last one
# recorded (runs overlapping under allow_all) counts, but does not become the last
SUMMARY = (
    "runs = runs + 1, runs_ok = runs_ok + ?, "
    "last_status = CASE WHEN last_at IS NULL OR last_at <= ? THEN ? ELSE last_status END, "
    "last_at = CASE WHEN last_at IS NULL OR last_at <= ? THEN ? ELSE last_at END"
)
# the fast advance of a job unchanged since its claim (``_advance``), and the same with its run counted
_ADVANCE = (
    "UPDATE jobs SET next_run_at=?, enabled=?, due_at=?, lease_token=NULL, lease_owner=NULL, "
    "lease_until=NULL, version=version+1{extra} "
    "WHERE id=? AND lease_token=? AND version=? AND trigger_at IS NULL AND backfill IS NULL"
)
ADVANCE, ADVANCE_COUNTED = _ADVANCE.format(extra=""), _ADVANCE.format(extra=f", {SUMMARY}")


def _summary_values(execution: Execution) -> tuple[int, int | None, str, int | None, int | None]:
    at = us(execution.finished_at or execution.started_at)
    return int(execution.status is ExecutionStatus.SUCCESS), at, execution.status.value, at, at


def _summarise(conn: sqlite3.Connection, execution: Execution) -> None:
    conn.execute(f"UPDATE jobs SET {SUMMARY} WHERE id = ?", (*_summary_values(execution), execution.job_id))


def fast_advance(job: Job, next_run_at: datetime | None) -> tuple[bool, datetime | None]:
    """What ``job.advanced(fire, next_run_at)`` holds for a scheduled fire of a job unchanged since its
    claim, with no trigger or backfill pending: whether it stays enabled, and when it is next due (its
    ``due_at``: the lease is gone). Without the copy of the job (tests/property/test_rows.py checks the two)."""
    enabled = job.enabled and next_run_at is not None
    return enabled, job.jittered(next_run_at) if enabled else None


def _advance(
    conn: sqlite3.Connection,
    fire: Fire,
    next_run_at: datetime | None,
    now: datetime,
    *,
    summary: Execution | None = None,
) -> bool:
    """The job moved on past ``fire`` if it still holds the fire's claim; with ``summary``, that finished
    run counted in the same update. False (and nothing written) if the claim is gone.

    A scheduled fire of a job unchanged since its claim (same version, no trigger or backfill pending, as
    MongoDB's fast advance) is one guarded UPDATE computed from the claimed job; otherwise, or if that
    guard misses, the job is read back and advanced from what is stored (a read and a decode of the row,
    which the common case spares)."""
    extra, values = ("", ()) if summary is None else (f", {SUMMARY}", _summary_values(summary))
    if fire.trigger is Trigger.SCHEDULE and fire.job.backfill is None and fire.job.trigger_at is None:
        enabled, due = fast_advance(fire.job, next_run_at)
        if conn.execute(
            ADVANCE if summary is None else ADVANCE_COUNTED,
            (us(next_run_at), int(enabled), us(due), *values, fire.job.id, fire.lease_token, fire.job.version),
        ).rowcount:
            return True
    row = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ? AND lease_token = ?", (fire.job.id, fire.lease_token)
    ).fetchone()
    if row is None:
        return False
    job = job_from_row(row).advanced(fire, next_run_at)
    conn.execute(
        "UPDATE jobs SET next_run_at=?, enabled=?, trigger_at=?, backfill=?, due_at=?, lease_token=NULL, "
        f"lease_owner=NULL, lease_until=NULL, version=version+1{extra} WHERE id=?",
        (
            us(job.next_run_at),
            int(job.enabled),
            us(job.trigger_at),
            None if job.backfill is None else json.dumps(job.backfill.to_dict()),
            us(job.due_at(now)),
            *values,
            job.id,
        ),
    )
    return True
