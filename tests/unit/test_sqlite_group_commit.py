"""The SQLite store's group commit (``Connection._write``): writes queued while another thread holds the
write lock are committed together by whichever thread takes it next, each caller gets its own outcome,
and an op that fails fails alone."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_until
from ticklock.adapters.store.sqlite import SQLiteStore


def _queued_behind_the_lock(store: SQLiteStore, ops: list[Any]) -> list[Any]:
    """Run each op through ``_write`` on a thread of its own while the test holds the write lock, so that
    all of them queue; then let go, and return what each call returned or raised."""
    outcomes: list[Any] = [None] * len(ops)

    def call(i: int) -> None:
        try:
            outcomes[i] = store._write(ops[i])
        except BaseException as exc:  # noqa: BLE001 - the outcome under test
            outcomes[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(ops))]
    with store._mutex:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while len(store._queued) < len(ops):
            assert time.monotonic() < deadline, "the writes did not queue"
            time.sleep(0.001)
    for thread in threads:
        thread.join(10)
    return outcomes


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = SQLiteStore(tmp_path / "group.db")
    with s._tx() as conn:
        conn.execute("CREATE TABLE scratch (n INTEGER PRIMARY KEY)")
    yield s
    s.close()


def rows(store: SQLiteStore) -> list[int]:
    return [n for (n,) in store._read(lambda c: c.execute("SELECT n FROM scratch ORDER BY n").fetchall())]


def insert(n: int) -> Any:
    def op(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT INTO scratch (n) VALUES (?)", (n,))
        return n * 10

    return op


def test_queued_writes_are_committed_together_and_each_caller_gets_its_own_result(store: SQLiteStore) -> None:
    commits: list[str] = []
    store._conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    outcomes = _queued_behind_the_lock(store, [insert(n) for n in range(8)])
    store._conn.set_trace_callback(None)
    assert outcomes == [n * 10 for n in range(8)]
    assert rows(store) == list(range(8))
    assert len(commits) == 1  # one transaction for the eight


def test_an_op_that_fails_fails_alone_and_the_others_are_committed(store: SQLiteStore) -> None:
    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO scratch (n) VALUES (100)")
        raise ValueError("this op is broken")

    ops = [insert(1), insert(2), broken, insert(3)]
    outcomes = _queued_behind_the_lock(store, ops)
    assert outcomes[0] == 10 and outcomes[1] == 20 and outcomes[3] == 30
    assert isinstance(outcomes[2], ValueError)
    assert rows(store) == [1, 2, 3]  # nothing of the broken op's is left


def test_a_constraint_violation_reaches_its_caller_as_it_did_alone(store: SQLiteStore) -> None:
    outcomes = _queued_behind_the_lock(store, [insert(5), insert(5), insert(6)])
    assert sorted(o for o in outcomes if isinstance(o, int)) == [50, 60]
    assert sum(isinstance(o, sqlite3.IntegrityError) for o in outcomes) == 1
    assert rows(store) == [5, 6]


def test_an_interrupt_fails_the_writes_it_cut_short_and_is_raised_where_it_happened(store: SQLiteStore) -> None:
    def interrupted(conn: sqlite3.Connection) -> None:
        raise KeyboardInterrupt

    outcomes = _queued_behind_the_lock(store, [insert(1), interrupted, insert(2)])
    interrupts = [o for o in outcomes if isinstance(o, KeyboardInterrupt)]
    assert len(interrupts) == 1  # in the one thread that ran the group
    assert all(isinstance(o, (KeyboardInterrupt, Exception)) for o in outcomes)  # no write "succeeded" unrun
    assert rows(store) == []  # the group was rolled back
    # the store goes on: the next write commits
    assert store._write(insert(7)) == 70 and rows(store) == [7]


def test_the_wal_is_checkpointed_by_a_thread_of_its_own_after_writes(tmp_path: Path) -> None:
    from tests.support.factories import make_job
    from ticklock.adapters.store.sqlite.connection import WAL_BOUND

    store = SQLiteStore(tmp_path / "wal.db", checkpoint_every=0.05)
    try:
        # the commits themselves do not checkpoint (SQLite's own is only a bound, far off)
        assert store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_BOUND
        assert store.checkpoints == 0
        store.add_jobs([make_job(f"wal-{i}") for i in range(500)])
        wait_until(lambda: store.checkpoints > 0)
        assert store.checkpoints >= 1
        # with no writes, no more checkpoints
        seen = store.checkpoints
        time.sleep(0.3)
        assert store.checkpoints == seen
    finally:
        store.close()
    assert store._checkpointer is not None and not store._checkpointer.is_alive()  # stopped by close


def _commit_steadily(store: SQLiteStore, seconds: float, pause: float = 0.005) -> None:
    from tests.support.factories import make_job

    ends, n = time.monotonic() + seconds, 0
    while time.monotonic() < ends:
        store.add_jobs([make_job(f"busy-{n}")])
        n += 1
        time.sleep(pause)


def test_while_commits_keep_coming_a_long_wal_is_checkpointed_more_often_than_the_quiet_interval(
    tmp_path: Path,
) -> None:
    """Under a steady load the commit that crosses SQLite's own bound checkpoints (and fsyncs) what the
    thread has not copied yet, with every writer waiting: so while the WAL is long and commits come, the
    thread checkpoints every CHECKPOINT_BUSY seconds, not once per interval."""
    from ticklock.adapters.store.sqlite.connection import CHECKPOINT_BUSY

    every = 20 * CHECKPOINT_BUSY  # the quiet interval: once per it, one checkpoint would come within a second
    # wal_hurry=0: any WAL counts as long; wal_kept=0: any WAL could be truncated
    store = SQLiteStore(tmp_path / "busy.db", checkpoint_every=every, wal_kept=0, wal_hurry=0)
    try:
        _commit_steadily(store, 10 * CHECKPOINT_BUSY)
        assert store.checkpoints >= 3, f"{store.checkpoints} checkpoints in {10 * CHECKPOINT_BUSY} s of commits"
        assert store.truncations == 0  # never a quiet interval: the WAL is not truncated while commits come
    finally:
        store.close()


def test_while_commits_keep_coming_a_short_wal_is_checkpointed_once_per_interval_not_at_every_step(
    tmp_path: Path,
) -> None:
    """A WAL far from SQLite's bound (one that restarts, as under a spread load) is checkpointed once per
    ``checkpoint_every``: at every step the thread copied the pages the runs rewrite over and over ten
    times as often, for nothing the bound needed."""
    from ticklock.adapters.store.sqlite.connection import CHECKPOINT_BUSY

    every = 5 * CHECKPOINT_BUSY
    store = SQLiteStore(tmp_path / "short.db", checkpoint_every=every, wal_kept=0)
    try:
        _commit_steadily(store, 15 * CHECKPOINT_BUSY)  # fifteen steps of commits, three intervals
        # the first commit seen at once (step 1), then one an interval (steps 6 and 11): 3, not ~15
        assert 2 <= store.checkpoints <= 5, f"{store.checkpoints} checkpoints in three intervals of commits"
    finally:
        store.close()


def test_once_the_wal_has_restarted_a_long_wal_is_checkpointed_once_per_interval_again(tmp_path: Path) -> None:
    """A WAL the last checkpoint found long is checkpointed at every step; once a checkpoint finds it
    short again (it restarted: the first commit after a checkpoint that copied all of it, with no commit
    between, starts it again from its beginning), once per ``checkpoint_every`` again."""
    from tests.support.factories import make_job
    from ticklock.adapters.store.sqlite.connection import CHECKPOINT_BUSY

    every = 5 * CHECKPOINT_BUSY
    # long: over 800 frames. The 10,000 jobs below write ~1,100; the small commits after them (one job
    # each, every ~20 ms) ~100 an interval. (Under steady commits a WAL seldom restarts: a commit comes
    # while each checkpoint runs; it grows until SQLite's own bound restarts it, or a pause does.)
    store = SQLiteStore(tmp_path / "restart.db", checkpoint_every=every, wal_kept=1 << 30, wal_hurry=800)
    try:
        store.add_jobs([make_job(f"big-{i}") for i in range(10_000)])
        wait_until(lambda: store.checkpoints > 0)
        assert store.checkpoints == 1  # the first commit seen: at once, and the WAL found long
        # the first small commit restarts the WAL (nothing was committed since that checkpoint), and the
        # checkpoint at the next step finds it short; from then on, one an interval
        _commit_steadily(store, 15 * CHECKPOINT_BUSY, pause=0.02)
        after = store.checkpoints - 1
        # steps 1 and 2 (long, then found short), then one an interval: ~4 in fifteen steps, not ~15
        assert 2 <= after <= 6, f"{after} checkpoints in fifteen steps of small commits after a long WAL"
    finally:
        store.close()


def test_a_commit_between_checkpoints_is_checkpointed_an_interval_after_the_last_one(tmp_path: Path) -> None:
    """A commit that comes after the interval's checkpoint waits for the next one: it is not lost, nor
    checkpointed at once (a short WAL is checkpointed once per ``checkpoint_every``)."""
    from tests.support.factories import make_job
    from ticklock.adapters.store.sqlite.connection import CHECKPOINT_BUSY

    every = 10 * CHECKPOINT_BUSY
    store = SQLiteStore(tmp_path / "lone.db", checkpoint_every=every, wal_kept=1 << 30)  # no truncation
    try:
        store.add_jobs([make_job("lone-1")])
        wait_until(lambda: store.checkpoints > 0)
        assert store.checkpoints == 1  # the first commit seen: at once
        first = time.monotonic()
        time.sleep(3 * CHECKPOINT_BUSY)
        store.add_jobs([make_job("lone-2")])
        time.sleep(2 * CHECKPOINT_BUSY)
        if time.monotonic() - first < every - 2 * CHECKPOINT_BUSY:  # (a stalled machine may be past it)
            assert store.checkpoints == 1  # not at the step that saw it
        wait_until(lambda: store.checkpoints != 1)
        assert store.checkpoints == 2  # at the interval's end
        assert time.monotonic() - first >= every - 2 * CHECKPOINT_BUSY
    finally:
        store.close()


def test_the_wal_is_truncated_only_after_a_whole_quiet_interval_not_a_checkpoint_step(tmp_path: Path) -> None:
    """The thread wakes every CHECKPOINT_BUSY seconds, but truncates only once a whole ``checkpoint_every``
    has passed with nothing committed (a truncation holds the write lock while it waits for readers)."""
    from tests.support.factories import make_job

    path = tmp_path / "quiet.db"
    store = SQLiteStore(path, checkpoint_every=2.0, wal_kept=0)
    try:
        store.add_jobs([make_job("quiet-1")])
        wait_until(lambda: store.checkpoints > 0)
        assert store.checkpoints >= 1
        time.sleep(0.5)  # five of the thread's steps, a quarter of the quiet interval
        assert store.truncations == 0 and Path(f"{path}-wal").stat().st_size > 0
        wait_until(lambda: store.truncations != 0)
        assert store.truncations == 1 and Path(f"{path}-wal").stat().st_size == 0
    finally:
        store.close()


def test_a_long_wal_is_truncated_once_nothing_is_written_and_every_row_stays(tmp_path: Path) -> None:
    """Under a steady load the WAL may grow to its bound (the writers restart it rarely); the checkpoint
    thread gives the disk back once an interval passes in which nothing was committed, and loses nothing.
    The dispatcher's claims keep committing while nothing is due: those commits change nothing, and the
    WAL is truncated all the same."""
    from tests.support.factories import make_job

    path = tmp_path / "wal.db"
    wal = Path(f"{path}-wal")
    jobs = [make_job(f"wal-{i}", payload={"pad": "x" * 500}) for i in range(2_000)]  # > 1 MB of rows
    # above what opening the file leaves in the WAL (its tables and indexes, ~100 KB) and one more job
    store = SQLiteStore(path, checkpoint_every=0.05, wal_kept=256 * 1024)
    stop = threading.Event()

    def claim_nothing() -> None:  # as an idle dispatcher: a write transaction that matches no row
        long_ago = datetime(2000, 1, 1, tzinfo=UTC)
        while not stop.wait(0.02):
            store.claim_due(now=long_ago, horizon=long_ago, limit=100, owner="idle", slack=timedelta(seconds=60))

    claimer = threading.Thread(target=claim_nothing)
    try:
        store.add_jobs(jobs)
        claimer.start()
        wait_until(lambda: store.truncations != 0)
        assert store.truncations >= 1
        assert wal.stat().st_size == 0
        # another connection (as another process would) sees every row
        other = sqlite3.connect(path)
        try:
            assert other.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 2_000
        finally:
            other.close()
        # a short WAL is left alone: written again, it is checkpointed, not truncated
        truncated, checkpointed = store.truncations, store.checkpoints
        store.add_jobs([make_job("wal-one-more")])
        wait_until(lambda: store.checkpoints != checkpointed)
        time.sleep(0.2)
        assert store.checkpoints > checkpointed
        assert store.truncations == truncated and wal.stat().st_size > 0
        assert store.find_job_by_name("wal-one-more") is not None
    finally:
        stop.set()
        if claimer.is_alive():
            claimer.join()
        store.close()


def test_the_wal_is_not_truncated_while_another_connection_writes_to_it(tmp_path: Path) -> None:
    """Quiet here is not quiet everywhere: a CLI or a second service on the same file may be writing.
    While anyone commits, this store's thread leaves the WAL alone; once nobody does, it truncates."""
    path = tmp_path / "shared.db"
    store = SQLiteStore(path, checkpoint_every=0.5, wal_kept=0)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("PRAGMA synchronous=OFF")  # no fsync a commit: its commits come every ~5 ms
        wait_until(lambda: store.truncations != 0)  # what opening the file wrote
        base = store.truncations
        assert base >= 1
        other.execute("CREATE TABLE elsewhere (n INTEGER)")
        ends = time.monotonic() + 1.5  # three quiet intervals' worth, with commits all through them
        n = 0
        while time.monotonic() < ends:  # another connection's commits: none of them is this store's
            other.execute("INSERT INTO elsewhere VALUES (?)", (n,))
            n += 1
            time.sleep(0.005)
        assert store.truncations == base
        wait_until(lambda: store.truncations != base)
        assert store.truncations == base + 1
        assert Path(f"{path}-wal").stat().st_size == 0
        assert other.execute("SELECT COUNT(*) FROM elsewhere").fetchone()[0] == n
    finally:
        other.close()
        store.close()
