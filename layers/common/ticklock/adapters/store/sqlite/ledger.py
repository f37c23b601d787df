"""The ``LedgerStore`` role on SQLite: the fires that did not run, one row per entry (a run of slots is one row)."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from ticklock.adapters.records import LEDGER_FIELDS, ledger_from_record, ledger_record
from ticklock.adapters.store.sqlite.connection import Connection
from ticklock.adapters.store.sqlite.rows import MICROS, us
from ticklock.adapters.store.sqlite.schema import LEDGER_COLUMNS
from ticklock.domain.ledger import LedgerEntry
from ticklock.ports import LedgerStore

_SLOTS = ", ".join("?" * len(LEDGER_FIELDS))


class Ledger(Connection, LedgerStore):
    def record_fire(self, entry: LedgerEntry) -> bool:
        values = ledger_record(entry, MICROS)
        values["capped"] = int(entry.capped)
        with self._tx() as conn:
            cursor = conn.execute(
                f"INSERT INTO ledger ({LEDGER_COLUMNS}) VALUES ({_SLOTS}) ON CONFLICT (id) DO NOTHING",
                tuple(values[f] for f in LEDGER_FIELDS),
            )
            return cursor.rowcount == 1

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
        clauses = ["first_at <= ?", "last_at >= ?"]
        args: list[Any] = [us(end), us(start)]
        for column, value in (("job_id", job_id), ("outcome", outcome), ("reason", reason)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        sql = f"SELECT {LEDGER_COLUMNS} FROM ledger WHERE {' AND '.join(clauses)} ORDER BY first_at DESC, id LIMIT ?"

        def query(conn: sqlite3.Connection) -> list[Any]:
            return conn.execute(sql, (*args, limit)).fetchall()

        return [ledger_from_record(dict(zip(LEDGER_FIELDS, row, strict=True)), MICROS) for row in self._read(query)]
