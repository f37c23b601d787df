"""The ``ExecutionStore`` role: read executions and prune the old ones."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ticklock.adapters.store.sqlite.connection import Connection
from ticklock.adapters.store.sqlite.fires import BY_FIRE
from ticklock.adapters.store.sqlite.rows import execution_from_row, from_us, us
from ticklock.adapters.store.sqlite.schema import EXEC_COLUMNS
from ticklock.domain.executions import Execution
from ticklock.domain.fires import Trigger
from ticklock.errors import JobNotFound
from ticklock.ports import ExecutionStore


class Executions(Connection, ExecutionStore):
    def get_execution(self, execution_id: str) -> Execution:
        row = self._read(
            lambda c: c.execute(f"SELECT {EXEC_COLUMNS} FROM executions WHERE id = ?", (execution_id,)).fetchone()
        )
        if row is None:
            raise JobNotFound(execution_id)
        return execution_from_row(row)

    def list_executions(self, job_id: str, *, limit: int = 50, before: str | None = None) -> list[Execution]:
        def query(conn: sqlite3.Connection) -> list[Any]:
            if before is None:
                return conn.execute(
                    f"SELECT {EXEC_COLUMNS} FROM executions WHERE job_id = ? "
                    "ORDER BY scheduled_at DESC, id DESC LIMIT ?",
                    (job_id, limit),
                ).fetchall()
            anchor = conn.execute(
                "SELECT scheduled_at, id FROM executions WHERE id = ? AND job_id = ?", (before, job_id)
            ).fetchone()
            if anchor is None:
                return []
            return conn.execute(
                f"SELECT {EXEC_COLUMNS} FROM executions WHERE job_id = ? AND scheduled_at <= ? AND (scheduled_at < ? "
                "OR id < ?) ORDER BY scheduled_at DESC, id DESC LIMIT ?",  # a range of executions_fire
                (job_id, anchor[0], anchor[0], anchor[1], limit),
            ).fetchall()

        return [execution_from_row(r) for r in self._read(query)]

    def executions_between(
        self,
        job_id: str | None,
        *,
        start: datetime,
        end: datetime,
        limit: int,
        statuses: Sequence[str] | None = None,
    ) -> list[Execution]:
        clauses = ["scheduled_at >= ?", "scheduled_at <= ?"]
        args: list[Any] = [us(start), us(end)]
        if job_id is not None:
            clauses.append("job_id = ?")
            args.append(job_id)
        if statuses is not None:
            clauses.append(f"status IN ({', '.join('?' * len(statuses))})")
            args.extend(statuses)
        sql = (
            f"SELECT {EXEC_COLUMNS} FROM executions WHERE {' AND '.join(clauses)} "
            "ORDER BY scheduled_at DESC, id DESC LIMIT ?"
        )
        rows = self._read(lambda c: c.execute(sql, (*args, limit)).fetchall())
        return [execution_from_row(r) for r in rows]

    def lags(self, *, start: datetime, end: datetime, limit: int) -> list[float]:
        sql = (
            "SELECT (started_at - scheduled_at) / 1e6 - COALESCE(jitter, 0) FROM executions "
            "WHERE scheduled_at >= ? AND scheduled_at <= ? ORDER BY scheduled_at DESC, id DESC LIMIT ?"
        )
        rows = self._read(lambda c: c.execute(sql, (us(start), us(end), limit)).fetchall())
        return [r[0] for r in rows]

    def activity(self, *, start: datetime, end: datetime, step: timedelta) -> list[tuple[datetime, str, int]]:
        width = int(step.total_seconds()) * 1_000_000
        sql = (
            "SELECT scheduled_at / ? * ? AS bucket, status, COUNT(*) FROM executions "
            "WHERE scheduled_at >= ? AND scheduled_at < ? GROUP BY bucket, status ORDER BY bucket, status"
        )
        rows = self._read(lambda c: c.execute(sql, (width, width, us(start), us(end))).fetchall())
        return [(from_us(bucket), status, count) for bucket, status, count in rows]

    def execution_for(self, job_id: str, trigger: Trigger, scheduled_at: datetime) -> Execution | None:
        row = self._read(lambda c: c.execute(BY_FIRE, (job_id, us(scheduled_at), trigger.value)).fetchone())
        return None if row is None else execution_from_row(row)

    def open_executions(self, *, deadline_before: datetime, limit: int) -> list[Execution]:
        sql = (
            f"SELECT {EXEC_COLUMNS} FROM executions WHERE detached = 1 AND status IN ('running', 'interrupted') "
            "AND deadline_at < ? ORDER BY deadline_at LIMIT ?"
        )  # literal values, so that SQLite uses the partial index executions_detached
        rows = self._read(lambda c: c.execute(sql, (us(deadline_before), limit)).fetchall())
        return [execution_from_row(r) for r in rows]

    def prune_executions(self, *, older_than: datetime, keep_per_job: int) -> int:
        cutoff = (us(older_than),)
        with self._tx() as conn:
            gone = conn.execute(f"DELETE FROM executions WHERE {_FINAL} AND finished_at < ?", cutoff).rowcount
            gone += conn.execute("DELETE FROM ledger WHERE last_at < ?", cutoff).rowcount
        # Each job's history beyond keep_per_job is found on a read snapshot, without the write lock, and
        # deleted a chunk at a time: one DELETE ranking every execution would hold the write lock while it
        # ranks them all, with every runner's write waiting. A row found is
        # old and final, and stays so: fires that finish meanwhile only add newer rows.
        beyond = self._read(lambda conn: _beyond(conn, keep_per_job))
        for start in range(0, len(beyond), PRUNE_CHUNK):
            chunk = beyond[start : start + PRUNE_CHUNK]
            with self._tx() as conn:
                sql = f"DELETE FROM executions WHERE id IN ({', '.join('?' * len(chunk))}) AND {_FINAL}"
                gone += conn.execute(sql, chunk).rowcount
        return int(gone)


_FINAL = "status NOT IN ('running', 'interrupted')"
PRUNE_CHUNK = 500  # executions deleted in one write transaction when pruning a history


def _beyond(conn: sqlite3.Connection, keep: int) -> list[str]:
    """The final executions, backfills aside, past each job's ``keep`` newest by scheduled time. Only the
    jobs with more than ``keep`` executions of any kind are looked at (one pass over executions_fire)."""
    crowded = [
        row[0] for row in conn.execute("SELECT job_id FROM executions GROUP BY job_id HAVING COUNT(*) > ?", (keep,))
    ]
    ids: list[str] = []
    for job_id in crowded:
        rows = conn.execute(
            f"""SELECT id FROM executions WHERE job_id = ? AND {_FINAL} AND trigger != 'backfill'
                ORDER BY scheduled_at DESC, id DESC LIMIT -1 OFFSET ?""",
            (job_id, keep),
        )
        ids.extend(row[0] for row in rows)
    return ids
