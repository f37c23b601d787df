"""The catalogue walk's data on MongoDB: ``parts`` (shared with the alert scanner), ``price_history``,
``walk_state`` and ``vendor_quota``. A vendor request is counted by inserting the day's next numbered
slot (``_id = day:n``, n <= quota): the unique ``_id`` makes two processes that race for one slot take
one each or fail, so the count can never pass the quota - a conditional ``$inc`` would not be atomic on
FerretDB (see the job store's claim marks)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, InsertOne, UpdateOne
from pymongo.errors import DuplicateKeyError, PyMongoError

from ticklock.errors import StoreUnavailable
from ticklock_parts.adapters.alerts.mongo import MongoAlertStore
from ticklock_parts.catalogue.ports import PartRef, SpotPrice

WALK = "catalogue.spot_prices"


class MongoCatalogueStore(MongoAlertStore):
    """The ``CatalogueStore`` port on MongoDB."""

    def __init__(self, uri: str, *, database: str | None = None, client: Any = None) -> None:
        super().__init__(uri, database=database, client=client)
        db = self.alerts.database
        self.history_collection = db["price_history"]
        self.state = db["walk_state"]
        self.quota = db["vendor_quota"]
        self._guard(lambda: self.history_collection.create_index([("partId", ASCENDING), ("at", ASCENDING)]))
        self._guard(lambda: self.quota.create_index([("day", ASCENDING)]))

    def parts_after(self, cursor: str | None, limit: int) -> list[PartRef]:
        query: dict[str, Any] = {"mpn": {"$type": "string"}}
        if cursor is not None:
            query = {"$and": [query, {"_id": {"$gt": cursor}}]}
        docs = self._guard(
            lambda: list(self.parts_collection.find(query, {"mpn": 1}).sort("_id", ASCENDING).limit(limit))
        )
        return [PartRef(str(d["_id"]), d["mpn"]) for d in docs if str(d["mpn"]).strip()]

    def load_cursor(self) -> str | None:
        doc = self._guard(lambda: self.state.find_one({"_id": WALK}))
        return doc.get("cursor") if doc else None

    def save_cursor(self, cursor: str | None, now: datetime) -> None:
        change = {"$set": {"cursor": cursor, "updatedAt": now}}
        try:
            self.state.update_one({"_id": WALK}, change, upsert=True)
        except PyMongoError as exc:
            if "duplicate" not in str(exc).lower():
                raise StoreUnavailable(f"mongodb: {exc}") from exc
            # two first saves raced (FerretDB's upsert is not atomic): the document exists now
            self._guard(lambda: self.state.update_one({"_id": WALK}, change))

    def record_prices(self, prices: Sequence[tuple[PartRef, SpotPrice]], now: datetime) -> None:
        updates = [
            UpdateOne(
                {"_id": part.id},
                {"$set": {"price": price.price, "currency": price.currency, "priceUpdatedAt": now}},
            )
            for part, price in prices
        ]
        rows = [
            InsertOne({"partId": part.id, "price": price.price, "currency": price.currency, "at": now})
            for part, price in prices
        ]
        for start in range(0, len(updates), self._bulk):
            chunk = updates[start : start + self._bulk]
            self._guard(lambda c=chunk: self.parts_collection.bulk_write(c, ordered=False))
        for start in range(0, len(rows), self._bulk):
            chunk_rows = rows[start : start + self._bulk]
            self._guard(lambda c=chunk_rows: self.history_collection.bulk_write(c, ordered=False))

    def take_request(self, day: str, quota: int) -> bool:
        while True:
            used = int(self._guard(lambda: self.quota.count_documents({"day": day})))
            if used >= quota:
                return False
            try:
                self.quota.insert_one({"_id": f"{day}:{used + 1:07d}", "day": day})
                return True
            except DuplicateKeyError:
                continue  # another process took that slot: count again
            except PyMongoError as exc:
                if "duplicate" in str(exc).lower():
                    continue
                raise StoreUnavailable(f"mongodb: {exc}") from exc

    def history(self, part_id: str) -> list[tuple[float, str, str]]:
        docs = self._guard(lambda: list(self.history_collection.find({"partId": part_id}).sort("at", ASCENDING)))
        return [(float(d["price"]), str(d["currency"]), d["at"].isoformat()) for d in docs]

    def requests_used(self, day: str) -> int:
        return int(self._guard(lambda: self.quota.count_documents({"day": day})))
