"""The dispatcher and the local worker pool, on the real SQLite store."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.factories import make_job
from tests.support.pools import one_at_a_time
from tests.support.recorders import RecordingMetrics
from tests.support.waiting import wait_until
from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.clock import FakeClock
from ticklock.domain.fires import Fire
from ticklock.domain.jobs import Job
from ticklock.engine.dispatcher import Dispatcher
from ticklock.engine.pool import WorkerPool


class Collector:
    """A pool whose work is to remember what it was given."""

    def __init__(self) -> None:
        self.fires: list[Fire] = []
        self.mutex = threading.Lock()

    def __call__(self, fire: Fire) -> None:
        with self.mutex:
            self.fires.append(fire)


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "d.db")
    yield store
    store.close()


def make_dispatcher(store: SQLiteStore, pool: WorkerPool, clock: FakeClock, **kw: object) -> Dispatcher:
    return Dispatcher(store=store, queue=pool, clock=clock, metrics=RecordingMetrics(), owner="d", **kw)  # type: ignore[arg-type]


def test_full_batches_are_claimed_again_until_nothing_is_due(sqlite: SQLiteStore) -> None:
    clock = FakeClock()
    sqlite.add_jobs([make_job(next_run_at=clock.now() - timedelta(milliseconds=i)) for i in range(250)])
    collected = Collector()
    pool = WorkerPool(one_at_a_time(collected), workers=4, queue_size=8)
    dispatcher = make_dispatcher(sqlite, pool, clock, batch_size=100)
    rounds = []
    while True:
        claimed, full = dispatcher.claim(clock.now())
        rounds.append(claimed)
        dispatcher.release_due(clock.now())
        if not full:
            break
    assert rounds == [100, 100, 50]
    pool.stop(5)
    assert len({f.job.id for f in collected.fires}) == 250


def test_fires_are_claimed_ahead_and_released_at_their_time(sqlite: SQLiteStore) -> None:
    clock = FakeClock()
    sqlite.add_job(make_job(next_run_at=clock.now() + timedelta(milliseconds=600)))
    sqlite.add_job(make_job(next_run_at=clock.now() + timedelta(milliseconds=1600)))
    collected = Collector()
    pool = WorkerPool(one_at_a_time(collected), workers=1)
    dispatcher = make_dispatcher(sqlite, pool, clock, lookahead=1.0)
    assert dispatcher.claim(clock.now()) == (1, False)
    assert dispatcher.release_due(clock.now()) == 0
    assert dispatcher.next_wake() == clock.now() + timedelta(milliseconds=600)
    clock.advance(0.6)
    assert dispatcher.release_due(clock.now()) == 1
    pool.stop(5)
    assert len(collected.fires) == 1


def test_pending_fires_are_bounded(sqlite: SQLiteStore) -> None:
    clock = FakeClock()
    sqlite.add_jobs([make_job(next_run_at=clock.now() + timedelta(milliseconds=500)) for _ in range(50)])
    pool = WorkerPool(one_at_a_time(Collector()), workers=1)
    dispatcher = make_dispatcher(sqlite, pool, clock, batch_size=10, max_pending=25)
    total = 0
    for _ in range(5):
        total += dispatcher.claim(clock.now())[0]
    assert total == 25
    assert len(dispatcher.take_pending()) == 25
    pool.stop(5)


def test_a_full_pool_blocks_the_dispatcher_instead_of_growing(sqlite: SQLiteStore) -> None:
    clock = FakeClock()
    sqlite.add_jobs([make_job(next_run_at=clock.now()) for _ in range(10)])
    gate = threading.Event()
    running = threading.Semaphore(0)

    def blocked(fire: Fire) -> None:
        running.release()
        gate.wait(10)

    pool = WorkerPool(one_at_a_time(blocked), workers=2, queue_size=3)
    dispatcher = make_dispatcher(sqlite, pool, clock)
    dispatcher.claim(clock.now())
    releaser = threading.Thread(target=dispatcher.release_due, args=(clock.now(),))
    releaser.start()
    running.acquire(timeout=5)
    running.acquire(timeout=5)
    releaser.join(0.3)
    assert releaser.is_alive()  # blocked on the full queue
    assert pool.busy() == 2 and pool.depth() == 3  # never more than workers + queue
    assert len(dispatcher.take_pending()) == 10 - 2 - 3 - 1  # one more is in the blocked submit
    gate.set()
    releaser.join(5)
    assert pool.stop(5)


def test_a_hand_over_refused_by_a_stopping_pool_is_given_back_and_not_counted(sqlite: SQLiteStore) -> None:
    clock = FakeClock()
    jobs = [make_job(next_run_at=clock.now() - timedelta(milliseconds=i)) for i in range(3)]
    sqlite.add_jobs(jobs)
    gate, running = threading.Event(), threading.Event()

    def blocked(fire: Fire) -> None:
        running.set()
        gate.wait(10)

    pool = WorkerPool(one_at_a_time(blocked), workers=1, queue_size=1)
    dispatcher = make_dispatcher(sqlite, pool, clock)
    assert dispatcher.claim(clock.now())[0] == 3
    stop, released = threading.Event(), []
    releaser = threading.Thread(target=lambda: released.append(dispatcher.release_due(clock.now(), stop)))
    releaser.start()
    assert running.wait(5)
    assert wait_until(lambda: pool.depth() == 1 and dispatcher.next_wake() is None)  # the third's hand-over waits
    stop.set()
    pool.close_intake()
    releaser.join(5)
    assert released == [2]  # one running, one queued; the third refused
    claimed = [j.id for j in jobs if sqlite.get_job(j.id).lease is not None]
    assert len(claimed) == 2 and jobs[0].id not in claimed  # the refused one (due last: jobs[0]) is given back
    gate.set()
    assert pool.stop(5)


def test_a_store_outage_is_logged_and_the_tick_retried(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    store = SQLiteStore(path, busy_timeout=0.05)
    clock = FakeClock()
    store.add_job(make_job(next_run_at=clock.now()))
    metrics = RecordingMetrics()
    pool = WorkerPool(one_at_a_time(Collector()), workers=1)
    dispatcher = Dispatcher(store=store, queue=pool, clock=clock, metrics=metrics, owner="d")
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    assert dispatcher.claim(clock.now()) == (0, False)
    assert metrics.ticks == [(0, True)]
    blocker.execute("ROLLBACK")
    blocker.close()
    assert dispatcher.claim(clock.now()) == (1, False)
    pool.stop(5)
    store.close()


def test_the_loop_keeps_ticking_through_an_outage(tmp_path: Path) -> None:
    path = tmp_path / "loop.db"
    store = SQLiteStore(path, busy_timeout=0.05)
    clock = FakeClock()
    store.add_job(make_job(next_run_at=clock.now() + timedelta(seconds=3)))
    collected = Collector()
    pool = WorkerPool(one_at_a_time(collected), workers=1)
    metrics = RecordingMetrics()
    dispatcher = Dispatcher(store=store, queue=pool, clock=clock, metrics=metrics, owner="d", lookahead=0)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    stop = threading.Event()
    loop = threading.Thread(target=dispatcher.run, args=(stop,))
    loop.start()
    while len(metrics.ticks) < 3:  # the fake clock's sleeps pass a second per tick
        loop.join(0.01)
    blocker.execute("ROLLBACK")
    blocker.close()
    while not collected.fires:
        loop.join(0.01)
    stop.set()
    loop.join(5)
    assert not loop.is_alive()
    assert any(failed for _, failed in metrics.ticks)
    pool.stop(5)
    store.close()


def test_the_loop_drains_full_batches_within_one_tick(tmp_path: Path) -> None:
    claims: list[datetime] = []

    class Recording(SQLiteStore):
        def claim_due(self, *, now: datetime, **kw: Any) -> list[Job]:
            claims.append(now)
            return super().claim_due(now=now, **kw)

    store = Recording(tmp_path / "drain.db")
    clock = FakeClock()
    store.add_jobs([make_job(next_run_at=clock.now() - timedelta(milliseconds=i)) for i in range(250)])
    collected = Collector()
    pool = WorkerPool(one_at_a_time(collected), workers=4)
    dispatcher = Dispatcher(store=store, queue=pool, clock=clock, metrics=RecordingMetrics(), owner="d", batch_size=100)
    stop = threading.Event()
    loop = threading.Thread(target=dispatcher.run, args=(stop,))
    loop.start()
    while len(collected.fires) < 250 and loop.is_alive():
        loop.join(0.01)
    stop.set()
    loop.join(5)
    pool.stop(5)
    store.close()
    assert len({f.job.id for f in collected.fires}) == 250
    assert claims[0] == claims[1] == claims[2]  # three batches without waiting for the next second


@pytest.mark.parametrize(("batch_size", "max_pending"), [(10, 20), (30, 7)])
def test_a_claim_cut_short_by_max_pending_claims_again_once_there_is_room(
    tmp_path: Path, batch_size: int, max_pending: int
) -> None:
    # 60 jobs due over the coming 0.3 s, at most 20 (or 7, fewer than a batch) held: as the held ones go
    # out, the loop claims more within the same second (waiting for the next one made a load above
    # max_pending a second late; with max_pending below the batch, room for a whole batch never came)
    first: dict[str, datetime] = {}  # each job's first claim (the fires are not run: leases run out later)

    class Recording(SQLiteStore):
        def claim_due(self, *, now: datetime, **kw: Any) -> list[Job]:
            found = super().claim_due(now=now, **kw)
            for job in found:
                first.setdefault(job.id, now)
            return found

    store = Recording(tmp_path / "room.db")
    clock = FakeClock(datetime(2026, 1, 1, 12, 0, 0, 500_000, tzinfo=UTC))
    start = clock.now()
    store.add_jobs([make_job(next_run_at=start + timedelta(milliseconds=5 * (i + 1))) for i in range(60)])
    collected = Collector()
    pool = WorkerPool(one_at_a_time(collected), workers=2)
    dispatcher = Dispatcher(
        store=store,
        queue=pool,
        clock=clock,
        metrics=RecordingMetrics(),
        owner="d",
        batch_size=batch_size,
        max_pending=max_pending,
    )
    stop = threading.Event()
    loop = threading.Thread(target=dispatcher.run, args=(stop,))
    loop.start()
    while len(collected.fires) < 60 and loop.is_alive():
        loop.join(0.01)
    stop.set()
    loop.join(5)
    pool.stop(5)
    store.close()
    assert len(first) == 60
    assert max(first.values()) < datetime(2026, 1, 1, 12, 0, 1, tzinfo=UTC)  # none waited for the next second


def test_a_store_down_while_claims_are_cut_short_is_tried_once_a_second(tmp_path: Path) -> None:
    """A claim cut short by max_pending asks again as soon as there is room; if the store is down by
    then, the next try waits for the next second instead of looping on the failing store."""
    from ticklock.errors import StoreUnavailable

    calls: list[datetime] = []

    class FailingLater(SQLiteStore):
        def claim_due(self, *, now: datetime, **kw: Any) -> list[Job]:
            calls.append(now)
            if len(calls) > 1:
                raise StoreUnavailable("down")
            return super().claim_due(now=now, **kw)

    store = FailingLater(tmp_path / "down.db")
    clock = FakeClock(datetime(2026, 1, 1, 12, 0, 0, 500_000, tzinfo=UTC))
    start = clock.now()
    store.add_jobs([make_job(next_run_at=start + timedelta(milliseconds=5 * (i + 1))) for i in range(20)])
    pool = WorkerPool(one_at_a_time(Collector()), workers=2)
    dispatcher = Dispatcher(
        store=store, queue=pool, clock=clock, metrics=RecordingMetrics(), owner="d", batch_size=10, max_pending=5
    )
    stop = threading.Event()
    loop = threading.Thread(target=dispatcher.run, args=(stop,))
    loop.start()
    loop.join(0.5)  # real time: a loop on the failing store would call it thousands of times
    stop.set()
    loop.join(5)
    pool.stop(5)
    store.close()
    seconds = (clock.now() - start).total_seconds()
    assert 2 <= len(calls) <= seconds + 3, (len(calls), seconds)
