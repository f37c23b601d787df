"""The tick function's loop: one loop at a time under the lease, handed over without a gap, and fires a
queue refuses given back to the store. SQLite store, real threads and the wall clock, seconds-long loops."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.factories import make_job
from tests.support.recorders import RecordingMetrics
from ticklock.adapters.lock.local import LocalLocker
from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.clock import SystemClock
from ticklock.domain.fires import Fire
from ticklock.domain.schedules import IntervalSchedule
from ticklock.engine.dispatcher import Dispatcher
from ticklock.engine.tick_loop import TickLoop, TickReport
from ticklock.errors import LockUnavailable, QueueUnavailable


class ListQueue:
    """A FireQueue that keeps what it is given (and, given a store, advances each fire as a run would)."""

    def __init__(self, store: SQLiteStore | None = None) -> None:
        self.fires: list[Fire] = []
        self.mutex = threading.Lock()
        self.store = store

    def submit(self, fire: Fire) -> None:
        with self.mutex:
            self.fires.append(fire)
        if self.store is not None:
            self.store.advance(fire, next_run_at=fire.scheduled_at + timedelta(seconds=1), now=SystemClock().now())

    def free_slots(self) -> int:
        return 1_000

    def flush(self) -> None:
        pass

    def drain_unstarted(self) -> Sequence[Fire]:
        return []


class Watched(Dispatcher):
    """Counts dispatcher loops running at once."""

    active = 0
    most = 0
    mutex = threading.Lock()

    def run(self, stop: threading.Event) -> None:
        with Watched.mutex:
            Watched.active += 1
            Watched.most = max(Watched.most, Watched.active)
        try:
            super().run(stop)
        finally:
            with Watched.mutex:
                Watched.active -= 1


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "tick.db")
    yield store
    store.close()


def make_loop(
    store: SQLiteStore, locker: LocalLocker, queue: ListQueue, name: str, lookahead: float = 1.0, **kw: float
) -> TickLoop:
    clock = SystemClock()
    dispatcher = Watched(
        store=store, queue=queue, clock=clock, metrics=RecordingMetrics(), owner=name, lookahead=lookahead
    )
    options = {"run_for": 3.0, "overlap": 1.0, "wait_for_lease": 3.0, "check_every": 0.05, **kw}
    return TickLoop(dispatcher=dispatcher, locker=locker, clock=clock, **options)


def in_thread(loop: TickLoop, budget: float, out: dict[str, TickReport], key: str) -> threading.Thread:
    thread = threading.Thread(target=lambda: out.__setitem__(key, loop.run(budget)))
    thread.start()
    return thread


def test_one_loop_at_a_time_a_duplicate_gives_up_and_the_next_minute_takes_over(store: SQLiteStore) -> None:
    Watched.active = Watched.most = 0
    clock = SystemClock()
    job = store.add_job(make_job("every-second", schedule=IntervalSchedule(1), next_run_at=clock.now()))
    locker, queue = LocalLocker(clock), ListQueue(store)
    out: dict[str, TickReport] = {}
    first = in_thread(make_loop(store, locker, queue, "first"), 30.0, out, "first")
    time.sleep(0.5)
    # a duplicate invocation early in the first loop's minute: it waits, then gives up, never ticking
    duplicate = in_thread(make_loop(store, locker, queue, "duplicate", wait_for_lease=1.0), 30.0, out, "duplicate")
    duplicate.join()
    # the next minute's invocation: the first hands over once it has run run_for - overlap
    time.sleep(0.5)
    second = in_thread(make_loop(store, locker, queue, "second"), 30.0, out, "second")
    first.join()
    second.join()

    assert out["duplicate"] == TickReport(ran=False, reason="another tick loop holds the lease")
    assert out["first"].ran and out["first"].handed_over
    assert out["second"].ran and not out["second"].handed_over  # nobody came: it ran to its hard deadline
    assert out["second"].seconds >= 4.0  # run_for + overlap
    assert Watched.most == 1
    # both loops dispatched the job, and no fire was handed over twice
    owners = {f.job.lease.owner for f in queue.fires if f.job.lease}
    assert owners == {"first", "second"}
    keys = [f.key for f in queue.fires]
    assert len(keys) == len(set(keys))
    assert all(f.job.id == job.id for f in queue.fires)


def test_a_loop_ends_within_its_budget_and_gives_held_fires_back(store: SQLiteStore) -> None:
    clock = SystemClock()
    # due in 3 s: claimed at once by a 5 s look-ahead, held, and still held when the 1 s budget ends
    later = store.add_job(make_job("later", next_run_at=clock.now() + timedelta(seconds=3)))
    locker, queue = LocalLocker(clock), ListQueue()
    loop = make_loop(store, locker, queue, "short", lookahead=5.0, run_for=60.0, overlap=10.0)
    report = loop.run(budget=1.0)
    assert report.ran and report.given_back == 1 and queue.fires == []
    assert store.get_job(later.id).lease is None  # claimable again at once by the next loop
    assert locker.acquire("ticklock:tick", 1.0) is not None  # the lease was released


def test_without_the_lock_backend_no_loop_runs(store: SQLiteStore) -> None:
    class Down(LocalLocker):
        def acquire(self, key: str, ttl: float) -> str | None:
            raise LockUnavailable("redis is down")

    report = make_loop(store, Down(SystemClock()), ListQueue(), "x").run(budget=5.0)
    assert not report.ran and "redis is down" in report.reason


def test_fires_the_queue_refuses_go_back_to_the_store(store: SQLiteStore) -> None:
    clock = SystemClock()
    jobs = [store.add_job(make_job(f"j{i}", next_run_at=clock.now())) for i in range(3)]

    class Refusing(ListQueue):
        def flush(self) -> None:
            fires, self.fires = self.fires, []
            raise QueueUnavailable("sqs is down", fires)

    dispatcher = Dispatcher(store=store, queue=Refusing(), clock=clock, metrics=RecordingMetrics(), owner="t")
    assert dispatcher.claim(clock.now())[0] == 3
    assert dispatcher.release_due(clock.now()) == 0
    for job in jobs:
        assert store.get_job(job.id).lease is None
    assert len(store.claim_due(now=clock.now(), horizon=clock.now(), limit=10, owner="u", slack=timedelta(60))) == 3
