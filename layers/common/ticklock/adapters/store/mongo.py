"""The production store: MongoDB (tested on FerretDB 1.24 and, when MONGODB_URI is set, on MongoDB).

Documents (times are BSON dates, so millisecond precision; ids are strings):

* ``jobs``: ``_id, name, handler, schedule{kind,...}, payload (JSON text), timeout, max_retries, enabled, next_run_at,
  trigger_at, due_at, lease_token, lease_owner, lease_until, version, created_at, updated_at``.
  Indexes: ``name`` unique, ``due_at`` (the due query), ``lease_token`` (reading a claim back),
  ``handler, _id`` (listing).
* ``executions``: ``_id, job_id, fire_key, handler, trigger, scheduled_at, started_at, deadline_at,
  run_token, owner, status, attempts, resumes, finished_at, duration, error``. Indexes: ``fire_key``
  unique (one execution per fire), ``job_id, scheduled_at, _id`` (listing), ``finished_at`` (pruning).

The claim is three commands per batch: read up to ``limit`` due candidates; insert one *claim mark* per
candidate into ``claims``, whose ``_id`` is ``<job id>:<seq>`` (``seq`` moves on with every claim,
release, advance and edit), so the unique ``_id`` lets exactly one claimer win each job state; then an
``updateMany`` per distinct timeout sets the winners' leases (usually one). A fire then costs two
commands and a share of a third: insert the execution (unique ``fire_key``), finish it, and advance the
job, written together with the advances of the fires finishing at the same moment (one ``bulkWrite``
of guarded ``updateOne``; a group commit).

Why the marks, rather than an ``updateOne`` guarded by ``due_at``: FerretDB 1.24 (SQLite backend)
evaluates an update's filter and writes the result in separate steps, so two concurrent conditional
updates can both apply (tests/contract showed one job claimed by four claimers). A unique-key insert is
atomic on FerretDB and MongoDB alike. The other guarded updates (version on edits, lease token on
advance, run token on finish) are exact on MongoDB and best-effort on FerretDB; one run per fire never
rests on them: it rests on the unique ``fire_key`` and the lock. FerretDB 1.24 also lacks partial and TTL
indexes and pipeline updates, so none is used; old claim marks are deleted by the pruning pass.
"""

from __future__ import annotations

import json
import queue
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pymongo import ASCENDING, DESCENDING, MongoClient, UpdateOne
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, DuplicateKeyError, PyMongoError
from pymongo.monitoring import CommandFailedEvent, CommandListener, CommandStartedEvent, CommandSucceededEvent

from ticklock.clock import to_ms
from ticklock.domain.jobs import Execution, ExecutionStatus, Fire, Job, Lease, Trigger
from ticklock.domain.schedules import schedule_from_dict, schedule_to_dict
from ticklock.errors import DuplicateJobName, JobNotFound, StaleVersion, StoreUnavailable
from ticklock.ports import Started

T = TypeVar("T")
Doc = dict[str, Any]
CLAIM_MARKS_KEPT = timedelta(minutes=5)
_LIVE = [ExecutionStatus.RUNNING.value, ExecutionStatus.INTERRUPTED.value]
_clients: dict[str, MongoClient[Doc]] = {}
_clients_mutex = threading.Lock()


class CommandCounter(CommandListener):
    """Counts the commands this process sends (``ticklock_store_commands_total``): counts do not drift
    with a noisy machine, so they are what the benchmark reports against its per-fire budget."""

    def __init__(self, count: Callable[[str], None]) -> None:
        self._count = count

    def started(self, event: CommandStartedEvent) -> None:
        self._count(event.command_name)

    def succeeded(self, event: CommandSucceededEvent) -> None:
        return None

    def failed(self, event: CommandFailedEvent) -> None:
        return None


def shared_client(uri: str, *, listeners: list[CommandListener] | None = None, fresh: bool = False) -> MongoClient[Doc]:
    """One client per URI per process (and per warm Lambda container): pymongo pools connections itself.

    ``fresh`` (or ``listeners``) gives a client of its own, as another process would have.
    """
    with _clients_mutex:
        client = None if fresh or listeners else _clients.get(uri)
        if client is None:
            client = MongoClient(
                uri,
                tz_aware=True,
                serverSelectionTimeoutMS=5000,
                connectTimeoutMS=5000,
                socketTimeoutMS=20000,
                retryWrites=True,
                event_listeners=listeners or [],
                appname="ticklock",
            )
            if not (fresh or listeners):
                _clients[uri] = client
        return client


class MongoStore:
    """The ``Store`` port on MongoDB."""

    def __init__(
        self,
        uri: str,
        *,
        database: str | None = None,
        client: MongoClient[Doc] | None = None,
        owns_client: bool = False,
    ) -> None:
        self.uri = uri
        self._client = client or shared_client(uri)
        self._owns_client = owns_client
        name = database or urlsplit(uri).path.lstrip("/").split("?")[0] or "ticklock"
        db = self._client[name]
        self.jobs: Collection[Doc] = db["jobs"]
        self.executions: Collection[Doc] = db["executions"]
        self.claims: Collection[Doc] = db["claims"]
        self._advances = _GroupCommit(self._advance_many)
        self._call(self._ensure_indexes)

    def _ensure_indexes(self) -> None:
        # create_index is idempotent: every process may run it at start
        self.jobs.create_index([("name", ASCENDING)], unique=True, name="name_unique")
        self.jobs.create_index([("due_at", ASCENDING)], name="due")
        self.jobs.create_index([("lease_token", ASCENDING)], name="lease")
        self.jobs.create_index([("handler", ASCENDING), ("_id", ASCENDING)], name="handler")
        self.executions.create_index([("fire_key", ASCENDING)], unique=True, name="fire_unique")
        self.executions.create_index(
            [("job_id", ASCENDING), ("scheduled_at", DESCENDING), ("_id", DESCENDING)], name="by_job"
        )
        self.executions.create_index([("finished_at", ASCENDING)], name="finished")
        self.claims.create_index([("at", ASCENDING)], name="at")

    def _call(self, func: Callable[[], T]) -> T:
        try:
            return func()
        except (DuplicateKeyError, JobNotFound, StaleVersion, DuplicateJobName):
            raise
        except PyMongoError as exc:
            raise StoreUnavailable(f"MongoDB: {exc}") from exc

    # -- jobs -------------------------------------------------------------------------------------
    def add_job(self, job: Job) -> Job:
        try:
            self._call(lambda: self.jobs.insert_one(_job_doc(job, job.created_at)))
        except DuplicateKeyError as exc:
            raise DuplicateJobName(job.name) from exc
        return job

    def add_jobs(self, jobs: list[Job]) -> None:
        """Insert many new jobs in one command (seeding, benchmarks)."""
        try:
            self._call(lambda: self.jobs.insert_many([_job_doc(j, j.created_at) for j in jobs], ordered=True))
        except DuplicateKeyError as exc:
            raise DuplicateJobName("(one of the batch)") from exc

    def get_job(self, job_id: str) -> Job:
        doc = self._call(lambda: self.jobs.find_one({"_id": job_id}))
        if doc is None:
            raise JobNotFound(job_id)
        return _job(doc)

    def find_job_by_name(self, name: str) -> Job | None:
        doc = self._call(lambda: self.jobs.find_one({"name": name}))
        return None if doc is None else _job(doc)

    def list_jobs(
        self, *, handler: str | None = None, enabled: bool | None = None, limit: int = 50, after: str | None = None
    ) -> list[Job]:
        query: Doc = {}
        if handler is not None:
            query["handler"] = handler
        if enabled is not None:
            query["enabled"] = enabled
        if after is not None:
            query["_id"] = {"$gt": after}
        docs = self._call(lambda: list(self.jobs.find(query).sort("_id", ASCENDING).limit(limit)))
        return [_job(d) for d in docs]

    def update_job(self, job: Job, *, expected_version: int) -> Job:
        def write() -> Job:
            current = self.jobs.find_one({"_id": job.id})
            if current is None:
                raise JobNotFound(job.id)
            stored = job.with_changes(version=expected_version + 1, lease=_job(current).lease)
            fields = _definition(stored)
            fields["due_at"] = _ms_or_none(stored.due_at(stored.updated_at))
            # seq too: a claim between our read and this write moves seq, not version, and its lease must
            # not be overwritten with a stale due_at
            result = self.jobs.update_one(
                {"_id": job.id, "version": expected_version, "seq": current.get("seq", 0)},
                {"$set": fields, "$inc": {"seq": 1}},
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

        self._call(delete)

    # -- dispatch ---------------------------------------------------------------------------------
    def claim_due(self, *, now: datetime, horizon: datetime, limit: int, owner: str, slack: timedelta) -> list[Job]:
        token = uuid.uuid4().hex

        def claim() -> list[Job]:
            candidates = list(self.jobs.find({"due_at": {"$lte": horizon}}).sort("due_at", ASCENDING).limit(limit))
            if not candidates:
                return []
            # The unique insert decides: one claimer per (job, seq), atomically on MongoDB and on FerretDB alike.
            marks = [
                {"_id": f"{d['_id']}:{d.get('seq', 0)}", "token": token, "owner": owner, "at": _ms(now)}
                for d in candidates
            ]
            lost: set[int] = set()
            try:
                self.claims.insert_many(marks, ordered=False)
            except BulkWriteError as exc:
                errors = exc.details.get("writeErrors", [])
                if any(e.get("code") != 11000 for e in errors):
                    raise
                lost = {e["index"] for e in errors}
            won = [d for i, d in enumerate(candidates) if i not in lost]
            # one update per distinct timeout (the lease length): FerretDB 1.24 on PostgreSQL stalls on an
            # update command carrying ~50 statements, and one update_many is fewer round trips anyway
            by_timeout: dict[float, list[Doc]] = {}
            for doc in won:
                by_timeout.setdefault(doc["timeout"], []).append(doc)
            try:
                self._lease(by_timeout, token, owner, horizon, slack)
            except PyMongoError:
                # without their leases the marks would block these job states for good: take them back
                self.claims.delete_many({"token": token})
                raise
            return [_job(d) for d in won]

        jobs = self._call(claim)
        jobs.sort(key=lambda j: (j.pending_at(), j.id))
        return jobs

    def _lease(
        self, by_timeout: dict[float, list[Doc]], token: str, owner: str, horizon: datetime, slack: timedelta
    ) -> None:
        for timeout, docs in by_timeout.items():
            until = _ms(horizon + timedelta(seconds=timeout) + slack)
            self.jobs.update_many(
                {"_id": {"$in": [d["_id"] for d in docs]}},
                {
                    "$set": {"lease_token": token, "lease_owner": owner, "lease_until": until, "due_at": until},
                    "$inc": {"seq": 1},
                },
            )
            for doc in docs:
                doc.update(lease_token=token, lease_owner=owner, lease_until=until, due_at=until)

    def release(self, job_id: str, lease_token: str) -> None:
        def release() -> None:
            for _ in range(5):  # an edit between our read and our write moves seq: read again
                doc = self.jobs.find_one({"_id": job_id, "lease_token": lease_token})
                if doc is None or release_read(doc):
                    return

        def release_read(doc: Doc) -> bool:
            job = _job(doc).with_changes(lease=None)
            return (
                self.jobs.update_one(
                    {"_id": job_id, "lease_token": lease_token, "seq": doc.get("seq", 0)},
                    {
                        "$set": {
                            "lease_token": None,
                            "lease_owner": None,
                            "lease_until": None,
                            "due_at": _ms_or_none(job.due_at(job.updated_at)),
                        },
                        "$inc": {"seq": 1},
                    },
                ).modified_count
                == 1
            )

        self._call(release)

    def advance(self, fire: Fire, *, next_run_at: datetime | None, now: datetime) -> bool:
        cleared = {"lease_token": None, "lease_owner": None, "lease_until": None}

        def fast() -> bool:
            # the common case in one command: a scheduled fire, no edit and no trigger since the claim
            if fire.trigger is not Trigger.SCHEDULE:
                return False
            return self.jobs.update_one(*_fast_advance(fire, next_run_at)).modified_count == 1

        def slow() -> bool | None:
            """None when the lease is gone; False when an edit slipped between the read and the write."""
            doc = self.jobs.find_one({"_id": fire.job.id, "lease_token": fire.lease_token})
            if doc is None:
                return None
            job = _job(doc).advanced(fire, next_run_at)
            result = self.jobs.update_one(
                {"_id": job.id, "lease_token": fire.lease_token, "version": doc["version"]},
                {
                    "$set": {
                        **cleared,
                        "next_run_at": _ms_or_none(job.next_run_at),
                        "enabled": job.enabled,
                        "trigger_at": _ms_or_none(job.trigger_at),
                        "due_at": _ms_or_none(job.due_at(now)),
                    },
                    "$inc": {"version": 1, "seq": 1},
                },
            )
            return result.modified_count == 1

        def advance() -> bool:
            if fast():
                return True
            for _ in range(5):  # an edit may land between our read and our write: read again
                done = slow()
                if done is not False:
                    return bool(done)
            return False

        return self._call(advance)

    # -- executions -------------------------------------------------------------------------------
    def start_execution(self, execution: Execution) -> Started:
        def start() -> Started:
            try:
                self.executions.insert_one(_exec_doc(execution))
            except DuplicateKeyError:
                doc = self.executions.find_one({"fire_key": execution.fire_key})
                if doc is None:  # the fire key index answered but the row is gone (deleted job): retry once
                    self.executions.insert_one(_exec_doc(execution))
                    return Started(_execution(_exec_doc(execution)), created=True)
                return Started(_execution(doc), created=False)
            return Started(_execution(_exec_doc(execution)), created=True)

        return self._call(start)

    def take_over_execution(self, execution: Execution, *, previous_token: str) -> bool:
        result = self._call(
            lambda: self.executions.update_one(
                {"_id": execution.id, "run_token": previous_token},
                {
                    "$set": {
                        "run_token": execution.run_token,
                        "owner": execution.owner,
                        "status": execution.status.value,
                        "started_at": _ms(execution.started_at),
                        "deadline_at": _ms(execution.deadline_at),
                        "resumes": execution.resumes,
                        "finished_at": None,
                        "duration": None,
                    }
                },
            )
        )
        return result.modified_count == 1

    def finish_execution(self, execution: Execution) -> bool:
        result = self._call(
            lambda: self.executions.update_one(
                {"_id": execution.id, "run_token": execution.run_token, "status": {"$in": _LIVE}},
                {
                    "$set": {
                        "status": execution.status.value,
                        "attempts": execution.attempts,
                        "finished_at": _ms_or_none(execution.finished_at),
                        "duration": execution.duration,
                        "error": execution.error,
                    }
                },
            )
        )
        return result.modified_count == 1

    def complete(
        self, execution: Execution, fire: Fire, *, next_run_at: datetime | None, now: datetime
    ) -> tuple[bool, bool]:
        # two documents in two collections (no multi-document transaction on FerretDB): the finish is
        # one command; the advance joins the others waiting at that moment in one bulkWrite
        if not self.finish_execution(execution):
            return False, False
        if fire.trigger is not Trigger.SCHEDULE:
            return True, self.advance(fire, next_run_at=next_run_at, now=now)
        return True, self._advances.submit(_PendingAdvance(fire, next_run_at, now))

    def _advance_many(self, batch: list[_PendingAdvance]) -> list[bool]:
        """One bulkWrite of fast-path advances; items it could not apply go through ``advance`` one by one."""
        result = self._call(
            lambda: self.jobs.bulk_write(
                [UpdateOne(*_fast_advance(p.fire, p.next_run_at)) for p in batch], ordered=False
            )
        )
        if result.modified_count == len(batch):
            return [True] * len(batch)
        # some met an edit, a trigger or a lost lease: those still holding our lease take the slow path
        held = {
            (d["_id"], d["lease_token"])
            for d in self._call(
                lambda: self.jobs.find({"_id": {"$in": [p.fire.job.id for p in batch]}}, {"_id": 1, "lease_token": 1})
            )
        }
        return [
            self.advance(p.fire, next_run_at=p.next_run_at, now=p.now)
            if (p.fire.job.id, p.fire.lease_token) in held
            else True
            for p in batch
        ]

    def get_execution(self, execution_id: str) -> Execution:
        doc = self._call(lambda: self.executions.find_one({"_id": execution_id}))
        if doc is None:
            raise JobNotFound(execution_id)
        return _execution(doc)

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

        return [_execution(d) for d in self._call(query)]

    def prune_executions(self, *, older_than: datetime, keep_per_job: int) -> int:
        final: Doc = {"status": {"$nin": _LIVE}}

        def prune() -> int:
            # a claim mark matters only between its insert and the lease write that moves seq on
            self.claims.delete_many({"at": {"$lt": _ms(datetime.now(UTC) - CLAIM_MARKS_KEPT)}})
            gone = self.executions.delete_many({**final, "finished_at": {"$lt": older_than}}).deleted_count
            crowded = self.executions.aggregate(
                [
                    {"$match": final},
                    {"$group": {"_id": "$job_id", "n": {"$sum": 1}}},
                    {"$match": {"n": {"$gt": keep_per_job}}},
                ]
            )
            for group in crowded:
                keep = list(
                    self.executions.find({**final, "job_id": group["_id"]}, {"_id": 1})
                    .sort([("scheduled_at", DESCENDING), ("_id", DESCENDING)])
                    .limit(keep_per_job)
                )
                gone += self.executions.delete_many(
                    {**final, "job_id": group["_id"], "_id": {"$nin": [d["_id"] for d in keep]}}
                ).deleted_count
            return int(gone)

        return self._call(prune)

    def ping(self) -> None:
        self._call(lambda: self._client.admin.command("ping"))

    def close(self) -> None:
        """Close the client if this store was given its own; the shared one lives as long as the process."""
        if self._owns_client:
            self._client.close()


def _fast_advance(fire: Fire, next_run_at: datetime | None) -> tuple[Doc, Doc]:
    """Filter and update of an advance with no edit and no trigger since the claim."""
    return (
        {"_id": fire.job.id, "lease_token": fire.lease_token, "version": fire.job.version, "trigger_at": None},
        {
            "$set": {
                "lease_token": None,
                "lease_owner": None,
                "lease_until": None,
                "next_run_at": _ms_or_none(next_run_at),
                "enabled": next_run_at is not None,
                "due_at": _ms_or_none(next_run_at),
            },
            "$inc": {"version": 1, "seq": 1},
        },
    )


@dataclass
class _PendingAdvance:
    fire: Fire
    next_run_at: datetime | None
    now: datetime
    done: threading.Event = field(default_factory=threading.Event)
    result: bool = False
    error: BaseException | None = None


class _GroupCommit:
    """Advances handed in by many workers, written by one thread in bulks of at most ``MAX``.

    No waiting to fill a batch: the writer takes whatever is queued when it is free, so under load the
    advances of concurrent fires share one command, and alone a fire pays one round trip as before.
    ``MAX`` stays under what FerretDB 1.24 on PostgreSQL stalls on (an update command of ~50 statements).
    """

    MAX = 16

    def __init__(self, write: Callable[[list[_PendingAdvance]], list[bool]]) -> None:
        self._write = write
        self._queue: queue.SimpleQueue[_PendingAdvance] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._mutex = threading.Lock()

    def submit(self, item: _PendingAdvance) -> bool:
        with self._mutex:
            if self._writer is None:
                self._writer = threading.Thread(target=self._loop, name="ticklock-mongo-advances", daemon=True)
                self._writer.start()
        self._queue.put(item)
        item.done.wait()
        if item.error is not None:
            raise item.error
        return item.result

    def _loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < self.MAX:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                for item, result in zip(batch, self._write(batch), strict=True):
                    item.result = result
            except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
                for item in batch:
                    item.error = exc
            for item in batch:
                item.done.set()


# BSON dates hold milliseconds: round down so that what we compute equals what we read back
_ms = to_ms


def _ms_or_none(moment: datetime | None) -> datetime | None:
    return None if moment is None else _ms(moment)


def _definition(job: Job) -> Doc:
    return {
        "name": job.name,
        "handler": job.handler,
        "schedule": schedule_to_dict(job.schedule),
        # JSON text, not a subdocument: the payload comes back exactly as given on every MongoDB
        # (FerretDB 1.24 refuses nested arrays; BSON has no place for -0 vs 0 in every server's eyes),
        # and the store never queries inside it. Older documents with a subdocument still read.
        "payload": json.dumps(dict(job.payload), ensure_ascii=False, separators=(",", ":")),
        "timeout": job.timeout,
        "max_retries": job.max_retries,
        "enabled": job.enabled,
        "next_run_at": _ms_or_none(job.next_run_at),
        "trigger_at": _ms_or_none(job.trigger_at),
        "version": job.version,
        "updated_at": _ms(job.updated_at),
        "disabled_reason": job.disabled_reason,
    }


def _job_doc(job: Job, now: datetime) -> Doc:
    return {
        "_id": job.id,
        **_definition(job),
        "due_at": _ms_or_none(job.due_at(now)),
        "created_at": _ms(job.created_at),
        "seq": 0,
        "lease_token": job.lease.token if job.lease else None,
        "lease_owner": job.lease.owner if job.lease else None,
        "lease_until": _ms(job.lease.until) if job.lease else None,
    }


def _job(doc: Mapping[str, Any]) -> Job:
    lease = Lease(doc["lease_token"], doc["lease_owner"], doc["lease_until"]) if doc.get("lease_token") else None
    return Job(
        id=doc["_id"],
        name=doc["name"],
        handler=doc["handler"],
        schedule=schedule_from_dict(doc["schedule"]),
        payload=json.loads(doc["payload"]) if isinstance(doc["payload"], str) else doc["payload"],
        timeout=doc["timeout"],
        max_retries=doc["max_retries"],
        enabled=doc["enabled"],
        next_run_at=doc.get("next_run_at"),
        trigger_at=doc.get("trigger_at"),
        lease=lease,
        version=doc["version"],
        created_at=doc["created_at"],
        updated_at=doc["updated_at"],
        disabled_reason=doc.get("disabled_reason"),
    )


def _exec_doc(e: Execution) -> Doc:
    return {
        "_id": e.id,
        "job_id": e.job_id,
        "fire_key": e.fire_key,
        "handler": e.handler,
        "trigger": e.trigger.value,
        "scheduled_at": _ms(e.scheduled_at),
        "started_at": _ms(e.started_at),
        "deadline_at": _ms(e.deadline_at),
        "run_token": e.run_token,
        "owner": e.owner,
        "status": e.status.value,
        "attempts": e.attempts,
        "resumes": e.resumes,
        "finished_at": _ms_or_none(e.finished_at),
        "duration": e.duration,
        "error": e.error,
    }


def _execution(doc: Mapping[str, Any]) -> Execution:
    return Execution(
        id=doc["_id"],
        job_id=doc["job_id"],
        fire_key=doc["fire_key"],
        handler=doc["handler"],
        trigger=Trigger(doc["trigger"]),
        scheduled_at=doc["scheduled_at"],
        started_at=doc["started_at"],
        deadline_at=doc["deadline_at"],
        run_token=doc["run_token"],
        owner=doc["owner"],
        status=ExecutionStatus(doc["status"]),
        attempts=doc["attempts"],
        resumes=doc["resumes"],
        finished_at=doc.get("finished_at"),
        duration=doc.get("duration"),
        error=doc.get("error"),
    )
