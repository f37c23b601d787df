"""The ``FireStore`` role: claim the due jobs (with claim marks), start, take over and finish executions,
advance the jobs."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from pymongo import ASCENDING, MongoClient, UpdateMany, UpdateOne
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, DuplicateKeyError, PyMongoError

from ticklock.adapters.store.mongo.client import DUPLICATE_KEY, Doc
from ticklock.adapters.store.mongo.connection import Connection
from ticklock.adapters.store.mongo.documents import (
    LIVE,
    execution_doc,
    execution_from_doc,
    fast_advance,
    fast_path,
    job_from_doc,
    ms,
    ms_or_none,
    no_later_run,
    setting,
    summary_update,
)
from ticklock.adapters.store.mongo.group_commit import GroupCommit, PendingAdvance
from ticklock.domain.executions import Execution
from ticklock.domain.fires import Fire, Lease
from ticklock.domain.jobs import Job
from ticklock.errors import StoreUnavailable
from ticklock.ports import Completion, FireStore, Started

log = logging.getLogger("ticklock.store")


class Fires(Connection, FireStore):
    def __init__(
        self,
        uri: str,
        *,
        database: str | None = None,
        client: MongoClient[Doc] | None = None,
        owns_client: bool = False,
    ) -> None:
        super().__init__(uri, database=database, client=client, owns_client=owns_client)
        self._advances = GroupCommit(self._advance_many)  # the advances of concurrent fires, one bulk write

    def claim_due(self, *, now: datetime, horizon: datetime, limit: int, owner: str, slack: timedelta) -> list[Job]:
        token = uuid.uuid4().hex

        def claim() -> list[Job]:
            # one batch of the whole limit (a negative limit is singleBatch; the batch size keeps the servers'
            # first batch of 101 from cutting it short): the server keeps no cursor open. FerretDB 2.5 takes
            # a PostgreSQL connection out of its pool for an open cursor and closes it once the cursor is
            # drained: a cursor left open would cost a claim a new PostgreSQL session
            due = self.jobs.find({"due_at": {"$lte": horizon}}).sort("due_at", ASCENDING)
            candidates = list(due.limit(-limit).batch_size(limit))
            if not candidates:
                return []
            # The unique insert decides: one claimer per (job, seq), atomically on MongoDB and on FerretDB alike.
            marks = [
                {"_id": f"{d['_id']}:{d.get('seq', 0)}", "token": token, "owner": owner, "at": ms(now)}
                for d in candidates
            ]
            lost = _insert_new(self.claims, marks)
            won = [d for i, d in enumerate(candidates) if i not in lost]
            try:
                self._lease(won, token, owner, horizon + slack)
            except PyMongoError:
                # without their leases the marks would block these job states for good: take them back
                self.claims.delete_many({"token": token})
                raise
            return [job_from_doc(d) for d in won]

        jobs = self._call(claim)
        jobs.sort(key=lambda j: (j.pending_at(), j.id))
        return jobs

    def _lease(self, docs: list[Doc], token: str, owner: str, until_at: datetime) -> None:
        until = ms(until_at)
        self.jobs.update_many(
            {"_id": {"$in": [d["_id"] for d in docs]}},
            {
                "$set": {"lease_token": token, "lease_owner": owner, "lease_until": until, "due_at": until},
                "$inc": {"seq": 1},
            },
        )
        for doc in docs:
            doc.update(lease_token=token, lease_owner=owner, lease_until=until, due_at=until)

    def extend_claims(self, claims: Sequence[tuple[str, str]], *, until: datetime) -> int:
        if not claims:
            return 0
        at = ms(until)
        # one update for every claim held: a heartbeat's write must stay cheap on a busy server. Matching
        # any of the tokens given is as exact as each job's own: they are all this caller's claims
        ids, tokens = sorted({job_id for job_id, _ in claims}), sorted({token for _, token in claims})

        def extend() -> int:
            return self.jobs.update_many(
                {"_id": {"$in": ids}, "lease_token": {"$in": tokens}},
                {"$set": {"lease_until": at}, "$max": {"due_at": at}},
            ).matched_count

        return self._call(extend)

    def live_claims(self, *, now: datetime) -> list[tuple[str, Lease]]:
        def read() -> list[tuple[str, Lease]]:
            found = self.jobs.find(
                {"lease_until": {"$gt": ms(now)}}, {"_id": 1, "lease_token": 1, "lease_owner": 1, "lease_until": 1}
            )
            return [(d["_id"], Lease(d["lease_token"], d["lease_owner"], d["lease_until"])) for d in found]

        return self._call(read)

    def release(self, job_id: str, lease_token: str) -> None:
        def release() -> None:
            for _ in range(5):  # an edit between our read and our write moves seq: read again
                doc = self.jobs.find_one({"_id": job_id, "lease_token": lease_token})
                if doc is None or release_read(doc):
                    return

        def release_read(doc: Doc) -> bool:
            job = job_from_doc(doc).with_changes(lease=None)
            return (
                self.jobs.update_one(
                    {"_id": job_id, "lease_token": lease_token, "seq": doc.get("seq", 0)},
                    {
                        **setting(
                            {
                                "lease_token": None,
                                "lease_owner": None,
                                "lease_until": None,
                                "due_at": ms_or_none(job.due_at(job.updated_at)),
                            }
                        ),
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
            if not fast_path(fire):
                return False
            return self.jobs.update_one(*fast_advance(fire, next_run_at)).modified_count == 1

        def slow() -> bool | None:
            """None when the lease is gone; False when an edit slipped between the read and the write."""
            doc = self.jobs.find_one({"_id": fire.job.id, "lease_token": fire.lease_token})
            if doc is None:
                return None
            job = job_from_doc(doc).advanced(fire, next_run_at)
            result = self.jobs.update_one(
                {"_id": job.id, "lease_token": fire.lease_token, "version": doc["version"]},
                {
                    **setting(
                        {
                            **cleared,
                            "next_run_at": ms_or_none(job.next_run_at),
                            "enabled": job.enabled,
                            "trigger_at": ms_or_none(job.trigger_at),
                            "backfill": None if job.backfill is None else job.backfill.to_dict(),
                            "due_at": ms_or_none(job.due_at(now)),
                        }
                    ),
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

    def start_execution(self, execution: Execution) -> Started:
        def start() -> Started:
            try:
                self.executions.insert_one(execution_doc(execution))
            except DuplicateKeyError:
                doc = self.executions.find_one({"fire_key": execution.fire_key})
                if doc is None:  # the fire key index answered but the row is gone (deleted job): retry once
                    self.executions.insert_one(execution_doc(execution))
                    return Started(execution_from_doc(execution_doc(execution)), created=True)
                return Started(execution_from_doc(doc), created=False)
            return Started(execution_from_doc(execution_doc(execution)), created=True)

        return self._call(start)

    def start_executions(self, executions: Sequence[Execution]) -> list[Started]:
        # one insert for the batch; the rows it finds there already (11000, each named by its index) are
        # read back in one find: two commands for a batch with duplicates, one without
        if not executions:
            return []
        docs = [execution_doc(e) for e in executions]

        def start() -> list[Started]:
            taken = _insert_new(self.executions, docs)
            found = {}
            if taken:
                keys = [docs[i]["fire_key"] for i in taken]
                found = {d["fire_key"]: d for d in self.executions.find({"fire_key": {"$in": keys}})}
            started = []
            for i, doc in enumerate(docs):
                if i not in taken:
                    started.append(Started(execution_from_doc(doc), created=True))
                elif doc["fire_key"] in found:
                    started.append(Started(execution_from_doc(found[doc["fire_key"]]), created=False))
                else:  # the fire key index answered but the row is gone (deleted job): as start_execution
                    started.append(self.start_execution(executions[i]))
            return started

        return self._call(start)

    def take_over_execution(self, execution: Execution, *, previous_token: str) -> bool:
        result = self._call(
            lambda: self.executions.update_one(
                {"_id": execution.id, "run_token": previous_token},
                setting(
                    {
                        "run_token": execution.run_token,
                        "owner": execution.owner,
                        "status": execution.status.value,
                        "started_at": ms(execution.started_at),
                        "deadline_at": ms(execution.deadline_at),
                        "resumes": execution.resumes,
                        "finished_at": None,
                        "duration": None,
                    }
                ),
            )
        )
        return result.modified_count == 1

    def finish_execution(self, execution: Execution) -> bool:
        return self._finish(execution, summarise=True)

    def _finish(self, execution: Execution, *, summarise: bool) -> bool:
        result = self._call(
            lambda: self.executions.update_one(
                {"_id": execution.id, "run_token": execution.run_token, "status": {"$in": LIVE}},
                setting(
                    {
                        "status": execution.status.value,
                        "attempts": execution.attempts,
                        "finished_at": ms_or_none(execution.finished_at),
                        "duration": execution.duration,
                        "error": execution.error,
                    }
                ),
            )
        )
        if result.modified_count != 1:
            return False
        if summarise and execution.status.final:
            try:
                self._summarise(execution)
            except PyMongoError as exc:
                # the run is final and stays so; only the job's summary misses it (until its next run):
                # failing here would keep the fire's advance from happening
                log.warning("store.summary_lost", extra={"job_id": execution.job_id, "error": str(exc)})
        return True

    def _summarise(self, execution: Execution) -> None:
        """The job's runs' summary: the run counted, and the last unless a later one is recorded already
        (runs overlapping under allow_all)."""
        at, counted = summary_update(execution)
        latest = self.jobs.update_one(
            {"_id": execution.job_id, **no_later_run(at)},
            {"$set": {"last_status": execution.status.value, "last_at": at}, "$inc": counted},
        )
        if latest.matched_count == 0:
            self.jobs.update_one({"_id": execution.job_id}, {"$inc": counted})

    def complete(
        self, execution: Execution, fire: Fire, *, next_run_at: datetime | None, now: datetime
    ) -> tuple[bool, bool]:
        # two documents in two collections (no multi-document transaction on FerretDB): the finish is one
        # command; the advance, with the run's summary in the same update of the job, joins the others
        # waiting at that moment in one bulkWrite: two commands a fire and a share of a third, not three
        if not fast_path(fire):
            if not self.finish_execution(execution):
                return False, False
            return True, self.advance(fire, next_run_at=next_run_at, now=now)
        if not self._finish(execution, summarise=False):
            return False, False
        summary = execution if execution.status.final else None
        try:
            return True, self._advances.submit(PendingAdvance(fire, next_run_at, now, summary))
        except StoreUnavailable:
            # the bulk's fate is unknown: the run stays final and its advance is retried by the caller;
            # only the job's summary may miss it (until its next run), as when the summary's own write fails
            log.warning("store.summary_lost", extra={"job_id": execution.job_id, "error": "advance failed"})
            raise

    def complete_many(self, completions: Sequence[Completion], *, now: datetime) -> list[tuple[bool, bool]]:
        # the finishes in one bulk write; the fast-path advances (with their runs' summaries) handed to the
        # group commit together, so that they share its bulks; the others one at a time, as ``complete``
        if not completions:
            return []
        results = [(False, False)] * len(completions)
        finished = self._finish_many([c.execution for c in completions])
        pending: list[tuple[int, PendingAdvance]] = []
        for i, (c, done) in enumerate(zip(completions, finished, strict=True)):
            if not done:
                continue
            summary = c.execution if c.execution.status.final else None
            if fast_path(c.fire):
                pending.append((i, PendingAdvance(c.fire, c.next_run_at, now, summary)))
                continue
            if summary is not None:
                try:
                    self._summarise(summary)
                except PyMongoError as exc:  # as in ``finish_execution``
                    log.warning("store.summary_lost", extra={"job_id": summary.job_id, "error": str(exc)})
            results[i] = (True, self.advance(c.fire, next_run_at=c.next_run_at, now=now))
        if pending:
            advanced = self._advances.submit_many([p for _, p in pending])
            for (i, _), moved in zip(pending, advanced, strict=True):
                results[i] = (True, moved)
        return results

    def _finish_many(self, executions: Sequence[Execution]) -> list[bool]:
        """``_finish`` (no summary) for each, in one bulk write. Each update carries this call's mark, so that
        when some did not apply (taken over, or final already) one read tells which ones did.

        On FerretDB, the runs of a batch that share every value written (they start together and end
        together) go in one update, whose filter names each run's id and token under ``$or`` and, at its
        top, the start they share. FerretDB 1.24 serves no filter from an index (an ``_id`` equality is a
        scan of the collection in PostgreSQL) and pushes down only top-level equalities: an update per run
        was a scan of the whole, growing ``executions`` collection per fire; the shared ``started_at``
        makes it one scan per batch, which returns the batch's rows alone. On MongoDB each run keeps an
        update of its own (an ``_id`` lookup), so that the bulk write stays retryable."""
        mark = uuid.uuid4().hex
        groups: dict[tuple[object, ...], list[Execution]] = {}
        for e in executions:
            key = (e.started_at, e.status, e.attempts, e.finished_at, e.duration, e.error)
            groups.setdefault(key, []).append(e)
        ops: list[UpdateOne | UpdateMany] = []
        for members in groups.values():
            first = members[0]
            update = setting(
                {
                    "status": first.status.value,
                    "attempts": first.attempts,
                    "finished_at": ms_or_none(first.finished_at),
                    "duration": first.duration,
                    "error": first.error,
                    "finish_mark": mark,
                }
            )
            if len(members) == 1 or not self.ferretdb:
                ops += [
                    UpdateOne({"_id": e.id, "run_token": e.run_token, "status": {"$in": LIVE}}, update) for e in members
                ]
                continue
            runs = [{"_id": e.id, "run_token": e.run_token} for e in members]
            where = {"started_at": ms(first.started_at), "status": {"$in": LIVE}, "$or": runs}
            ops.append(UpdateMany(where, update))
        result = self._call(lambda: self.executions.bulk_write(ops, ordered=False))
        if result.modified_count == len(executions):
            return [True] * len(executions)
        ids = [e.id for e in executions]
        marks = {
            d["_id"]: d.get("finish_mark")
            for d in self._call(lambda: self.executions.find({"_id": {"$in": ids}}, {"finish_mark": 1}))
        }
        return [marks.get(e.id) == mark for e in executions]

    def _advance_many(self, batch: list[PendingAdvance]) -> list[bool]:
        """One bulkWrite of fast-path advances, each with its run's summary. If some did not apply (an edit,
        a trigger or a lost lease since the claim), each is looked at: applied (its run token is the job's
        last), still ours (the slow path, then the summary alone), or gone (the summary alone)."""
        result = self._call(
            lambda: self.jobs.bulk_write(
                [UpdateOne(*fast_advance(p.fire, p.next_run_at, p.summary)) for p in batch], ordered=False
            )
        )
        if result.modified_count == len(batch):
            return [True] * len(batch)
        found = {
            d["_id"]: d
            for d in self._call(
                lambda: self.jobs.find(
                    {"_id": {"$in": [p.fire.job.id for p in batch]}}, {"_id": 1, "lease_token": 1, "last_run_token": 1}
                )
            )
        }
        return [self._settle(p, found.get(p.fire.job.id)) for p in batch]

    def _settle(self, pending: PendingAdvance, doc: Doc | None) -> bool:
        """Whether ``pending``'s advance happened, finishing what its bulk update did not do. (A later run of
        the job recording its own token in the milliseconds between the bulk and the read would make this
        one count twice in the summary: it would have to be claimed, run and finished in between.)"""
        summary = pending.summary
        if doc is not None and summary is not None and doc.get("last_run_token") == summary.run_token:
            return True  # applied
        held = doc is not None and doc.get("lease_token") == pending.fire.lease_token
        if summary is None:
            return self.advance(pending.fire, next_run_at=pending.next_run_at, now=pending.now) if held else True
        advanced = held and self.advance(pending.fire, next_run_at=pending.next_run_at, now=pending.now)
        try:
            self._summarise(summary)
        except PyMongoError as exc:  # as in ``finish_execution``: the advance stands, the summary misses it
            log.warning("store.summary_lost", extra={"job_id": summary.job_id, "error": str(exc)})
        return advanced


def _insert_new(collection: Collection[Doc], docs: list[Doc]) -> set[int]:
    """Insert ``docs`` in one unordered insert; the indexes of those whose ``_id`` or unique key was there
    already (DUPLICATE_KEY). Any other write error is raised."""
    try:
        collection.insert_many(docs, ordered=False)
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        if any(e.get("code") != DUPLICATE_KEY for e in errors):
            raise
        return {e["index"] for e in errors}
    return set()
