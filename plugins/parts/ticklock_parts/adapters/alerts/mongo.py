"""The scanner's data on MongoDB: collections ``alerts``, ``parts``, ``notifications`` (shapes in
``ticklock_parts.alerts.documents``) and ``email_claims``.

* The write-back is one ``bulk_write`` of ``UpdateOne``s, each filtered on the alert's rules array as it
  was read: an alert changed since (by another scanner, or by the product's backend) is left alone.
* Notifications are inserted with ``insert_many(ordered=False)`` under their deterministic ids; a
  duplicate key means another scanner got there first, and is not an error.
* An email is claimed by a unique insert into ``email_claims`` (``note:attempt:lease window``), as job
  claims are: a conditional update alone is not atomic on FerretDB, and two scanners could both send.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from pymongo import ASCENDING, InsertOne, MongoClient, UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError, PyMongoError

from ticklock.errors import StoreUnavailable
from ticklock_parts.adapters.alerts.sqlite import notification_doc, notification_from
from ticklock_parts.adapters.client import shared_client
from ticklock_parts.alerts.documents import Alert, AlertUpdate, Notification, alert_from

Doc = dict[str, Any]
DUPLICATE_KEY = 11000
# FerretDB 1.24 on PostgreSQL stalls on a write command with ~50 statements (README, "Testing against
# FerretDB"): one logical bulk write goes out as commands of this many; real MongoDB gets one command
FERRETDB_BULK = 16


class MongoAlertStore:
    """The ``AlertStore`` port on MongoDB."""

    def __init__(self, uri: str, *, database: str | None = None, client: MongoClient[Doc] | None = None) -> None:
        self._client = client or shared_client(uri)
        name = database or urlsplit(uri).path.lstrip("/").split("?")[0] or "ticklock"
        db = self._client[name]
        self.alerts = db["alerts"]
        self.parts_collection = db["parts"]
        self.notes = db["notifications"]
        self.claims = db["email_claims"]
        try:
            self._bulk = FERRETDB_BULK if "ferretdbVersion" in self._client.admin.command("buildInfo") else 100_000
            self.notes.create_index([("email.status", ASCENDING), ("createdAt", ASCENDING)])
            self.claims.create_index([("at", ASCENDING)])
        except PyMongoError as exc:
            raise StoreUnavailable(f"mongodb: {exc}") from exc

    # -- what the product writes (and tests and benchmarks) ----------------------------------------------
    def put_alerts(self, docs: Sequence[Mapping[str, Any]]) -> None:
        for start in range(0, len(docs), self._bulk):
            chunk = [dict(d) for d in docs[start : start + self._bulk]]
            self._guard(lambda c=chunk: self.alerts.insert_many(c, ordered=False))

    def put_alert(self, doc: Mapping[str, Any]) -> None:
        self._guard(lambda: self.alerts.replace_one({"_id": doc["_id"]}, dict(doc), upsert=True))

    def put_parts(self, docs: Sequence[Mapping[str, Any]]) -> None:
        ops = [UpdateOne({"_id": d["_id"]}, {"$set": dict(d)}, upsert=True) for d in docs]
        for start in range(0, len(ops), self._bulk):
            chunk = ops[start : start + self._bulk]
            self._guard(lambda c=chunk: self.parts_collection.bulk_write(c, ordered=False))

    def alert_doc(self, alert_id: str) -> dict[str, Any] | None:
        doc = self._guard(lambda: self.alerts.find_one({"_id": alert_id}))
        return dict(doc) if doc is not None else None

    def notifications(self) -> list[Notification]:
        return [notification_from(d) for d in self._guard(lambda: list(self.notes.find().sort("_id", ASCENDING)))]

    # -- the port ------------------------------------------------------------------------------------------
    def alerts_after(self, after: str | None, limit: int) -> list[Alert]:
        query: Doc = {"$or": [{"rules.0": {"$exists": True}}, {"alertRules.0": {"$exists": True}}]}
        if after is not None:
            query = {"$and": [query, {"_id": {"$gt": after}}]}
        docs = self._guard(lambda: list(self.alerts.find(query).sort("_id", ASCENDING).limit(limit)))
        alerts = []
        for doc in docs:
            alert = alert_from(doc, None)
            alerts.append(
                Alert(
                    alert.id,
                    alert.user_id,
                    alert.part_id,
                    alert.email,
                    alert.rules,
                    alert.raw_rules,
                    doc.get(alert.rules_field),
                    alert.rules_field,
                )
            )
        return alerts

    def parts(self, part_ids: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        if not part_ids:
            return {}
        docs = self._guard(lambda: list(self.parts_collection.find({"_id": {"$in": list(part_ids)}})))
        return {str(d["_id"]): d for d in docs}

    def write_back(self, updates: Sequence[AlertUpdate], now: datetime) -> int:
        ops = [
            UpdateOne(
                {"_id": u.alert_id, u.rules_field: u.revision},
                {"$set": {u.rules_field: u.rules, "scannedAt": now}},
            )
            for u in updates
        ]
        applied = 0
        for start in range(0, len(ops), self._bulk):
            chunk = ops[start : start + self._bulk]
            applied += int(self._guard(lambda c=chunk: self.alerts.bulk_write(c, ordered=False)).modified_count)
        return applied

    def add_notifications(self, notes: Sequence[Notification]) -> int:
        return sum(self._insert(notes[i : i + self._bulk]) for i in range(0, len(notes), self._bulk))

    def _insert(self, notes: Sequence[Notification]) -> int:
        try:
            result = self.notes.bulk_write([InsertOne(notification_doc(n)) for n in notes], ordered=False)
            return int(result.inserted_count)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if any(not _duplicate(e) for e in errors):
                raise StoreUnavailable(f"mongodb: {exc}") from exc
            return int(exc.details.get("nInserted", 0))
        except PyMongoError as exc:
            raise StoreUnavailable(f"mongodb: {exc}") from exc

    def claim_emails(self, *, now: datetime, limit: int, lease: timedelta) -> list[Notification]:
        window = math.floor(now.timestamp() / max(lease.total_seconds(), 1.0))
        query: Doc = {
            "$or": [
                {"email.status": "pending"},
                {"email.status": "sending", "email.claimedUntil": {"$lt": now}},
            ]
        }
        candidates = self._guard(lambda: list(self.notes.find(query).sort("createdAt", ASCENDING).limit(limit)))
        claimed = []
        for doc in candidates:
            email = doc.get("email") or {}
            mark = f"{doc['_id']}:{int(email.get('attempts', 0))}:{window}"
            try:
                self.claims.insert_one({"_id": mark, "at": now})
            except DuplicateKeyError:
                continue  # another scanner has it
            except PyMongoError as exc:
                if "duplicate" in str(exc).lower():
                    continue
                raise StoreUnavailable(f"mongodb: {exc}") from exc
            self._guard(
                lambda d=doc: self.notes.update_one(
                    {"_id": d["_id"]}, {"$set": {"email.status": "sending", "email.claimedUntil": now + lease}}
                )
            )
            claimed.append(notification_from(doc))
        self._guard(lambda: self.claims.delete_many({"at": {"$lt": now - 10 * lease}}))
        return claimed

    def finish_email(self, note_id: str, *, sent: bool, error: str | None, now: datetime, give_up: bool) -> None:
        status = "sent" if sent else ("failed" if give_up else "pending")
        change: Doc = {"$set": {"email.status": status, "email.error": error, "email.claimedUntil": None}}
        change["$inc"] = {"email.attempts": 1}
        if sent:
            change["$set"]["email.sentAt"] = now
        self._guard(lambda: self.notes.update_one({"_id": note_id}, change))

    def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless the server answers (the plug-in's health check)."""
        self._guard(lambda: self._client.admin.command("ping"))

    def close(self) -> None:
        """The client is shared (``shared_client``): nothing to close here."""

    @staticmethod
    def _guard(call: Any) -> Any:
        try:
            return call()
        except PyMongoError as exc:
            raise StoreUnavailable(f"mongodb: {exc}") from exc


def _duplicate(error: Mapping[str, Any]) -> bool:
    # FerretDB 1.24 reports some unique violations as code 1 with the text only
    return error.get("code") == DUPLICATE_KEY or "duplicate" in str(error.get("errmsg", "")).lower()
