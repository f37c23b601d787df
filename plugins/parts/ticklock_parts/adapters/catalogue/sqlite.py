"""The catalogue walk's data on the embedded SQLite file: the ``parts`` table the scanner reads too,
``price_history``, ``walk_state`` (the cursor) and ``vendor_quota`` (requests per UTC day). A request is
counted by one conditional ``UPDATE`` in an immediate transaction, so processes sharing the file never
count past the quota."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ticklock_parts.adapters.alerts.sqlite import SQLiteAlertStore, dumps
from ticklock_parts.catalogue.ports import PartRef, SpotPrice

WALK = "catalogue.spot_prices"
_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS price_history (
        part_id TEXT NOT NULL, price REAL NOT NULL, currency TEXT NOT NULL, at TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS price_history_part ON price_history (part_id, at)",
    "CREATE TABLE IF NOT EXISTS walk_state (id TEXT PRIMARY KEY, cursor TEXT, updated_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS vendor_quota (day TEXT PRIMARY KEY, used INTEGER NOT NULL)",
]


class SQLiteCatalogueStore(SQLiteAlertStore):
    """The ``CatalogueStore`` port on SQLite (the same file, and parts table, as the alert store)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        with self._tx() as db:
            for statement in _SCHEMA:
                db.execute(statement)

    def parts_after(self, cursor: str | None, limit: int) -> list[PartRef]:
        found: list[PartRef] = []
        last = cursor or ""
        while len(found) < limit:
            rows = self._read("SELECT id, doc FROM parts WHERE id > ? ORDER BY id LIMIT ?", (last, limit))
            if not rows:
                break
            for part_id, text in rows:
                last = part_id
                mpn = json.loads(text).get("mpn")
                if isinstance(mpn, str) and mpn.strip():
                    found.append(PartRef(part_id, mpn))
                    if len(found) == limit:
                        break
        return found

    def load_cursor(self) -> str | None:
        rows = self._read("SELECT cursor FROM walk_state WHERE id = ?", (WALK,))
        return rows[0][0] if rows else None

    def save_cursor(self, cursor: str | None, now: datetime) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO walk_state (id, cursor, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET cursor = excluded.cursor, updated_at = excluded.updated_at",
                (WALK, cursor, now.isoformat()),
            )

    def record_prices(self, prices: Sequence[tuple[PartRef, SpotPrice]], now: datetime) -> None:
        with self._tx() as db:
            for part, price in prices:
                rows = db.execute("SELECT doc FROM parts WHERE id = ?", (part.id,)).fetchall()
                if not rows:
                    continue
                doc = json.loads(rows[0][0])
                doc.update(price=price.price, currency=price.currency, priceUpdatedAt=now.isoformat())
                db.execute("UPDATE parts SET doc = ? WHERE id = ?", (dumps(doc), part.id))
                db.execute(
                    "INSERT INTO price_history (part_id, price, currency, at) VALUES (?, ?, ?, ?)",
                    (part.id, price.price, price.currency, now.isoformat()),
                )

    def take_request(self, day: str, quota: int) -> bool:
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO vendor_quota (day, used) VALUES (?, 0)", (day,))
            return bool(
                db.execute("UPDATE vendor_quota SET used = used + 1 WHERE day = ? AND used < ?", (day, quota)).rowcount
            )

    def history(self, part_id: str) -> list[tuple[float, str, str]]:
        rows = self._read("SELECT price, currency, at FROM price_history WHERE part_id = ? ORDER BY at", (part_id,))
        return [(float(r[0]), str(r[1]), str(r[2])) for r in rows]

    def requests_used(self, day: str) -> int:
        rows = self._read("SELECT used FROM vendor_quota WHERE day = ?", (day,))
        return int(rows[0][0]) if rows else 0
