"""The scanner's data on the embedded SQLite file: ``alerts``, ``parts`` and ``notifications`` tables of
JSON documents (the shapes in ``ticklock_parts.alerts.documents``), times as ISO-8601 text.

An alert's revision is its JSON text as read: the write-back is ``UPDATE ... WHERE id = ? AND doc = ?``,
so an alert changed since (by another scanner, or by whoever writes alerts) is left alone. Email claims
are one conditional ``UPDATE``, atomic in SQLite.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ticklock.errors import StoreUnavailable
from ticklock_parts.alerts.documents import Alert, AlertUpdate, Notification, alert_from

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS alerts (id TEXT PRIMARY KEY, doc TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS parts (id TEXT PRIMARY KEY, doc TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS notifications (
        id TEXT PRIMARY KEY,
        doc TEXT NOT NULL,
        email_status TEXT,
        claimed_until TEXT,
        created_at TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS notifications_email ON notifications (email_status, claimed_until)",
]


def dumps(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, default=_default, separators=(",", ":"))


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


class SQLiteAlertStore:
    """The ``AlertStore`` port on SQLite."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            for statement in _SCHEMA:
                self._db.execute(statement)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open {self.path}: {exc}") from exc
        self._mutex = threading.Lock()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._mutex:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"sqlite: {exc}") from exc

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._mutex:
            try:
                return list(self._db.execute(sql, args).fetchall())
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"sqlite: {exc}") from exc

    # -- what the product writes (and tests and benchmarks) ----------------------------------------------
    def put_alert(self, doc: Mapping[str, Any]) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO alerts (id, doc) VALUES (?, ?)", (str(doc["_id"]), dumps(doc)))

    def put_parts(self, docs: Sequence[Mapping[str, Any]]) -> None:
        with self._tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO parts (id, doc) VALUES (?, ?)", [(str(d["_id"]), dumps(d)) for d in docs]
            )

    def put_alerts(self, docs: Sequence[Mapping[str, Any]]) -> None:
        with self._tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO alerts (id, doc) VALUES (?, ?)", [(str(d["_id"]), dumps(d)) for d in docs]
            )

    def alert_doc(self, alert_id: str) -> dict[str, Any] | None:
        rows = self._read("SELECT doc FROM alerts WHERE id = ?", (alert_id,))
        return dict(json.loads(rows[0][0])) if rows else None

    def notifications(self) -> list[Notification]:
        return [_note(json.loads(r[0])) for r in self._read("SELECT doc FROM notifications ORDER BY id")]

    # -- the port ------------------------------------------------------------------------------------------
    def alerts_after(self, after: str | None, limit: int) -> list[Alert]:
        rows = self._read("SELECT doc FROM alerts WHERE id > ? ORDER BY id LIMIT ?", (after or "", limit * 2))
        alerts: list[Alert] = []
        last = after
        while rows:
            for (text,) in rows:
                doc = json.loads(text)
                last = str(doc.get("_id"))
                alert = alert_from(doc, text)
                if alert.rules:
                    alerts.append(alert)
                    if len(alerts) == limit:
                        return alerts
            rows = self._read("SELECT doc FROM alerts WHERE id > ? ORDER BY id LIMIT ?", (last, limit * 2))
        return alerts

    def parts(self, part_ids: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        if not part_ids:
            return {}
        marks = ",".join("?" * len(part_ids))
        rows = self._read(f"SELECT id, doc FROM parts WHERE id IN ({marks})", list(part_ids))
        return {row[0]: json.loads(row[1]) for row in rows}

    def write_back(self, updates: Sequence[AlertUpdate], now: datetime) -> int:
        applied = 0
        with self._tx() as db:
            for update in updates:
                doc = json.loads(update.revision)
                doc[update.rules_field] = update.rules
                doc["scannedAt"] = now
                applied += db.execute(
                    "UPDATE alerts SET doc = ? WHERE id = ? AND doc = ?", (dumps(doc), update.alert_id, update.revision)
                ).rowcount
        return applied

    def add_notifications(self, notes: Sequence[Notification]) -> int:
        inserted = 0
        with self._tx() as db:
            for note in notes:
                inserted += db.execute(
                    "INSERT OR IGNORE INTO notifications (id, doc, email_status, created_at) VALUES (?, ?, ?, ?)",
                    (note.id, dumps(_doc(note)), note.email_status, note.created_at.isoformat()),
                ).rowcount
        return inserted

    def claim_emails(self, *, now: datetime, limit: int, lease: timedelta) -> list[Notification]:
        until = (now + lease).isoformat()
        with self._tx() as db:
            rows = db.execute(
                """UPDATE notifications SET email_status = 'sending', claimed_until = ?
                   WHERE id IN (SELECT id FROM notifications
                                WHERE email_status = 'pending'
                                   OR (email_status = 'sending' AND claimed_until < ?)
                                ORDER BY created_at LIMIT ?)
                   RETURNING doc""",
                (until, now.isoformat(), limit),
            ).fetchall()
        return [_note(json.loads(r[0])) for r in rows]

    def finish_email(self, note_id: str, *, sent: bool, error: str | None, now: datetime, give_up: bool) -> None:
        with self._tx() as db:
            rows = db.execute("SELECT doc FROM notifications WHERE id = ?", (note_id,)).fetchall()
            if not rows:
                return
            doc = json.loads(rows[0][0])
            email = dict(doc.get("email") or {})
            status = "sent" if sent else ("failed" if give_up else "pending")
            email.update(status=status, attempts=int(email.get("attempts", 0)) + 1, error=error)
            if sent:
                email["sentAt"] = now
            doc["email"] = email
            db.execute(
                "UPDATE notifications SET doc = ?, email_status = ?, claimed_until = NULL WHERE id = ?",
                (dumps(doc), status, note_id),
            )

    def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless the file answers a query (the plug-in's health check)."""
        with self._mutex:
            try:
                self._db.execute("SELECT 1 FROM alerts LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"{self.path}: {exc}") from exc

    def close(self) -> None:
        with self._mutex:
            self._db.close()


def _doc(note: Notification) -> dict[str, Any]:
    return {
        "_id": note.id,
        "alertId": note.alert_id,
        "ruleId": note.rule_id,
        "userId": note.user_id,
        "partId": note.part_id,
        "type": note.type,
        "message": note.message,
        "createdAt": note.created_at,
        "email": None
        if note.email_to is None
        else {
            "to": note.email_to,
            "status": note.email_status,
            "attempts": note.email_attempts,
            "error": note.email_error,
        },
    }


def _note(doc: Mapping[str, Any]) -> Notification:
    email = doc.get("email") or {}
    created = doc["createdAt"]
    return Notification(
        id=str(doc["_id"]),
        alert_id=str(doc["alertId"]),
        rule_id=str(doc["ruleId"]),
        user_id=str(doc.get("userId", "")),
        part_id=str(doc.get("partId", "")),
        type=str(doc.get("type", "")),
        message=str(doc.get("message", "")),
        created_at=created if isinstance(created, datetime) else datetime.fromisoformat(created),
        email_to=email.get("to"),
        email_status=email.get("status"),
        email_attempts=int(email.get("attempts", 0)),
        email_error=email.get("error"),
    )


notification_doc = _doc
notification_from = _note
