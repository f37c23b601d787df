"""The embedded store: one SQLite file, safe for several processes on one machine.

Times are stored as integer microseconds since the epoch (UTC). Every write runs in a ``BEGIN
IMMEDIATE`` transaction, so two ``ticklock serve`` processes sharing the file serialise their claims;
the claim itself is one ``UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING`` statement. WAL mode
with ``synchronous=NORMAL``: a power cut can lose the last commits, never corrupt the file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from ticklock.domain.jobs import Execution, ExecutionStatus, Fire, Job, Lease, Trigger
from ticklock.domain.schedules import Schedule, schedule_from_dict, schedule_to_dict
from ticklock.errors import DuplicateJobName, JobNotFound, StaleVersion, StoreUnavailable
from ticklock.ports import Started

T = TypeVar("T")

SCHEMA_VERSION = 2  # 2: jobs.disabled_reason
_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS jobs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        handler TEXT NOT NULL,
        schedule TEXT NOT NULL,
        payload TEXT NOT NULL,
        timeout REAL NOT NULL,
        max_retries INTEGER NOT NULL,
        enabled INTEGER NOT NULL,
        next_run_at INTEGER,
        trigger_at INTEGER,
        due_at INTEGER,
        lease_token TEXT,
        lease_owner TEXT,
        lease_until INTEGER,
        version INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        disabled_reason TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS jobs_due ON jobs (due_at) WHERE due_at IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS jobs_handler ON jobs (handler, id)",
    """
    CREATE TABLE IF NOT EXISTS executions (
        id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        fire_key TEXT NOT NULL UNIQUE,
        handler TEXT NOT NULL,
        trigger TEXT NOT NULL,
        scheduled_at INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        deadline_at INTEGER NOT NULL,
        run_token TEXT NOT NULL,
        owner TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        resumes INTEGER NOT NULL,
        finished_at INTEGER,
        duration REAL,
        error TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS executions_job ON executions (job_id, scheduled_at DESC, id DESC)",
    "CREATE INDEX IF NOT EXISTS executions_finished ON executions (finished_at)",
]
_JOB_COLUMNS = (
    "id, name, handler, schedule, payload, timeout, max_retries, enabled, next_run_at, trigger_at, "
    "due_at, lease_token, lease_owner, lease_until, version, created_at, updated_at, disabled_reason"
)
_JOB_SLOTS = ", ".join("?" * len(_JOB_COLUMNS.split(",")))
_EXEC_COLUMNS = (
    "id, job_id, fire_key, handler, trigger, scheduled_at, started_at, deadline_at, run_token, "
    "owner, status, attempts, resumes, finished_at, duration, error"
)


def us(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def from_us_or_none(value: int | None) -> datetime | None:
    return None if value is None else from_us(value)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SQLiteStore:
    """The ``Store`` port on one SQLite file."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 30.0) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite store at {self.path}: {exc}") from exc
        self._mutex = threading.Lock()
        self._busy_timeout = busy_timeout
        # Reads go through a connection per thread: in WAL mode they never wait for a writer, so a write
        # lock held elsewhere (another process, a slow disk) delays writes only, not GETs or the health ping.
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._closed = False

    def _migrate(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreUnavailable(
                    f"{self.path} has schema version {version}; this ticklock knows {SCHEMA_VERSION}: upgrade ticklock"
                )
            for statement in _SCHEMA:
                self._conn.execute(statement)
            if version == 1:  # a file of the first schema: its jobs table has no disabled_reason yet
                self._conn.execute("ALTER TABLE jobs ADD COLUMN disabled_reason TEXT")
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    # -- plumbing ---------------------------------------------------------------------------------
    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        with self._mutex:
            try:
                self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"SQLite store {self.path}: {exc}") from exc
            try:
                yield self._conn
            except sqlite3.IntegrityError:
                self._conn.execute("ROLLBACK")
                raise
            except sqlite3.Error as exc:
                self._conn.execute("ROLLBACK")
                raise StoreUnavailable(f"SQLite store {self.path}: {exc}") from exc
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._conn.execute("ROLLBACK")
                    raise StoreUnavailable(f"SQLite store {self.path}: {exc}") from exc

    def _read(self, func: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._reader()
        if conn is None:
            with self._tx(write=False) as shared:
                return func(shared)
        try:
            conn.execute("BEGIN")
            try:
                return func(conn)
            finally:
                if conn.in_transaction:  # never leave this thread's connection inside a transaction
                    try:
                        conn.execute("COMMIT")
                    except sqlite3.Error:
                        conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite store {self.path}: {exc}") from exc

    def _reader(self) -> sqlite3.Connection | None:
        if self.path == ":memory:":
            return None  # a second connection would be a second, empty database
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            with self._mutex:
                if self._closed:
                    raise StoreUnavailable(f"SQLite store {self.path} is closed")
                try:
                    conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None,
                                           check_same_thread=False)  # fmt: skip
                except sqlite3.Error as exc:
                    raise StoreUnavailable(f"cannot open SQLite store at {self.path}: {exc}") from exc
                self._readers.append(conn)
            self._local.conn = conn
        return conn

    # -- jobs -------------------------------------------------------------------------------------
    def add_job(self, job: Job) -> Job:
        now = job.created_at
        try:
            with self._tx() as conn:
                conn.execute(f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES ({_JOB_SLOTS})", _job_row(job, now))
        except sqlite3.IntegrityError as exc:
            raise DuplicateJobName(job.name) from exc
        return job

    def add_jobs(self, jobs: list[Job]) -> None:
        """Insert many new jobs in one transaction (seeding, benchmarks). Raises ``DuplicateJobName``."""
        try:
            with self._tx() as conn:
                conn.executemany(
                    f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES ({_JOB_SLOTS})",
                    [_job_row(job, job.created_at) for job in jobs],
                )
        except sqlite3.IntegrityError as exc:
            raise DuplicateJobName("(one of the batch)") from exc

    def get_job(self, job_id: str) -> Job:
        row = self._read(lambda c: c.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone())
        if row is None:
            raise JobNotFound(job_id)
        return _job(row)

    def find_job_by_name(self, name: str) -> Job | None:
        row = self._read(lambda c: c.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE name = ?", (name,)).fetchone())
        return None if row is None else _job(row)

    def list_jobs(
        self, *, handler: str | None = None, enabled: bool | None = None, limit: int = 50, after: str | None = None
    ) -> list[Job]:
        clauses: list[str] = ["1=1"]
        args: list[Any] = []
        if handler is not None:
            clauses.append("handler = ?")
            args.append(handler)
        if enabled is not None:
            clauses.append("enabled = ?")
            args.append(int(enabled))
        if after is not None:
            clauses.append("id > ?")
            args.append(after)
        sql = f"SELECT {_JOB_COLUMNS} FROM jobs WHERE {' AND '.join(clauses)} ORDER BY id LIMIT ?"
        rows = self._read(lambda c: c.execute(sql, (*args, limit)).fetchall())
        return [_job(r) for r in rows]

    def update_job(self, job: Job, *, expected_version: int) -> Job:
        try:
            with self._tx() as conn:
                row = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job.id,)).fetchone()
                if row is None:
                    raise JobNotFound(job.id)
                current = _job(row)
                if current.version != expected_version:
                    raise StaleVersion(
                        f"job {job.id} changed meanwhile (version {current.version}, "
                        f"expected {expected_version}); fetch it and try again"
                    )
                stored = job.with_changes(version=expected_version + 1, lease=current.lease)
                conn.execute(
                    "UPDATE jobs SET name=?, handler=?, schedule=?, payload=?, timeout=?, max_retries=?, "
                    "enabled=?, next_run_at=?, trigger_at=?, due_at=?, version=?, updated_at=?, disabled_reason=? "
                    "WHERE id=?",
                    (
                        stored.name,
                        stored.handler,
                        json.dumps(schedule_to_dict(stored.schedule)),
                        json.dumps(stored.payload),
                        stored.timeout,
                        stored.max_retries,
                        int(stored.enabled),
                        us(stored.next_run_at),
                        us(stored.trigger_at),
                        us(stored.due_at(stored.updated_at)),
                        stored.version,
                        us(stored.updated_at),
                        stored.disabled_reason,
                        stored.id,
                    ),
                )
        except sqlite3.IntegrityError as exc:
            raise DuplicateJobName(job.name) from exc
        return stored

    def delete_job(self, job_id: str) -> None:
        with self._tx() as conn:
            if conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,)).rowcount == 0:
                raise JobNotFound(job_id)
            conn.execute("DELETE FROM executions WHERE job_id = ?", (job_id,))

    # -- dispatch ---------------------------------------------------------------------------------
    def claim_due(self, *, now: datetime, horizon: datetime, limit: int, owner: str, slack: timedelta) -> list[Job]:
        token = uuid.uuid4().hex
        with self._tx() as conn:
            rows = conn.execute(
                f"""UPDATE jobs SET lease_token = ?, lease_owner = ?,
                        lease_until = ? + CAST(timeout * 1000 AS INTEGER) * 1000 + ?,
                        due_at = ? + CAST(timeout * 1000 AS INTEGER) * 1000 + ?
                    WHERE id IN (SELECT id FROM jobs WHERE due_at <= ? ORDER BY due_at LIMIT ?)
                    RETURNING {_JOB_COLUMNS}""",
                (token, owner, us(horizon), us_delta(slack), us(horizon), us_delta(slack), us(horizon), limit),
            ).fetchall()
        jobs = [_job(r) for r in rows]
        jobs.sort(key=lambda j: (j.pending_at(), j.id))
        return jobs

    def release(self, job_id: str, lease_token: str) -> None:
        with self._tx() as conn:
            row = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ? AND lease_token = ?", (job_id, lease_token)
            ).fetchone()
            if row is None:
                return
            job = _job(row).with_changes(lease=None)
            conn.execute(
                "UPDATE jobs SET lease_token=NULL, lease_owner=NULL, lease_until=NULL, due_at=? WHERE id=?",
                (us(job.due_at(_now())), job_id),
            )

    def advance(self, fire: Fire, *, next_run_at: datetime | None, now: datetime) -> bool:
        with self._tx() as conn:
            return _advance(conn, fire, next_run_at, now)

    # -- executions -------------------------------------------------------------------------------
    def start_execution(self, execution: Execution) -> Started:
        with self._tx() as conn:
            inserted = conn.execute(
                f"INSERT INTO executions ({_EXEC_COLUMNS}) VALUES ({', '.join('?' * 16)}) "
                "ON CONFLICT(fire_key) DO NOTHING",
                _exec_row(execution),
            ).rowcount
            if inserted:
                return Started(execution, created=True)
            row = conn.execute(
                f"SELECT {_EXEC_COLUMNS} FROM executions WHERE fire_key = ?", (execution.fire_key,)
            ).fetchone()
        return Started(_execution(row), created=False)

    def take_over_execution(self, execution: Execution, *, previous_token: str) -> bool:
        with self._tx() as conn:
            changed = conn.execute(
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
        return bool(changed)

    def finish_execution(self, execution: Execution) -> bool:
        with self._tx() as conn:
            return _finish(conn, execution)

    def complete(
        self, execution: Execution, fire: Fire, *, next_run_at: datetime | None, now: datetime
    ) -> tuple[bool, bool]:
        with self._tx() as conn:
            if not _finish(conn, execution):
                return False, False
            return True, _advance(conn, fire, next_run_at, now)

    def get_execution(self, execution_id: str) -> Execution:
        row = self._read(
            lambda c: c.execute(f"SELECT {_EXEC_COLUMNS} FROM executions WHERE id = ?", (execution_id,)).fetchone()
        )
        if row is None:
            raise JobNotFound(execution_id)
        return _execution(row)

    def list_executions(self, job_id: str, *, limit: int = 50, before: str | None = None) -> list[Execution]:
        def query(conn: sqlite3.Connection) -> list[Any]:
            if before is None:
                return conn.execute(
                    f"SELECT {_EXEC_COLUMNS} FROM executions WHERE job_id = ? "
                    "ORDER BY scheduled_at DESC, id DESC LIMIT ?",
                    (job_id, limit),
                ).fetchall()
            anchor = conn.execute(
                "SELECT scheduled_at, id FROM executions WHERE id = ? AND job_id = ?", (before, job_id)
            ).fetchone()
            if anchor is None:
                return []
            return conn.execute(
                f"SELECT {_EXEC_COLUMNS} FROM executions WHERE job_id = ? AND (scheduled_at < ? OR "
                "(scheduled_at = ? AND id < ?)) ORDER BY scheduled_at DESC, id DESC LIMIT ?",
                (job_id, anchor[0], anchor[0], anchor[1], limit),
            ).fetchall()

        return [_execution(r) for r in self._read(query)]

    def prune_executions(self, *, older_than: datetime, keep_per_job: int) -> int:
        final = "status NOT IN ('running', 'interrupted')"
        with self._tx() as conn:
            gone = conn.execute(f"DELETE FROM executions WHERE {final} AND finished_at < ?", (us(older_than),)).rowcount
            gone += conn.execute(
                f"""DELETE FROM executions WHERE id IN (
                        SELECT id FROM (
                            SELECT id, ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY scheduled_at DESC) AS n
                            FROM executions WHERE {final})
                        WHERE n > ?)""",
                (keep_per_job,),
            ).rowcount
        return int(gone)

    def ping(self) -> None:
        self._read(lambda c: c.execute("SELECT 1 FROM jobs LIMIT 1").fetchone())

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            for reader in self._readers:
                reader.close()
            self._readers.clear()
            self._conn.close()


def _finish(conn: sqlite3.Connection, execution: Execution) -> bool:
    changed = conn.execute(
        "UPDATE executions SET status=?, attempts=?, finished_at=?, duration=?, error=? "
        "WHERE id=? AND run_token=? AND status IN ('running', 'interrupted')",
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
    return bool(changed)


def _advance(conn: sqlite3.Connection, fire: Fire, next_run_at: datetime | None, now: datetime) -> bool:
    row = conn.execute(
        f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ? AND lease_token = ?", (fire.job.id, fire.lease_token)
    ).fetchone()
    if row is None:
        return False
    job = _job(row).advanced(fire, next_run_at)
    conn.execute(
        "UPDATE jobs SET next_run_at=?, enabled=?, trigger_at=?, due_at=?, lease_token=NULL, "
        "lease_owner=NULL, lease_until=NULL, version=version+1 WHERE id=?",
        (us(job.next_run_at), int(job.enabled), us(job.trigger_at), us(job.due_at(now)), job.id),
    )
    return True


def us_delta(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _now() -> datetime:
    return datetime.now(UTC)


def _job_row(job: Job, now: datetime) -> tuple[Any, ...]:
    return (
        job.id,
        job.name,
        job.handler,
        json.dumps(schedule_to_dict(job.schedule)),
        json.dumps(job.payload),
        job.timeout,
        job.max_retries,
        int(job.enabled),
        us(job.next_run_at),
        us(job.trigger_at),
        us(job.due_at(now)),
        job.lease.token if job.lease else None,
        job.lease.owner if job.lease else None,
        us(job.lease.until) if job.lease else None,
        job.version,
        us(job.created_at),
        us(job.updated_at),
        job.disabled_reason,
    )


@lru_cache(maxsize=4096)
def _schedule(text: str) -> Schedule:
    # schedules are frozen values, and most jobs share a handful of them: parse each text once
    return schedule_from_dict(json.loads(text))


def _job(row: tuple[Any, ...]) -> Job:
    lease = Lease(row[11], row[12], from_us(row[13])) if row[11] else None
    return Job(
        id=row[0],
        name=row[1],
        handler=row[2],
        schedule=_schedule(row[3]),
        payload=json.loads(row[4]),
        timeout=row[5],
        max_retries=row[6],
        enabled=bool(row[7]),
        next_run_at=from_us_or_none(row[8]),
        trigger_at=from_us_or_none(row[9]),
        lease=lease,
        version=row[14],
        created_at=from_us(row[15]),
        updated_at=from_us(row[16]),
        disabled_reason=row[17],
    )


def _exec_row(e: Execution) -> tuple[Any, ...]:
    return (
        e.id,
        e.job_id,
        e.fire_key,
        e.handler,
        e.trigger.value,
        us(e.scheduled_at),
        us(e.started_at),
        us(e.deadline_at),
        e.run_token,
        e.owner,
        e.status.value,
        e.attempts,
        e.resumes,
        us(e.finished_at),
        e.duration,
        e.error,
    )


def _execution(row: tuple[Any, ...]) -> Execution:
    return Execution(
        id=row[0],
        job_id=row[1],
        fire_key=row[2],
        handler=row[3],
        trigger=Trigger(row[4]),
        scheduled_at=from_us(row[5]),
        started_at=from_us(row[6]),
        deadline_at=from_us(row[7]),
        run_token=row[8],
        owner=row[9],
        status=ExecutionStatus(row[10]),
        attempts=row[11],
        resumes=row[12],
        finished_at=from_us_or_none(row[13]),
        duration=row[14],
        error=row[15],
    )
