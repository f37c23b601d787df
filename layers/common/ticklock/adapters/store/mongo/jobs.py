"""The ``JobStore`` role: add, read, list, page, count, change and delete jobs."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.errors import BulkWriteError, DuplicateKeyError

from ticklock.adapters.records import open_alerts_text
from ticklock.adapters.store.mongo.client import DUPLICATE_KEY, Doc
from ticklock.adapters.store.mongo.connection import Connection
from ticklock.adapters.store.mongo.documents import (
    definition_doc,
    job_doc,
    job_from_doc,
    ms,
    ms_or_none,
    setting,
)
from ticklock.domain.executions import FAILED_STATUSES
from ticklock.domain.jobs import Job, repeated_name
from ticklock.domain.states import JOB_FILTERS
from ticklock.errors import DuplicateJobName, JobNotFound, StaleVersion, StoreUnavailable
from ticklock.ports import JOB_TIME_SORTS, JobQuery, JobStore


def states(now: datetime) -> dict[str, Doc]:
    """Each state and condition as a filter (``domain.states``; the counts and the jobs table share them),
    a timed hold's end compared with ``now``."""
    at = ms(now)
    return {
        "enabled": {"enabled": True, "$or": [{"hold_until": None}, {"hold_until": {"$lte": at}}]},
        "paused": {"enabled": False, "disabled_reason": None, "next_run_at": {"$ne": None}},
        "held": {"enabled": True, "hold_until": {"$gt": at}},
        "disabled": {"enabled": False, "disabled_reason": {"$ne": None}},
        "done": {"enabled": False, "disabled_reason": None, "next_run_at": None},
        "failing": {"last_status": {"$in": [s.value for s in FAILED_STATUSES]}},
        "alerting": {"open_alerts": {"$ne": None}},
    }


assert tuple(states(datetime.now(UTC))) == JOB_FILTERS
_NOT_ENABLED = ("paused", "disabled", "done")
# by next fire only enabled jobs have a value (a paused job keeps a next_run_at it will not fire at)
_HAS_VALUE: dict[str, Doc] = {
    "next_run_at": {"enabled": True, "next_run_at": {"$ne": None}},
    "last_at": {"last_at": {"$ne": None}},
}
_NO_VALUE: dict[str, Doc] = {
    "next_run_at": {"$or": [{"enabled": False}, {"next_run_at": None}]},
    "last_at": {"last_at": None},
}


class Jobs(Connection, JobStore):
    def add_job(self, job: Job) -> Job:
        try:
            self._call(lambda: self.jobs.insert_one(job_doc(job, job.created_at)))
        except DuplicateKeyError as exc:
            raise DuplicateJobName(job.name) from exc
        return job

    def add_jobs(self, jobs: Sequence[Job]) -> None:
        """All or none without a transaction (FerretDB has none): a taken name is looked for first, and a
        batch that loses a race for one to a concurrent create is undone by deleting what it inserted (its
        ids are its own). In those milliseconds its jobs can be read, and one due at once claimed."""
        twice = repeated_name(jobs)
        if twice is not None:
            raise DuplicateJobName(jobs[twice[1]].name)
        if not jobs:
            return
        names = [job.name for job in jobs]
        taken = self._taken(names)
        if taken is not None:
            raise DuplicateJobName(taken)
        docs = [job_doc(job, job.created_at) for job in jobs]

        def insert() -> BulkWriteError | None:
            try:
                self.jobs.insert_many(docs, ordered=True)
            except BulkWriteError as exc:
                return exc  # some went in: undone below
            return None

        def undo() -> None:
            self._call(lambda: self.jobs.delete_many({"_id": {"$in": [job.id for job in jobs]}}))

        try:
            failed = self._call(insert)
        except StoreUnavailable:
            undo()
            raise
        if failed is None:
            return
        undo()
        if any(e.get("code") == DUPLICATE_KEY for e in failed.details.get("writeErrors", [])):
            raise DuplicateJobName(self._taken(names) or "(one of the batch)") from failed
        raise StoreUnavailable(f"MongoDB: {failed}") from failed

    def _taken(self, names: list[str]) -> str | None:
        """The first of ``names`` a job in the store has."""
        found = self._call(lambda: list(self.jobs.find({"name": {"$in": names}}, {"name": 1})))
        taken = {doc["name"] for doc in found}
        return next((name for name in names if name in taken), None)

    def get_job(self, job_id: str) -> Job:
        doc = self._call(lambda: self.jobs.find_one({"_id": job_id}))
        if doc is None:
            raise JobNotFound(job_id)
        return job_from_doc(doc)

    def find_job_by_name(self, name: str) -> Job | None:
        doc = self._call(lambda: self.jobs.find_one({"name": name}))
        return None if doc is None else job_from_doc(doc)

    def list_jobs(
        self,
        *,
        handler: str | None = None,
        enabled: bool | None = None,
        limit: int = 50,
        after: str | None = None,
        alerting: bool = False,
    ) -> list[Job]:
        query: Doc = {}
        if alerting:
            query["$or"] = [{"alerts": {"$ne": None}}, {"open_alerts": {"$ne": None}}]
        if handler is not None:
            query["handler"] = handler
        if enabled is not None:
            query["enabled"] = enabled
        if after is not None:
            query["_id"] = {"$gt": after}
        docs = self._call(lambda: list(self.jobs.find(query).sort("_id", ASCENDING).limit(limit)))
        return [job_from_doc(d) for d in docs]

    def find_jobs(self, query: JobQuery, *, limit: int) -> list[Job]:
        conditions: list[Doc] = []
        if query.search:
            pattern = {"$regex": re.escape(query.search), "$options": "i"}
            conditions.append({"$or": [{"name": pattern}, {"handler": pattern}]})
        if query.handler is not None:
            conditions.append({"handler": query.handler})
        if query.enabled is not None:
            conditions.append({"enabled": query.enabled})
        if query.state is not None:
            conditions.append(states(query.at or datetime.now(UTC))[query.state])
        if query.outcome is not None:
            conditions.append({"last_status": None if query.outcome == "none" else query.outcome})
        way = DESCENDING if query.descending else ASCENDING
        beyond = "$lt" if query.descending else "$gt"
        if query.sort in JOB_TIME_SORTS:
            return self._by_time(query, conditions, limit)
        column = "_id" if query.sort == "id" else query.sort
        if query.after is not None:
            value, last_id = query.after
            conditions.append({"$or": [{column: {beyond: value}}, {column: value, "_id": {beyond: last_id}}]})
        order = [(column, way)] + ([("_id", way)] if column != "_id" else [])
        return self._page(conditions, order, limit)

    def _by_time(self, query: JobQuery, conditions: list[Doc], limit: int) -> list[Job]:
        """A page by a time some jobs lack: those with a value in its order, then those without by id. The
        cursor's value says which part it is in (None: the second)."""
        column, way = query.sort, DESCENDING if query.descending else ASCENDING
        beyond = "$lt" if query.descending else "$gt"
        value, last_id = query.after if query.after is not None else (None, None)
        jobs: list[Job] = []
        none_have_one = column == "next_run_at" and query.state in _NOT_ENABLED
        if (query.after is None or value is not None) and not none_have_one:
            cursor: list[Doc] = []
            if value is not None:
                at = ms_or_none(value)
                cursor = [{"$or": [{column: {beyond: at}}, {column: at, "_id": {beyond: last_id}}]}]
            jobs = self._page([*conditions, _HAS_VALUE[column], *cursor], [(column, way), ("_id", way)], limit)
        if len(jobs) < limit:
            after = [{"_id": {beyond: last_id}}] if query.after is not None and value is None else []
            jobs += self._page([*conditions, _NO_VALUE[column], *after], [("_id", way)], limit - len(jobs))
        return jobs

    def _page(self, conditions: list[Doc], order: list[tuple[str, int]], limit: int) -> list[Job]:
        found = {"$and": conditions} if conditions else {}
        docs = self._call(lambda: list(self.jobs.find(found).sort(order).limit(limit)))
        return [job_from_doc(d) for d in docs]

    def count_jobs(self, now: datetime) -> dict[str, int]:
        def count() -> dict[str, int]:
            counts = {state: self.jobs.count_documents(condition) for state, condition in states(now).items()}
            return {"total": self.jobs.count_documents({}), **counts}

        return self._call(count)

    def set_open_alerts(self, job_id: str, *, expected: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        # A conditional update alone is not exclusive on FerretDB 1.24 (see the package's docstring): as a
        # claim does, the winner of each state is the one whose mark ``<job>:alerts:<alerts_seq>`` inserts.
        def change() -> bool:
            doc = self.jobs.find_one({"_id": job_id}, {"open_alerts": 1, "alerts_seq": 1})
            if doc is None or doc.get("open_alerts") != open_alerts_text(expected):
                return False
            seq = doc.get("alerts_seq", 0)
            mark = f"{job_id}:alerts:{seq}"
            try:
                self.claims.insert_one({"_id": mark, "at": ms(datetime.now(UTC))})
            except DuplicateKeyError:
                return False
            try:
                changed = self.jobs.update_one(
                    {"_id": job_id, "alerts_seq": doc.get("alerts_seq")},
                    {"$set": {"open_alerts": open_alerts_text(new)}, "$inc": {"alerts_seq": 1}},
                ).modified_count
            except Exception:
                self.claims.delete_one({"_id": mark})  # the state did not move on: the next writer may
                raise
            if not changed:
                self.claims.delete_one({"_id": mark})
            return changed == 1

        return self._call(change)

    def update_job(self, job: Job, *, expected_version: int) -> Job:
        def write() -> Job:
            current = self.jobs.find_one({"_id": job.id})
            if current is None:
                raise JobNotFound(job.id)
            held = job_from_doc(current)
            stored = job.with_changes(
                version=expected_version + 1, lease=held.lease, open_alerts=held.open_alerts, last_run=held.last_run
            )
            fields = definition_doc(stored)
            fields["due_at"] = ms_or_none(stored.due_at(stored.updated_at))
            # seq too: a claim between our read and this write moves seq, not version, and its lease must
            # not be overwritten with a stale due_at
            result = self.jobs.update_one(
                {"_id": job.id, "version": expected_version, "seq": current.get("seq", 0)},
                {**setting(fields), "$inc": {"seq": 1}},
            )
            if result.matched_count == 0:
                raise StaleVersion(
                    f"job {job.id} changed meanwhile (expected version {expected_version}); fetch it and try again"
                )
            return stored

        try:
            return self._call(write)
        except DuplicateKeyError as exc:
            raise DuplicateJobName(job.name) from exc
        except StoreUnavailable as exc:
            # FerretDB 1.24 reports a unique-index violation on update as InternalError (code 1), not 11000,
            # with its backend's own words (SQLite's or PostgreSQL's)
            text = str(exc)
            if "name_unique" in text and ("UNIQUE constraint failed" in text or "SQLSTATE 23505" in text):
                raise DuplicateJobName(job.name) from exc
            raise

    def delete_job(self, job_id: str) -> None:
        def delete() -> None:
            if self.jobs.delete_one({"_id": job_id}).deleted_count == 0:
                raise JobNotFound(job_id)
            self.executions.delete_many({"job_id": job_id})
            self.ledger.delete_many({"job_id": job_id})

        self._call(delete)
