"""The SQLite file: opening and migrating it, write transactions, and a reader connection per thread."""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Generic, TypeVar

from ticklock.adapters.store.sqlite.schema import (
    ADDED_COLUMNS,
    BACKFILLS,
    COUNTER,
    INDEXES,
    REBUILT,
    SCHEMA_VERSION,
    SEARCH,
    SEARCH_TRIGGERS,
    TABLES,
)
from ticklock.errors import StoreUnavailable
from ticklock.ports import StoreConnection

log = logging.getLogger("ticklock.store")

T = TypeVar("T")

# another process's write lock is tried for again after this long, doubling up to the second figure
BUSY_PAUSE, BUSY_PAUSE_MAX = 0.0001, 0.002
# The WAL is checkpointed by a thread of its own after writes (PASSIVE: it waits for no reader or writer),
# not by SQLite inside the commit that crosses its threshold, where every writer would wait behind it and
# the pages the runs rewrite over and over would be copied again and again. SQLite's own checkpoint is kept
# as a bound only, at WAL_BOUND pages (~400 MB), should the thread fall behind.
#
# Under a steady stream of writes only that bound's checkpoint can restart the WAL from its beginning (the
# thread's never ends with no frame left over), and that restart's fsyncs pause every writer: so the bound
# is high, the file may reach ~400 MB under a sustained load, and the thread truncates a WAL longer than
# WAL_KEPT bytes once a checkpoint's interval passes with nothing committed (``_checkpoint_loop``).
#
# While the WAL is long (its last checkpoint found more than WAL_HURRY frames) and commits keep coming, the
# thread checkpoints every CHECKPOINT_BUSY seconds rather than every CHECKPOINT_EVERY, so that the commit
# that crosses the bound finds little left to copy and fsync; a short WAL is checkpointed once per
# CHECKPOINT_EVERY, which copies the often-rewritten pages less often. ``bench/fires.py`` (g) measures both.
CHECKPOINT_EVERY, CHECKPOINT_BUSY, WAL_BOUND, WAL_KEPT = 1.0, 0.1, 100_000, 16 << 20
WAL_HURRY = WAL_BOUND // 4  # frames (~100 MB): a WAL longer than this is checkpointed every CHECKPOINT_BUSY
TRUNCATE_WAIT_MS = 50  # the truncating checkpoint's wait for a reader or writer, at most; tried again later


class Connection(StoreConnection):
    """The file, its write connection and a reader per thread; every part of the store builds on it. The
    ``StoreConnection`` role (``ping``, ``close``)."""

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = 30.0,
        checkpoint_every: float = CHECKPOINT_EVERY,
        wal_kept: int = WAL_KEPT,
        wal_hurry: int = WAL_HURRY,
    ) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
            self._wal = str(mode).lower() == "wal"
            if self._wal:
                # from here on a busy write lock is waited for by ``_begin``, not by SQLite's busy handler: in
                # WAL mode only BEGIN IMMEDIATE waits for it (without WAL a COMMIT waits for readers too)
                self._conn.execute("PRAGMA busy_timeout=0")
                self._conn.execute(f"PRAGMA wal_autocheckpoint={WAL_BOUND}")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite store at {self.path}: {exc}") from exc
        self._mutex = threading.Lock()
        self._queued: list[_Write[object]] = []  # writes waiting for the next group commit (``_write``)
        self._queue_lock = threading.Lock()
        self._busy_timeout = busy_timeout
        # Reads go through a connection per thread: in WAL mode they never wait for a writer, so a write
        # lock held elsewhere (another process, a slow disk) delays writes only, not GETs or the health ping.
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._closed = False
        self.checkpoints = 0  # checkpoints the thread ran (for tests)
        self.truncations = 0  # and WAL truncations once writes stopped
        self._stopping = threading.Event()
        self._checkpointer: threading.Thread | None = None
        if self._wal and checkpoint_every > 0:
            # opened here, not in the thread: what is committed from now on is what it checkpoints
            checkpointing = self._checkpoint_connection()
            self._checkpointer = threading.Thread(
                target=self._checkpoint_loop,
                args=(checkpoint_every, wal_kept, wal_hurry, checkpointing),
                name="ticklock-sqlite-checkpoint",
                daemon=True,
            )
            self._checkpointer.start()

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
            self._rebuild_if_constrained(*REBUILT)
            for statement in INDEXES:
                self._conn.execute(statement)
            if not self._conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'jobs_counts'").fetchone():
                for statement in COUNTER:
                    self._conn.execute(statement)
            triggers = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
            if not set(SEARCH_TRIGGERS) <= triggers:
                for statement in SEARCH:
                    self._conn.execute(statement)
            for target, statements in BACKFILLS.items():
                if 0 < version < target:  # a file written before: a new one has nothing to fill
                    for statement in statements:
                        self._conn.execute(statement)
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._conn.execute("COMMIT")
        except BaseException:
            self._rollback()  # a full disk or an I/O error may have ended it: the error that did is the one told
            raise

    def _rebuild_if_constrained(self, table: str, column: str, create: str) -> None:
        """``table`` built afresh by ``create`` (its rows, rowids and columns kept) if an older schema made
        ``column`` UNIQUE (an index SQLite drops only with its table); its indexes are then created by
        ``_migrate``. A fire's execution was unique by ``fire_key`` until schema 6, by its columns since
        (``schema.FIRE_UNIQUE``): the same fires, as the key is made of them. In the migration's
        transaction: a failure leaves the file as it was. A copy of every row: logged, with how long it took
        (README, "Upgrading")."""
        constrained = any(
            origin == "u" and [r[2] for r in self._conn.execute(f"PRAGMA index_info({name})")] == [column]
            for _, name, _, origin, _ in self._conn.execute(f"PRAGMA index_list({table})")
        )
        if not constrained:
            return
        rows = self._conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        log.warning("store.rebuilding", extra={"path": self.path, "table": table, "rows": rows})
        began = time.monotonic()
        columns = ", ".join(row[1] for row in self._conn.execute(f"PRAGMA table_info({table})"))
        # not IF NOT EXISTS: a table of that name that is not this migration's own is an error, not a target
        self._conn.execute(create.replace("IF NOT EXISTS ", "").format(name=f"{table}_rebuilt"))
        self._conn.execute(f"INSERT INTO {table}_rebuilt (rowid, {columns}) SELECT rowid, {columns} FROM {table}")
        self._conn.execute(f"DROP TABLE {table}")  # its indexes with it
        # a view or trigger a user made on the table keeps naming it (legacy: the rename does not rewrite
        # them, nor fail on them); the project makes none
        self._conn.execute("PRAGMA legacy_alter_table=ON")
        try:
            self._conn.execute(f"ALTER TABLE {table}_rebuilt RENAME TO {table}")
        finally:
            self._conn.execute("PRAGMA legacy_alter_table=OFF")
        seconds = round(time.monotonic() - began, 3)
        log.warning("store.rebuilt", extra={"table": table, "rows": rows, "seconds": seconds})

    # -- plumbing ---------------------------------------------------------------------------------
    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        with self._mutex, self._tx_held(write) as conn:
            yield conn

    @contextmanager
    def _tx_held(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        """A transaction on the write connection; the caller holds ``_mutex``."""
        try:
            self._begin() if write else self._conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite store {self.path}: {exc}") from exc
        try:
            yield self._conn
        except sqlite3.IntegrityError:
            self._rollback()
            raise
        except sqlite3.Error as exc:
            self._rollback()
            raise StoreUnavailable(f"SQLite store {self.path}: {exc}") from exc
        except BaseException:
            self._rollback()
            raise
        else:
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise StoreUnavailable(f"SQLite store {self.path}: {exc}") from exc

    def _rollback(self) -> None:
        """ROLLBACK if a transaction is open (after an I/O error or a full disk SQLite may have ended it)."""
        if self._conn.in_transaction:
            with suppress(sqlite3.Error):  # nothing more can be undone; the error that led here is reported
                self._conn.execute("ROLLBACK")

    def _write(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """``op`` in a write transaction of its own meaning, committed together with the writes other threads
        queued meanwhile (group commit, by whichever of them takes the write lock first: no extra thread).
        Each op sees the ones before it, as if run one after another; this returns once its commit is done.
        If an op raises, the group is rolled back and each of its ops is run again in a transaction of its
        own, so that only the op at fault fails.

        Why: a commit writes every page its transaction touched (the rows and each index) to the WAL. Under
        load the runners' start and finish writes touch the same index pages, so ten fires in one commit
        cost little more than one; one commit per write was most of a fire's CPU in the store."""
        write: _Write[T] = _Write(op)
        with self._queue_lock:
            self._queued.append(write)  # type: ignore[arg-type]
        try:
            with self._mutex:
                if not write.done:  # nobody took it along: this thread commits what is queued, its own included
                    with self._queue_lock:
                        group, self._queued = self._queued, []
                    self._commit(group)
        except BaseException:
            with self._queue_lock:  # interrupted before anyone ran it: it must not run after this raises
                if write in self._queued:
                    self._queued.remove(write)  # type: ignore[arg-type]
            raise
        if not write.done:  # cannot happen: every group's writes are settled before the lock is let go
            raise StoreUnavailable(f"SQLite store {self.path}: a write was not carried out")
        return write.outcome()

    def _commit(self, group: list[_Write[object]]) -> None:
        """Under ``_mutex``: the group in one transaction, or (one failed, or the commit) each alone. Every
        write of the group is settled when this returns or raises."""
        try:
            if len(group) == 1:
                self._alone(group[0])
            else:
                self._commit_group(group)
        finally:
            for write in group:
                if not write.done:  # an interrupt (KeyboardInterrupt, SystemExit) cut the group short
                    write.fail(StoreUnavailable(f"SQLite store {self.path}: the write was interrupted"))

    def _commit_group(self, group: list[_Write[object]]) -> None:
        try:
            self._begin()
        except sqlite3.Error as exc:
            for write in group:
                write.fail(StoreUnavailable(f"SQLite store {self.path}: {exc}"))
            return
        try:
            results = [write.op(self._conn) for write in group]
            self._conn.execute("COMMIT")
        except Exception:  # noqa: BLE001 - the group is undone; each op then meets its own outcome
            self._rollback()
            for write in group:
                self._alone(write)
            return
        except BaseException:
            self._rollback()  # an interrupt: raised in the thread it reached, the others' writes fail
            raise
        for write, result in zip(group, results, strict=True):
            write.succeed(result)

    def _alone(self, write: _Write[object]) -> None:
        try:
            with self._tx_held() as conn:
                result = write.op(conn)
        except Exception as exc:  # noqa: BLE001 - handed to the thread that asked for the write
            write.fail(exc)
        else:
            write.succeed(result)

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE``, waiting for a write lock held by another process in steps of 0.1-2 ms, for
        up to the busy timeout. SQLite's own busy handler sleeps 1, 2, 5, 10 ... 100 ms between tries: with
        writers in several processes (the Lambda shape's runners on one file, ``serve`` beside a CLI) each
        of its waits outlives the other process's transaction by far, while every thread of this process
        queues behind it on ``_mutex``, and the cores stand idle."""
        pause, deadline = BUSY_PAUSE, time.monotonic() + self._busy_timeout
        while True:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, BUSY_PAUSE_MAX)

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

    def _checkpoint_connection(self) -> tuple[sqlite3.Connection, int] | None:
        """The checkpoint thread's connection, and the file's ``data_version`` as it sees it now."""
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            return None
        try:
            # PASSIVE never waits; TRUNCATE holds the write lock while it waits for readers
            conn.execute(f"PRAGMA busy_timeout={TRUNCATE_WAIT_MS}")
            return conn, conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            conn.close()
            return None

    def _checkpoint_loop(
        self, every: float, kept: int, hurry: int, checkpointing: tuple[sqlite3.Connection, int] | None
    ) -> None:
        """On a connection of its own, in steps (``every`` cut into whole steps of at most ``CHECKPOINT_BUSY``
        s): a PASSIVE checkpoint of what was committed (by this store or any other connection or process)
        once per ``every``, or at every step while the WAL is long (the last checkpoint found more than
        ``hurry`` frames in it); once a whole ``every`` has passed in which nothing was committed, a WAL file
        longer than ``kept`` bytes is checkpointed to its end and truncated.

        "Committed" is SQLite's ``data_version``, not this store's commits: an idle dispatcher commits a
        claim of nothing every second, which writes no page, and a CLI or second service on the file
        commits without this store knowing. A truncation that finds a reader in its way (busy) is tried
        again after 1, 2, 4 ... 64 quiet intervals: TRUNCATE holds the write lock while it waits (up to
        TRUNCATE_WAIT_MS), copies what is left and truncates."""
        conn, seen = checkpointing if checkpointing is not None else (None, None)
        per = max(1, math.ceil(every / CHECKPOINT_BUSY - 1e-9))  # steps in a quiet interval: exactly ``every``
        step = every / per
        quiet = 0  # steps since the last one that saw a commit
        since = per  # steps since the last checkpoint (the first commit seen is checkpointed at once)
        pending = long = False  # commits not checkpointed yet; the WAL was long at the last checkpoint
        wait = backoff = 0  # quiet intervals to skip before the next truncation try; the last back-off
        try:
            while not self._stopping.wait(step):
                try:
                    if conn is None:  # could not be opened before: from here on, as if all were new
                        if (checkpointing := self._checkpoint_connection()) is None:
                            continue
                        conn, seen = checkpointing[0], None
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                    since += 1
                    if version != seen:
                        seen, quiet, pending = version, 0, True
                    else:
                        quiet += 1
                    if pending and (long or since >= per):
                        log = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
                        long, since, pending = log > hurry, 0, False
                        self.checkpoints += 1
                        continue
                    if not quiet:  # a commit came this step
                        continue
                    if quiet % per or self._wal_size() <= kept:  # not a whole quiet interval yet, or short
                        continue
                    if wait:
                        wait -= 1
                        continue
                    busy, log, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    if not busy and log == copied:  # all of it in the file: truncating copies nothing more
                        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                    if busy or log != copied:  # the next try after 1, 2, 4 ... 64 quiet intervals
                        backoff = min(64, 2 * backoff or 1)
                        wait = backoff - 1
                    else:
                        self.truncations += 1
                        wait = backoff = 0
                except sqlite3.Error:  # tried again next round; SQLite's own bound stays meanwhile
                    seen = None
        finally:
            if conn is not None:
                conn.close()

    def _wal_size(self) -> int:
        try:
            return os.path.getsize(f"{self.path}-wal")
        except OSError:  # no WAL file (yet)
            return 0

    def close(self) -> None:
        self._stopping.set()
        if self._checkpointer is not None:
            self._checkpointer.join(timeout=10)
        with self._mutex:
            self._closed = True
            for reader in self._readers:
                reader.close()
            self._readers.clear()
            self._conn.close()


class _Write(Generic[T]):
    """A write queued for a group commit, and what became of it."""

    __slots__ = ("done", "error", "op", "result")

    def __init__(self, op: Callable[[sqlite3.Connection], T]) -> None:
        self.op = op
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None

    def succeed(self, result: T) -> None:
        self.result, self.done = result, True

    def fail(self, error: BaseException) -> None:
        self.error, self.done = error, True

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]
