"""The ``LedgerStore`` role on MongoDB: the fires that did not run, one document per entry, ``_id`` its id (so a
second record of one fire is a duplicate key, and leaves the first)."""

from __future__ import annotations

from datetime import datetime

from pymongo import ASCENDING, DESCENDING
from pymongo.errors import DuplicateKeyError

from ticklock.adapters.records import ledger_from_record, ledger_record
from ticklock.adapters.store.mongo.client import Doc
from ticklock.adapters.store.mongo.connection import Connection
from ticklock.adapters.store.mongo.documents import MILLIS
from ticklock.domain.ledger import LedgerEntry
from ticklock.ports import LedgerStore


class Ledger(Connection, LedgerStore):
    def record_fire(self, entry: LedgerEntry) -> bool:
        record = ledger_record(entry, MILLIS)
        doc = {"_id": record.pop("id"), **record}

        def insert() -> bool:
            try:
                self.ledger.insert_one(doc)
            except DuplicateKeyError:
                return False
            return True

        return self._call(insert)

    def list_fires(
        self,
        job_id: str | None,
        *,
        start: datetime,
        end: datetime,
        outcome: str | None = None,
        reason: str | None = None,
        limit: int = 100,
    ) -> list[LedgerEntry]:
        query: Doc = {"first_at": {"$lte": end}, "last_at": {"$gte": start}}
        for field, value in (("job_id", job_id), ("outcome", outcome), ("reason", reason)):
            if value is not None:
                query[field] = value
        order = [("first_at", DESCENDING), ("_id", ASCENDING)]
        docs = self._call(lambda: list(self.ledger.find(query).sort(order).limit(limit)))
        return [ledger_from_record({**d, "id": d["_id"]}, MILLIS) for d in docs]
