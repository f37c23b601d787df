"""SQLite files written by older schemas open under the current one: a first file's jobs gain
``disabled_reason`` and a policy and read as before; a version 3 file's executions gain a jitter; a
version 4 file's jobs gain their runs' summary, filled from the executions it kept; a version 5 file's
executions are rebuilt without fire_key's UNIQUE, each fire unique by its columns, every row kept (and
a file whose rows cannot be is left as it was)."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ticklock.adapters.store.sqlite import SCHEMA_VERSION, SQLiteStore
from ticklock.domain.job_settings import Policy
from ticklock.ports import JobQuery

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
    assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7  # 7: the states' indexes
    tables = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"jobs", "executions", "ledger"} <= tables
    check.close()
    SQLiteStore(path).close()  # opening a migrated file again changes nothing
    counted = SQLiteStore(path)
    assert counted.count_jobs(datetime.now(UTC))["total"] == 1  # counted once when the counter was made
    counted.close()


def test_a_file_without_the_counter_counts_its_jobs_once_and_every_writer_keeps_it(tmp_path: Path) -> None:
    """A file of schema 7's first version (unreleased, no jobs_counts) gains the total, counted from its jobs;
    from then on the file keeps it on every insert and delete, whoever writes them."""
    from tests.support.factories import make_job

    path = tmp_path / "first7.db"
    store = SQLiteStore(path)
    store.add_jobs([make_job() for _ in range(5)])
    store.close()
    raw = sqlite3.connect(path)
    raw.executescript("DROP TRIGGER jobs_added; DROP TRIGGER jobs_deleted; DROP TABLE jobs_counts;")
    raw.close()
    store = SQLiteStore(path)
    try:
        assert store.count_jobs(datetime.now(UTC))["total"] == 5
        store.add_job(make_job())
        store.delete_job(store.find_jobs(JobQuery(sort="id"), limit=1)[0].id)
        other = sqlite3.connect(path)  # another process, in SQL
        other.execute("DELETE FROM jobs WHERE id = (SELECT MIN(id) FROM jobs)")
        other.commit()
        other.close()
        assert store.count_jobs(datetime.now(UTC))["total"] == 4
    finally:
        store.close()
    SQLiteStore(path).close()  # opened again: counted as it was, not again
    check = sqlite3.connect(path)
    assert check.execute("SELECT state, n FROM jobs_counts").fetchall() == [("total", 4)]
    check.close()


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
    from tests.contract.store.helpers import run
    from tests.support.factories import T0, make_job
    from ticklock.domain.executions import ExecutionStatus

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


# the executions table as schema versions 4 and 5 left it: a fire unique by its fire_key, and a second index
# for a job's listing
V5_EXECUTIONS = [
    V3_EXECUTIONS,
    "ALTER TABLE executions ADD COLUMN jitter REAL NOT NULL DEFAULT 0",
    "ALTER TABLE executions ADD COLUMN detached INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX executions_job ON executions (job_id, scheduled_at DESC, id DESC)",
]
SECOND = 1_000_000


def _v5_file(path: Path, rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """A version 5 file holding ``rows`` of executions (all their columns, the rowid first); returns them
    as stored."""
    old = sqlite3.connect(path)
    old.execute(V1_JOBS)
    for statement in V5_EXECUTIONS:
        old.execute(statement)
    old.executemany(f"INSERT INTO executions (rowid, {COLUMNS}) VALUES ({', '.join('?' * 19)})", rows)
    old.execute("PRAGMA user_version=5")
    old.commit()
    stored = old.execute(f"SELECT rowid, {COLUMNS} FROM executions ORDER BY rowid").fetchall()
    old.close()
    return stored


COLUMNS = (
    "id, job_id, fire_key, handler, trigger, scheduled_at, started_at, deadline_at, run_token, owner, status, "
    "attempts, resumes, finished_at, duration, error, jitter, detached"
)


def _row(
    rowid: int, execution_id: str, job_id: str, trigger: str, at: int, status: str = "success"
) -> tuple[object, ...]:
    return (rowid, execution_id, job_id, f"{job_id}:{trigger}:{at}", "noop", trigger, at, at, at + 60 * SECOND,
            f"tok-{execution_id}", "me", status, 1, 0, at + SECOND, 1.0, None, 0.25, 0)  # fmt: skip


def test_a_version_5_file_is_rebuilt_with_each_fire_unique_by_its_columns_and_every_row_kept(tmp_path: Path) -> None:
    from ticklock.adapters.store.sqlite.rows import from_us
    from ticklock.domain.fires import Trigger

    path = tmp_path / "v5.db"
    t = 1_767_225_600 * SECOND
    rows = [
        _row(7, "e1", "j1", "schedule", t),
        _row(9, "e2", "j1", "manual", t),  # the same slot, another trigger: another fire
        _row(12, "e3", "j1", "schedule", t + 60 * SECOND),
        _row(13, "e4", "j2", "schedule", t, status="running"),
    ]
    stored = _v5_file(path, rows)
    store = SQLiteStore(path)
    try:
        again = store.get_execution("e3").with_changes(id="e9", run_token="other")
        started = store.start_execution(again)  # a fire recorded before the rebuild is still recorded once
        assert not started.created and started.execution == store.get_execution("e3")
        assert [e.id for e in store.list_executions("j1")] == ["e3", "e2", "e1"]  # newest first, ties by id
        assert [e.id for e in store.list_executions("j1", before="e3")] == ["e2", "e1"]
        assert [e.id for e in store.list_executions("j1", before="e2", limit=1)] == ["e1"]
        found = store.execution_for("j1", Trigger.MANUAL, from_us(t))
        assert found is not None and found.id == "e2"
        assert store.execution_for("j2", Trigger.MANUAL, from_us(t)) is None
    finally:
        store.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert check.execute(f"SELECT rowid, {COLUMNS} FROM executions ORDER BY rowid").fetchall() == stored
    indexes = {r[1]: (r[2], r[3]) for r in check.execute("PRAGMA index_list(executions)")}
    assert indexes["executions_fire"] == (1, "c")  # unique, made by CREATE INDEX
    assert "executions_job" not in indexes and all(origin != "u" for _, origin in indexes.values())
    plan = " ".join(r[3] for r in check.execute("EXPLAIN QUERY PLAN SELECT id FROM executions WHERE job_id = 'j1' "
                                                   "ORDER BY scheduled_at DESC, id DESC LIMIT 5"))  # fmt: skip
    assert "executions_fire" in plan
    check.close()


def test_a_version_5_file_whose_rows_break_the_new_uniqueness_is_left_as_it_was(tmp_path: Path) -> None:
    from ticklock.errors import StoreUnavailable

    path = tmp_path / "v5-odd.db"
    t = 1_767_225_600 * SECOND
    odd = _row(2, "e2", "j1", "schedule", t)
    odd = (*odd[:3], "j1:schedule:made-elsewhere", *odd[4:])  # one fire under two keys: written by hand
    stored = _v5_file(path, [_row(1, "e1", "j1", "schedule", t), odd])
    with pytest.raises(StoreUnavailable, match=r"UNIQUE constraint failed: executions\.job_id"):
        SQLiteStore(path)
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA user_version").fetchone()[0] == 5
    assert check.execute(f"SELECT rowid, {COLUMNS} FROM executions ORDER BY rowid").fetchall() == stored
    indexes = {r[1] for r in check.execute("PRAGMA index_list(executions)")}
    assert "executions_job" in indexes and "executions_fire" not in indexes
    tables = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"jobs", "executions"}  # the new ledger table's creation undone with the rest
    check.close()


def test_a_version_5_files_rebuild_keeps_a_users_view_and_says_how_many_rows_it_copied(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "v5-view.db"
    t = 1_767_225_600 * SECOND
    _v5_file(path, [_row(1, "e1", "j1", "schedule", t), _row(2, "e2", "j2", "schedule", t, status="failed")])
    made = sqlite3.connect(path)  # an operator's own view on the table: the rebuild must not break it
    made.execute("CREATE VIEW failures AS SELECT id, job_id FROM executions WHERE status = 'failed'")
    made.commit()
    made.close()
    with caplog.at_level("WARNING", logger="ticklock.store"):
        SQLiteStore(path).close()
    said = [(r.msg, getattr(r, "rows", None)) for r in caplog.records if r.name == "ticklock.store"]
    assert said == [("store.rebuilding", 2), ("store.rebuilt", 2)]
    check = sqlite3.connect(path)
    assert check.execute("SELECT id, job_id FROM failures").fetchall() == [("e2", "j2")]
    check.close()
    caplog.clear()
    with caplog.at_level("WARNING", logger="ticklock.store"):
        SQLiteStore(path).close()  # once: a rebuilt file is not rebuilt again
    assert [r for r in caplog.records if r.name == "ticklock.store"] == []


def test_a_version_5_file_with_a_table_in_the_rebuilds_way_is_left_as_it_was(tmp_path: Path) -> None:
    from ticklock.errors import StoreUnavailable

    path = tmp_path / "v5-crowded.db"
    stored = _v5_file(path, [_row(1, "e1", "j1", "schedule", 1_767_225_600 * SECOND)])
    made = sqlite3.connect(path)  # not the migration's: it must be neither reused nor dropped
    made.execute("CREATE TABLE executions_rebuilt (note TEXT)")
    made.execute("INSERT INTO executions_rebuilt VALUES ('mine')")
    made.commit()
    made.close()
    with pytest.raises(StoreUnavailable, match="executions_rebuilt already exists"):
        SQLiteStore(path)
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA user_version").fetchone()[0] == 5
    assert check.execute(f"SELECT rowid, {COLUMNS} FROM executions ORDER BY rowid").fetchall() == stored
    assert check.execute("SELECT note FROM executions_rebuilt").fetchall() == [("mine",)]
    check.close()
