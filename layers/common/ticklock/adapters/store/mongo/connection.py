"""The MongoDB store's client, collections, indexes and error mapping."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from pymongo import ASCENDING, DESCENDING, MongoClient
from pymongo.collection import Collection
from pymongo.errors import DuplicateKeyError, PyMongoError

from ticklock.adapters.store.mongo.client import Doc, T, shared_client
from ticklock.clock import to_ms
from ticklock.errors import DuplicateJobName, JobNotFound, StaleVersion, StoreUnavailable
from ticklock.ports import StoreConnection

CLAIM_MARKS_KEPT = timedelta(minutes=5)


class Connection(StoreConnection):
    """The client, the collections and their indexes, the error mapping; every part of the store builds on it.
    The ``StoreConnection`` role (``ping``, ``close``)."""

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
        self.ledger: Collection[Doc] = db["ledger"]
        self._call(self._ensure_indexes)
        # FerretDB (``buildInfo`` names its version) serves no filter from an index: each statement of a
        # write is a scan of its collection, so there writes are grouped into fewer statements where they
        # can be. Not on MongoDB, where a bulk write with a multi-document update is not retried by the
        # driver (``retryWrites``) and each statement is an index lookup anyway.
        self.ferretdb = "ferretdbVersion" in self._call(lambda: db.command("buildInfo"))

    def _ensure_indexes(self) -> None:
        """The store's indexes, each created only if its collection lacks an index of that name: a process
        starting on a store already set up (every Lambda cold start) reads one index list per collection and
        writes nothing. FerretDB 1.24 on SQLite holds its collection registry's lock through a
        ``createIndexes`` while it waits for a connection of its pool, and the updates in flight that hold
        those connections wait for that lock: many runner environments starting beside a burst can wedge it
        for good."""
        wanted: list[tuple[Collection[Doc], list[tuple[str, Any]], bool, str]] = [
            (self.jobs, [("name", ASCENDING)], True, "name_unique"),
            (self.jobs, [("due_at", ASCENDING)], False, "due"),
            (self.jobs, [("lease_token", ASCENDING)], False, "lease"),
            (self.jobs, [("handler", ASCENDING), ("_id", ASCENDING)], False, "handler"),
            (self.jobs, [("next_run_at", ASCENDING), ("_id", ASCENDING)], False, "by_next"),  # the jobs table
            (self.jobs, [("last_at", ASCENDING), ("_id", ASCENDING)], False, "by_last"),
            (self.jobs, [("hold_until", ASCENDING)], False, "held"),  # after ``_fill_hold_until``
            (self.executions, [("fire_key", ASCENDING)], True, "fire_unique"),
            (
                self.executions,
                [("job_id", ASCENDING), ("scheduled_at", DESCENDING), ("_id", DESCENDING)],
                False,
                "by_job",
            ),
            (self.executions, [("finished_at", ASCENDING)], False, "finished"),
            (self.executions, [("scheduled_at", DESCENDING)], False, "by_time"),
            (self.executions, [("detached", ASCENDING), ("deadline_at", ASCENDING)], False, "detached"),
            (self.claims, [("at", ASCENDING)], False, "at"),
            (self.ledger, [("job_id", ASCENDING), ("first_at", DESCENDING)], False, "by_job"),
            (self.ledger, [("first_at", DESCENDING)], False, "by_time"),
            (self.ledger, [("last_at", ASCENDING)], False, "last"),
        ]
        present: dict[str, set[str]] = {}
        for collection, keys, unique, name in wanted:
            if collection.name not in present:
                present[collection.name] = {index["name"] for index in collection.list_indexes()}
            if name not in present[collection.name]:
                if name == "held":
                    self._fill_hold_until()
                # create_index is idempotent: processes starting together on a new store may all run it
                if unique:
                    collection.create_index(keys, name=name, unique=True)
                else:
                    collection.create_index(keys, name=name)

    def _fill_hold_until(self) -> None:
        """Jobs held before ``hold_until`` was written get it from their hold: once, when its index is made
        (a store set up since has both from the start). A replica of an older release, during a rolling
        deploy, writes holds without it: those jobs count and filter as enabled until they next change."""
        for doc in self.jobs.find({"hold": {"$ne": None}, "hold_until": None}, {"hold": 1}):
            resumes = (doc.get("hold") or {}).get("resumes_at")
            if resumes:
                until = to_ms(datetime.fromisoformat(resumes))
                self.jobs.update_one({"_id": doc["_id"], "hold_until": None}, {"$set": {"hold_until": until}})

    def _call(self, func: Callable[[], T]) -> T:
        try:
            return func()
        except (DuplicateKeyError, JobNotFound, StaleVersion, DuplicateJobName):
            raise
        except PyMongoError as exc:
            raise StoreUnavailable(f"MongoDB: {exc}") from exc

    def ping(self) -> None:
        self._call(lambda: self._client.admin.command("ping"))

    def close(self) -> None:
        """Close the client if this store was given its own; the shared one lives as long as the process."""
        if self._owns_client:
            self._client.close()
