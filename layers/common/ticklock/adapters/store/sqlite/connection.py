"""The SQLite file: opening and migrating it, write transactions, and a reader connection per thread."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from ticklock.adapters.store.sqlite.schema import ADDED_COLUMNS, BACKFILLS, INDEXES, SCHEMA_VERSION, TABLES
from ticklock.errors import StoreUnavailable

T = TypeVar("T")


class Connection:
    """The file, its write connection and a reader per thread; every part of the store builds on it."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 30.0) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite store at {self.path}: {exc}") from exc
        self._mutex = threading.Lock()
        self._busy_timeout = busy_timeout
        # Reads go through a connection per thread: in WAL mode they never wait for a writer, so a write
        # lock held elsewhere (another process, a slow disk) delays writes only, not GETs or the health ping.
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._closed = False

    def _columns(self, table: str) -> set[str]:
        return {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}

    def _migrate(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreUnavailable(
                    f"{self.path} has schema version {version}; this ticklock knows {SCHEMA_VERSION}: upgrade ticklock"
                )
            # the tables a file lacks, then the columns an older file's tables lack, then the indexes (which
            # may index those columns)
            for statement in TABLES:
                self._conn.execute(statement)
            for table, column, kind in ADDED_COLUMNS:
                if column not in self._columns(table):
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            for statement in INDEXES:
                self._conn.execute(statement)
            for target, statements in BACKFILLS.items():
                if 0 < version < target:  # a file written before: a new one has nothing to fill
                    for statement in statements:
                        self._conn.execute(statement)
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    # -- plumbing ---------------------------------------------------------------------------------
    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        with self._mutex:
            try:
                self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"SQLite store {self.path}: {exc}") from exc
            try:
                yield self._conn
            except sqlite3.IntegrityError:
                self._conn.execute("ROLLBACK")
                raise
            except sqlite3.Error as exc:
                self._conn.execute("ROLLBACK")
                raise StoreUnavailable(f"SQLite store {self.path}: {exc}") from exc
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._conn.execute("ROLLBACK")
                    raise StoreUnavailable(f"SQLite store {self.path}: {exc}") from exc

    def _read(self, func: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._reader()
        if conn is None:
            with self._tx(write=False) as shared:
                return func(shared)
        try:
            conn.execute("BEGIN")
            try:
                return func(conn)
            finally:
                if conn.in_transaction:  # never leave this thread's connection inside a transaction
                    try:
                        conn.execute("COMMIT")
                    except sqlite3.Error:
                        conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite store {self.path}: {exc}") from exc

    def _reader(self) -> sqlite3.Connection | None:
        if self.path == ":memory:":
            return None  # a second connection would be a second, empty database
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            with self._mutex:
                if self._closed:
                    raise StoreUnavailable(f"SQLite store {self.path} is closed")
                try:
                    conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None,
                                           check_same_thread=False)  # fmt: skip
                except sqlite3.Error as exc:
                    raise StoreUnavailable(f"cannot open SQLite store at {self.path}: {exc}") from exc
                self._readers.append(conn)
            self._local.conn = conn
        return conn

    def ping(self) -> None:
        self._read(lambda c: c.execute("SELECT 1 FROM jobs LIMIT 1").fetchone())

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            for reader in self._readers:
                reader.close()
            self._readers.clear()
            self._conn.close()
