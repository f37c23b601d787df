"""The ``ExecutionStore`` role: read executions and prune the old ones."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from pymongo import ASCENDING, DESCENDING

from ticklock.adapters.store.mongo.client import Doc
from ticklock.adapters.store.mongo.connection import CLAIM_MARKS_KEPT, Connection
from ticklock.adapters.store.mongo.documents import (
    LIVE,
    execution_from_doc,
    ms,
)
from ticklock.domain.executions import Execution
from ticklock.domain.fires import Trigger, fire_key
from ticklock.errors import JobNotFound
from ticklock.ports import ExecutionStore


def to_ms_int(moment: datetime) -> int:
    """Milliseconds since the epoch (BSON dates are whole milliseconds)."""
    return round(moment.timestamp() * 1000)


class Executions(Connection, ExecutionStore):
    def get_execution(self, execution_id: str) -> Execution:
        doc = self._call(lambda: self.executions.find_one({"_id": execution_id}))
        if doc is None:
            raise JobNotFound(execution_id)
        return execution_from_doc(doc)

    def list_executions(self, job_id: str, *, limit: int = 50, before: str | None = None) -> list[Execution]:
        order = [("scheduled_at", DESCENDING), ("_id", DESCENDING)]

        def query() -> list[Doc]:
            if before is None:
                return list(self.executions.find({"job_id": job_id}).sort(order).limit(limit))
            anchor = self.executions.find_one({"_id": before, "job_id": job_id})
            if anchor is None:
                return []
            at = anchor["scheduled_at"]
            return list(
                self.executions.find(
                    {
                        "job_id": job_id,
                        "$or": [{"scheduled_at": {"$lt": at}}, {"scheduled_at": at, "_id": {"$lt": before}}],
                    }
                )
                .sort(order)
                .limit(limit)
            )

        return [execution_from_doc(d) for d in self._call(query)]

    def executions_between(
        self,
        job_id: str | None,
        *,
        start: datetime,
        end: datetime,
        limit: int,
        statuses: Sequence[str] | None = None,
    ) -> list[Execution]:
        query: Doc = {"scheduled_at": {"$gte": start, "$lte": end}}
        if job_id is not None:
            query["job_id"] = job_id
        if statuses is not None:
            query["status"] = {"$in": list(statuses)}
        order = [("scheduled_at", DESCENDING), ("_id", DESCENDING)]
        return [
            execution_from_doc(d)
            for d in self._call(lambda: list(self.executions.find(query).sort(order).limit(limit)))
        ]

    def lags(self, *, start: datetime, end: datetime, limit: int) -> list[float]:
        query = {"scheduled_at": {"$gte": start, "$lte": end}}
        fields = {"scheduled_at": 1, "started_at": 1, "jitter": 1}
        order = [("scheduled_at", DESCENDING), ("_id", DESCENDING)]
        docs = self._call(lambda: list(self.executions.find(query, fields).sort(order).limit(limit)))
        return [(d["started_at"] - d["scheduled_at"]).total_seconds() - (d.get("jitter") or 0.0) for d in docs]

    def activity(self, *, start: datetime, end: datetime, step: timedelta) -> list[tuple[datetime, str, int]]:
        # FerretDB 1.24 groups by field paths only (no date arithmetic in $group): counted per distinct
        # fire time and status (fires share whole seconds, so a few thousand groups an hour), then bucketed
        width = int(step.total_seconds()) * 1000
        groups = self._call(
            lambda: list(
                self.executions.aggregate(
                    [
                        {"$match": {"scheduled_at": {"$gte": ms(start), "$lt": ms(end)}}},
                        {"$group": {"_id": {"at": "$scheduled_at", "status": "$status"}, "n": {"$sum": 1}}},
                    ]
                )
            )
        )
        buckets: dict[tuple[int, str], int] = {}
        for group in groups:
            bucket = to_ms_int(group["_id"]["at"]) // width * width
            key = (bucket, group["_id"]["status"])
            buckets[key] = buckets.get(key, 0) + group["n"]
        return [
            (datetime.fromtimestamp(bucket / 1000, UTC), status, n) for (bucket, status), n in sorted(buckets.items())
        ]

    def execution_for(self, job_id: str, trigger: Trigger, scheduled_at: datetime) -> Execution | None:
        key = fire_key(job_id, trigger, scheduled_at)
        doc = self._call(lambda: self.executions.find_one({"fire_key": key}))
        return None if doc is None else execution_from_doc(doc)

    def open_executions(self, *, deadline_before: datetime, limit: int) -> list[Execution]:
        query: Doc = {"detached": True, "status": {"$in": LIVE}, "deadline_at": {"$lt": deadline_before}}
        found = self._call(lambda: list(self.executions.find(query).sort("deadline_at", ASCENDING).limit(limit)))
        return [execution_from_doc(d) for d in found]

    def prune_executions(self, *, older_than: datetime, keep_per_job: int) -> int:
        final: Doc = {"status": {"$nin": LIVE}}
        counted: Doc = {**final, "trigger": {"$ne": "backfill"}}

        def prune() -> int:
            # a claim mark matters only between its insert and the lease write that moves seq on
            self.claims.delete_many({"at": {"$lt": ms(datetime.now(UTC) - CLAIM_MARKS_KEPT)}})
            gone = self.executions.delete_many({**final, "finished_at": {"$lt": older_than}}).deleted_count
            crowded = self.executions.aggregate(
                [
                    {"$match": counted},
                    {"$group": {"_id": "$job_id", "n": {"$sum": 1}}},
                    {"$match": {"n": {"$gt": keep_per_job}}},
                ]
            )
            for group in crowded:
                keep = list(
                    self.executions.find({**counted, "job_id": group["_id"]}, {"_id": 1})
                    .sort([("scheduled_at", DESCENDING), ("_id", DESCENDING)])
                    .limit(keep_per_job)
                )
                gone += self.executions.delete_many(
                    {**counted, "job_id": group["_id"], "_id": {"$nin": [d["_id"] for d in keep]}}
                ).deleted_count
            gone += self.ledger.delete_many({"last_at": {"$lt": older_than}}).deleted_count
            return int(gone)

        return self._call(prune)
