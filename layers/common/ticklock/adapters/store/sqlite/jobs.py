"""The ``JobStore`` role: add, read, list by id (the engine's sweeps), change and delete jobs; the jobs
table's pages and counts come from listing.py."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ticklock.adapters.records import open_alerts_text
from ticklock.adapters.store.sqlite.listing import Listing
from ticklock.adapters.store.sqlite.rows import DEFINITION_COLUMNS, job_from_row, job_row, job_values
from ticklock.adapters.store.sqlite.schema import JOB_COLUMNS, JOB_SLOTS
from ticklock.domain.jobs import Job, repeated_name
from ticklock.errors import DuplicateJobName, JobNotFound, StaleVersion
from ticklock.ports import JobStore

_INSERT_NEW = f"INSERT INTO jobs ({JOB_COLUMNS}) VALUES ({JOB_SLOTS}) ON CONFLICT (name) DO NOTHING"


class Jobs(Listing, JobStore):
    def add_job(self, job: Job) -> Job:
        row = job_row(job, job.created_at)
        # a group commit: creates sent together (many API clients) share their transaction. A name taken
        # is no error inside the group (that would undo its other writes, the runners' among them, and run
        # each again alone): the row is not inserted, and the create fails here, after the commit.
        try:
            inserted = self._write(lambda conn: conn.execute(_INSERT_NEW, row).rowcount)
        except sqlite3.IntegrityError as exc:  # a name taken is not one (DO NOTHING); the id, random, is all but
            raise DuplicateJobName(job.name) from exc
        if not inserted:
            raise DuplicateJobName(job.name)
        return job

    def add_jobs(self, jobs: Sequence[Job]) -> None:
        twice = repeated_name(jobs)
        if twice is not None:
            raise DuplicateJobName(jobs[twice[1]].name)
        rows = [job_row(job, job.created_at) for job in jobs]
        try:
            with self._tx() as conn:  # one transaction: an IntegrityError rolls every row back
                conn.executemany(f"INSERT INTO jobs ({JOB_COLUMNS}) VALUES ({JOB_SLOTS})", rows)
        except sqlite3.IntegrityError as exc:
            raise DuplicateJobName(self._taken([job.name for job in jobs]) or "(one of the batch)") from exc

    def _taken(self, names: list[str]) -> str | None:
        """The first of ``names`` a job in the store has (to say which one a batch collided on)."""

        def query(conn: sqlite3.Connection) -> set[str]:
            found: set[str] = set()
            for start in range(0, len(names), 500):
                chunk = names[start : start + 500]
                sql = f"SELECT name FROM jobs WHERE name IN ({', '.join('?' * len(chunk))})"
                found.update(row[0] for row in conn.execute(sql, chunk))
            return found

        taken = self._read(query)
        return next((name for name in names if name in taken), None)

    def get_job(self, job_id: str) -> Job:
        row = self._read(lambda c: c.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone())
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row)

    def find_job_by_name(self, name: str) -> Job | None:
        row = self._read(lambda c: c.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE name = ?", (name,)).fetchone())
        return None if row is None else job_from_row(row)

    def list_jobs(
        self,
        *,
        handler: str | None = None,
        enabled: bool | None = None,
        limit: int = 50,
        after: str | None = None,
        alerting: bool = False,
    ) -> list[Job]:
        clauses: list[str] = ["1=1"]
        args: list[Any] = []
        if alerting:
            clauses.append("(alerts IS NOT NULL OR open_alerts IS NOT NULL)")  # the partial index jobs_alerting
        if handler is not None:
            clauses.append("handler = ?")
            args.append(handler)
        if enabled is not None:
            clauses.append("enabled = ?")
            args.append(int(enabled))
        if after is not None:
            clauses.append("id > ?")
            args.append(after)
        sql = f"SELECT {JOB_COLUMNS} FROM jobs WHERE {' AND '.join(clauses)} ORDER BY id LIMIT ?"
        rows = self._read(lambda c: c.execute(sql, (*args, limit)).fetchall())
        return [job_from_row(r) for r in rows]

    def update_job(self, job: Job, *, expected_version: int) -> Job:
        try:
            with self._tx() as conn:
                row = conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?", (job.id,)).fetchone()
                if row is None:
                    raise JobNotFound(job.id)
                current = job_from_row(row)
                if current.version != expected_version:
                    raise StaleVersion(
                        f"job {job.id} changed meanwhile (version {current.version}, "
                        f"expected {expected_version}); fetch it and try again"
                    )
                stored = job.with_changes(
                    version=expected_version + 1,
                    lease=current.lease,
                    open_alerts=current.open_alerts,
                    last_run=current.last_run,
                )
                values = job_values(stored, stored.updated_at)
                conn.execute(
                    f"UPDATE jobs SET {', '.join(f'{c}=?' for c in DEFINITION_COLUMNS)} WHERE id=?",
                    (*(values[c] for c in DEFINITION_COLUMNS), stored.id),
                )
        except sqlite3.IntegrityError as exc:
            raise DuplicateJobName(job.name) from exc
        return stored

    def set_open_alerts(self, job_id: str, *, expected: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        with self._tx() as conn:
            changed = conn.execute(
                "UPDATE jobs SET open_alerts = ? WHERE id = ? AND open_alerts IS ?",
                (open_alerts_text(new), job_id, open_alerts_text(expected)),
            ).rowcount
        return bool(changed)

    def delete_job(self, job_id: str) -> None:
        with self._tx() as conn:
            if conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,)).rowcount == 0:
                raise JobNotFound(job_id)
            conn.execute("DELETE FROM executions WHERE job_id = ?", (job_id,))
            conn.execute("DELETE FROM ledger WHERE job_id = ?", (job_id,))
