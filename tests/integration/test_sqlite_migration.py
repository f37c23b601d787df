"""SQLite files written by older schemas open under the current one: a first file's jobs gain
``disabled_reason`` and a policy and read as before; a version 3 file's executions gain a jitter; a
version 4 file's jobs gain their runs' summary, filled from the executions it kept."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

from ticklock.adapters.store.sqlite import SCHEMA_VERSION, SQLiteStore
from ticklock.domain.jobs import Policy

# the jobs table as schema version 1 created it (ticklock before issue 10)
V1_JOBS = """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, handler TEXT NOT NULL, schedule TEXT NOT NULL,
    payload TEXT NOT NULL, timeout REAL NOT NULL, max_retries INTEGER NOT NULL, enabled INTEGER NOT NULL,
    next_run_at INTEGER, trigger_at INTEGER, due_at INTEGER, lease_token TEXT, lease_owner TEXT,
    lease_until INTEGER, version INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
)"""


def test_a_version_1_file_is_migrated_and_its_jobs_still_read(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute(V1_JOBS)
    old.execute(
        "INSERT INTO jobs VALUES ('j1', 'old-job', 'noop', ?, ?, 60.0, 0, 1, 1767225600000000, NULL, "
        "1767225600000000, NULL, NULL, NULL, 3, 1767225600000000, 1767225600000000)",
        (json.dumps({"kind": "interval", "seconds": 60}), json.dumps({"k": [1, 2]})),
    )
    old.execute("PRAGMA user_version=1")
    old.commit()
    old.close()

    store = SQLiteStore(path)
    try:
        job = store.get_job("j1")
        assert (job.name, job.version, dict(job.payload), job.disabled_reason) == ("old-job", 3, {"k": [1, 2]}, None)
        assert job.policy == Policy()  # a row from before policies: the defaults
        store.update_job(job.with_changes(policy=Policy(catchup_window=9.0)), expected_version=3)
        assert store.get_job("j1").policy.catchup_window == 9.0
        job = store.get_job("j1")
        stopped = store.update_job(job.with_changes(enabled=False, disabled_reason="why"), expected_version=4)
        assert store.get_job("j1").disabled_reason == "why"
        assert stopped.version == 5
    finally:
        store.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5  # 5: the runs' summary
    tables = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"jobs", "executions", "ledger"} <= tables
    check.close()
    SQLiteStore(path).close()  # opening a migrated file again changes nothing


V3_EXECUTIONS = """
CREATE TABLE executions (
    id TEXT PRIMARY KEY, job_id TEXT NOT NULL, fire_key TEXT NOT NULL UNIQUE, handler TEXT NOT NULL,
    trigger TEXT NOT NULL, scheduled_at INTEGER NOT NULL, started_at INTEGER NOT NULL,
    deadline_at INTEGER NOT NULL, run_token TEXT NOT NULL, owner TEXT NOT NULL, status TEXT NOT NULL,
    attempts INTEGER NOT NULL, resumes INTEGER NOT NULL, finished_at INTEGER, duration REAL, error TEXT
)"""


def test_a_version_3_file_keeps_its_executions_and_they_read_with_no_jitter(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    old = sqlite3.connect(path)  # a version 3 file: jobs with a policy, executions without jitter
    old.execute(V1_JOBS)
    old.execute("ALTER TABLE jobs ADD COLUMN disabled_reason TEXT")
    old.execute("ALTER TABLE jobs ADD COLUMN policy TEXT")
    old.execute(V3_EXECUTIONS)
    old.execute(
        "INSERT INTO executions VALUES ('e1', 'j1', 'j1:schedule:1', 'noop', 'schedule', 1767225600000000, "
        "1767225600000000, 1767225660000000, 'tok', 'me', 'running', 1, 0, NULL, NULL, NULL)"
    )
    old.execute("PRAGMA user_version=3")
    old.commit()
    old.close()
    store = SQLiteStore(path)
    try:
        execution = store.get_execution("e1")
        assert (execution.status.value, execution.jitter, execution.lag, execution.detached) == (
            "running",
            0.0,
            0.0,
            False,
        )
        assert store.open_executions(deadline_before=execution.deadline_at + timedelta(days=1), limit=10) == []
    finally:
        store.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    indexes = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "executions_detached" in indexes
    columns = {r[1] for r in check.execute("PRAGMA table_info(jobs)")}
    assert "hold" in columns
    check.close()


def test_a_version_4_file_gets_its_runs_summary_from_its_executions(tmp_path: Path) -> None:
    from tests.contract.test_store_views import run
    from tests.support.factories import T0, make_job
    from ticklock.domain.jobs import ExecutionStatus

    path = tmp_path / "v4.db"
    store = SQLiteStore(path)
    job = store.add_job(make_job())
    never = store.add_job(make_job())
    run(store, job, ExecutionStatus.SUCCESS, T0)
    run(store, job, ExecutionStatus.FAILED, T0 + timedelta(minutes=1))
    run(store, job, ExecutionStatus.SUCCESS, T0 + timedelta(minutes=2))
    expected = store.get_job(job.id).last_run
    store.close()
    old = sqlite3.connect(path)  # as version 4 left it: no summary (the columns exist, as after ADD COLUMN)
    old.execute("UPDATE jobs SET last_status = NULL, last_at = NULL, runs = 0, runs_ok = 0")
    old.execute("PRAGMA user_version=4")
    old.commit()
    old.close()
    store = SQLiteStore(path)
    try:
        summary = store.get_job(job.id).last_run
        assert summary == expected and summary is not None
        assert (summary.status, summary.runs, summary.ok) == (ExecutionStatus.SUCCESS, 3, 2)
        assert store.get_job(never.id).last_run is None
    finally:
        store.close()
