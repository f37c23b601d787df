"""The local worker pool: a bounded queue and N workers; slow fires spread, stuck workers replaced, every fire
run once or handed back."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.factories import make_job, manual_fire
from tests.support.pools import one_at_a_time
from tests.support.waiting import wait_until
from ticklock.domain.fires import Fire
from ticklock.engine.pool import WorkerPool
from ticklock.errors import QueueUnavailable


def fire(name: str = "job") -> Fire:
    job = make_job(name=name)
    assert job.next_run_at is not None
    return manual_fire(job, job.next_run_at)


def fires(count: int) -> list[Fire]:
    return [fire(f"job-{i}") for i in range(count)]


def test_every_fire_runs_once_on_many_workers() -> None:
    seen: list[str] = []
    mutex = threading.Lock()

    def run(given: Fire) -> None:
        time.sleep(0.0005)  # lets the GIL go, as a store write does
        with mutex:
            seen.append(given.job.id)

    pool = WorkerPool(one_at_a_time(run), workers=8, queue_size=4)
    handed = fires(300)
    for each in handed:
        pool.submit(each)
    assert wait_until(lambda: len(seen) == 300)
    assert pool.stop(5)
    assert sorted(seen) == sorted(f.job.id for f in handed)


def test_the_pool_holds_at_most_its_workers_and_its_queue_then_submit_waits() -> None:
    release = threading.Event()
    running = threading.Semaphore(0)

    def run(given: Fire) -> None:
        running.release()
        release.wait(10)

    pool = WorkerPool(one_at_a_time(run), workers=2, queue_size=3)
    for each in fires(2):
        pool.submit(each)
    assert running.acquire(timeout=5) and running.acquire(timeout=5)
    for each in fires(3):
        pool.submit(each)  # the queue's room
    assert pool.free_slots() == 0 and pool.depth() == 3 and pool.busy() == 2
    blocked = threading.Thread(target=pool.submit, args=(fire("sixth"),))
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive()  # waits while the queue is full
    release.set()
    blocked.join(5)
    assert not blocked.is_alive()
    assert pool.stop(5)


def test_a_run_that_raises_is_logged_and_its_worker_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[str] = []

    def run(given: Fire) -> None:
        if given.job.name == "raises":
            raise RuntimeError("boom")
        ran.append(given.job.name)

    pool = WorkerPool(one_at_a_time(run), workers=1)
    pool.submit(fire("raises"))
    pool.submit(fire("after"))
    assert wait_until(lambda: ran == ["after"])
    assert pool.stop(5) and pool.busy() == 0
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == ["worker.crashed"]


def test_slow_fires_are_spread_over_the_workers() -> None:
    # Eight fires that each wait for the other seven: they all finish only if eight workers run them at once
    together = threading.Barrier(8, timeout=10)
    broken: list[BaseException] = []

    def run(given: Fire) -> None:
        try:
            together.wait()
        except threading.BrokenBarrierError as exc:
            broken.append(exc)

    pool = WorkerPool(one_at_a_time(run), workers=8, queue_size=16)
    for each in fires(8):
        pool.submit(each)
    assert pool.stop(15)
    assert broken == []


def test_a_fire_behind_a_slow_one_is_not_held_up_by_it() -> None:
    # the first fire's worker is in a slow handler; the next fire goes to another worker
    release = threading.Event()
    ran = threading.Event()

    def run(given: Fire) -> None:
        if given.job.name == "slow":
            release.wait(10)
        else:
            ran.set()

    pool = WorkerPool(one_at_a_time(run), workers=2)
    try:
        pool.submit(fire("slow"))
        pool.submit(fire("quick"))
        assert ran.wait(5)
    finally:
        release.set()
    assert pool.stop(5)


def test_a_stuck_worker_is_replaced_and_not_waited_for() -> None:
    release = threading.Event()
    stuck_in: list[threading.Thread] = []
    ran: list[str] = []
    entered = threading.Event()

    def run(given: Fire) -> None:
        if given.job.name == "hangs":
            stuck_in.append(threading.current_thread())
            entered.set()
            release.wait(30)
        ran.append(threading.current_thread().name)

    pool = WorkerPool(one_at_a_time(run), workers=1)
    try:
        pool.submit(fire("hangs"))
        assert entered.wait(5)
        assert pool.busy() == 1
        pool.stuck(stuck_in[0])  # what the invoker reports once the handler is given up
        assert pool.busy() == 0  # a retired worker is not busy: its fire was finished elsewhere
        pool.submit(fire("next"))
        assert wait_until(lambda: len(ran) == 1)
        assert ran[0] != stuck_in[0].name  # run by the worker started in the stuck one's place
        assert pool.stop(5)  # the stuck worker is not waited for
        assert stuck_in[0].is_alive()
    finally:
        release.set()
    stuck_in[0].join(5)
    assert not stuck_in[0].is_alive()  # it ended once its handler returned, taking nothing more
    assert len(ran) == 2


def test_reporting_a_thread_that_is_not_a_worker_changes_nothing() -> None:
    pool = WorkerPool(one_at_a_time(lambda given: None), workers=2)
    pool.stuck(threading.current_thread())
    assert pool.busy() == 0
    done = threading.Event()
    pool._run = lambda given: done.set()
    pool.submit(fires(1)[0])
    assert done.wait(5)
    assert pool.stop(5)


def test_unstarted_fires_are_drained_at_shutdown() -> None:
    release = threading.Event()
    entered = threading.Event()

    def run(given: Fire) -> None:
        entered.set()
        release.wait(10)

    pool = WorkerPool(one_at_a_time(run), workers=1, queue_size=10)
    batch = fires(5)
    for each in batch:
        pool.submit(each)
    assert entered.wait(5)
    drained = pool.drain_unstarted()
    release.set()
    assert pool.stop(5)
    assert [f.job.id for f in drained] == [f.job.id for f in batch[1:]]


def test_a_pool_that_stops_taking_fires_hands_back_each_it_refuses_even_one_waiting_for_room() -> None:
    """``close_intake`` (a stop's first step): a hand-over blocked on the full queue ends, raising
    QueueUnavailable with its fire (the dispatcher gives it back to the store), and so does every one after,
    rather than completing into a queue that is drained already, where no worker would run it."""
    release, entered = threading.Event(), threading.Event()

    def run(given: Fire) -> None:
        entered.set()
        release.wait(10)

    pool = WorkerPool(one_at_a_time(run), workers=1, queue_size=1)
    first, queued, blocked, late = fires(4)
    pool.submit(first)
    assert entered.wait(5)
    pool.submit(queued)
    refused: list[QueueUnavailable] = []

    def hand_over() -> None:
        try:
            pool.submit(blocked)
        except QueueUnavailable as exc:
            refused.append(exc)

    producer = threading.Thread(target=hand_over)
    producer.start()
    assert wait_until(lambda: producer.is_alive() and pool.depth() == 1)
    pool.close_intake()
    producer.join(5)
    assert not producer.is_alive() and [f.job.id for e in refused for f in e.fires] == [blocked.job.id]
    with pytest.raises(QueueUnavailable) as after:
        pool.submit(late)
    assert [f.job.id for f in after.value.fires] == [late.job.id]
    assert [f.job.id for f in pool.drain_unstarted()] == [queued.job.id]  # the refused are not in the queue
    release.set()
    assert pool.stop(5)
