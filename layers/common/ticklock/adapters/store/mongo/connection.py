"""The MongoDB store's client, collections, indexes and error mapping."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlsplit

from pymongo import ASCENDING, DESCENDING, MongoClient
from pymongo.collection import Collection
from pymongo.errors import DuplicateKeyError, PyMongoError

from ticklock.adapters.store.mongo.client import Doc, T, shared_client
from ticklock.errors import DuplicateJobName, JobNotFound, StaleVersion, StoreUnavailable

CLAIM_MARKS_KEPT = timedelta(minutes=5)


class Connection:
    """The client, the collections and their indexes, the error mapping; every part of the store builds on it."""

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
        # create_index is idempotent: every process may run it at start
        self.jobs.create_index([("name", ASCENDING)], unique=True, name="name_unique")
        self.jobs.create_index([("due_at", ASCENDING)], name="due")
        self.jobs.create_index([("lease_token", ASCENDING)], name="lease")
        self.jobs.create_index([("handler", ASCENDING), ("_id", ASCENDING)], name="handler")
        self.jobs.create_index([("next_run_at", ASCENDING), ("_id", ASCENDING)], name="by_next")  # the jobs table
        self.jobs.create_index([("last_at", ASCENDING), ("_id", ASCENDING)], name="by_last")
        self.executions.create_index([("fire_key", ASCENDING)], unique=True, name="fire_unique")
        self.executions.create_index(
            [("job_id", ASCENDING), ("scheduled_at", DESCENDING), ("_id", DESCENDING)], name="by_job"
        )
        self.executions.create_index([("finished_at", ASCENDING)], name="finished")
        self.executions.create_index([("scheduled_at", DESCENDING)], name="by_time")
        self.executions.create_index([("detached", ASCENDING), ("deadline_at", ASCENDING)], name="detached")
        self.claims.create_index([("at", ASCENDING)], name="at")
        self.ledger.create_index([("job_id", ASCENDING), ("first_at", DESCENDING)], name="by_job")
        self.ledger.create_index([("first_at", DESCENDING)], name="by_time")
        self.ledger.create_index([("last_at", ASCENDING)], name="last")

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
