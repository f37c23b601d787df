"""The local worker pool: quick fires on as few threads as keep up, slow ones spread, stuck ones replaced."""

from __future__ import annotations

import functools
import threading
import time

import pytest

from tests.support.factories import make_job, manual_fire
from tests.support.waiting import wait_until
from ticklock.adapters.queue.local import RELIEF_IDLE, WorkerPool
from ticklock.domain.jobs import Fire
from ticklock.errors import QueueUnavailable


def fire(name: str = "job") -> Fire:
    job = make_job(name=name)
    assert job.next_run_at is not None
    return manual_fire(job, job.next_run_at)


def fires(count: int) -> list[Fire]:
    return [fire(f"job-{i}") for i in range(count)]


class Frozen:
    """A monotonic clock that stands still unless moved: a worker's item never grows slow by itself."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_quick_fires_run_one_at_a_time_while_a_worker_keeps_up() -> None:
    # With the clock standing still every running worker stays quick, so no idle worker is woken while
    # one runs: each hand-over to another thread costs about a fire's CPU, and buys nothing under the GIL
    running, most = 0, 0
    mutex = threading.Lock()
    done = threading.Semaphore(0)

    def run(given: Fire) -> None:
        nonlocal running, most
        with mutex:
            running += 1
            most = max(most, running)
        time.sleep(0.0005)  # lets the GIL go, as a store write does: an idle worker would get to run now
        with mutex:
            running -= 1
        done.release()

    pool = WorkerPool(run, workers=8, queue_size=16, monotonic=Frozen())
    for each in fires(300):
        pool.submit(each)
    for _ in range(300):
        assert done.acquire(timeout=10)
    assert pool.stop(5)
    assert most == 1


def test_slow_fires_are_spread_over_the_workers() -> None:
    # Eight fires that each wait for the other seven: they all finish only if eight workers run them at once
    together = threading.Barrier(8, timeout=10)
    broken: list[BaseException] = []

    def run(given: Fire) -> None:
        try:
            together.wait()
        except threading.BrokenBarrierError as exc:
            broken.append(exc)

    pool = WorkerPool(run, workers=8, queue_size=16)
    for each in fires(8):
        pool.submit(each)
    assert pool.stop(15)
    assert broken == []


def test_fires_queued_behind_busy_workers_are_spread_when_they_turn_out_slow() -> None:
    # Both workers busy while two fires queue; they come back together: one takes the first queued fire
    # (quick, for now), the other sees it quick and waits. That fire waits for the second to start: it
    # does once the clock says the first has run past ``stall`` and the waiting worker is woken for it
    clock = Frozen()
    gate = threading.Event()
    together = threading.Barrier(2, timeout=10)
    broken: list[BaseException] = []
    entered = threading.Semaphore(0)
    paired = threading.Semaphore(0)

    def run(given: Fire) -> None:
        if given.job.name.startswith("busy"):
            entered.release()
            gate.wait(10)
            return
        paired.release()
        try:
            together.wait()
        except threading.BrokenBarrierError as exc:
            broken.append(exc)
        met.release()

    met = threading.Semaphore(0)
    pool = WorkerPool(run, workers=2, queue_size=8, monotonic=clock)
    pool.submit(fire("busy-1"))
    pool.submit(fire("busy-2"))
    assert entered.acquire(timeout=5)
    clock.now += 1  # busy-1 is slow now: the idle worker is woken for busy-2
    assert entered.acquire(timeout=5)
    time.sleep(0.05)  # the watcher, with nothing queued, goes back to sleeping until told
    pool.submit(fire("paired-1"))
    pool.submit(fire("paired-2"))
    gate.set()
    assert paired.acquire(timeout=5)
    clock.now += 1  # the paired fire that started is slow now
    assert met.acquire(timeout=15) and met.acquire(timeout=15)  # before the shutdown wakes everyone
    assert broken == []
    assert pool.stop(5)


def test_a_fire_behind_a_slow_one_is_not_held_up_by_it() -> None:
    # the first fire's worker is in a slow handler; the next fire goes to another worker
    release = threading.Event()
    ran = threading.Event()

    def run(given: Fire) -> None:
        if given.job.name == "slow":
            release.wait(10)
        else:
            ran.set()

    pool = WorkerPool(run, workers=2)
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

    flushed: list[threading.Thread] = []

    def run(given: Fire) -> None:
        if given.job.name == "hangs":
            stuck_in.append(threading.current_thread())
            entered.set()
            release.wait(30)
        ran.append(threading.current_thread().name)

    pool = WorkerPool(run, workers=1, finish_deferred=lambda: flushed.append(threading.current_thread()))
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
    assert flushed[-1] is stuck_in[0]  # and wrote what waited as it left (TaskRunner.finish_deferred)


def test_reporting_a_thread_that_is_not_a_worker_changes_nothing() -> None:
    pool = WorkerPool(lambda given: None, workers=2)
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

    pool = WorkerPool(run, workers=1, queue_size=10)
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

    pool = WorkerPool(run, workers=1, queue_size=1)
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


def test_a_batch_with_fires_queued_behind_it_defers_and_what_waits_is_written_when_the_queue_empties() -> None:
    """``run_many(fires, defer=...)``: defer while more are queued; ``finish_deferred`` whenever a worker finds the
    queue empty, before it runs a fire alone, and as it leaves at shutdown."""
    calls: list[tuple[object, ...]] = []
    gate = threading.Event()

    def run(given: Fire) -> None:
        calls.append(("alone", given.job.name))
        gate.wait(10)

    def run_many(batch: list[Fire], *, defer: bool) -> None:
        calls.append(("batch", len(batch), defer))

    def finish_deferred() -> None:
        calls.append(("finish_deferred",))

    pool = WorkerPool(
        run, workers=1, queue_size=64, monotonic=Frozen(), run_many=run_many,
        batchable=lambda f: f.job.name != "first", batch=4, finish_deferred=finish_deferred,
    )  # fmt: skip
    pool.submit(fire("first"))
    assert wait_until(lambda: ("alone", "first") in calls, timeout=5)
    for each in fires(10):
        pool.submit(each)
    gate.set()
    assert wait_until(lambda: len(calls) >= 6, timeout=5)
    assert calls == [
        ("finish_deferred",),  # before a fire runs alone
        ("alone", "first"),
        ("batch", 4, True),
        ("batch", 4, True),
        ("batch", 2, False),  # nothing behind it: it is written with what waits (TaskRunner.run_many)
        ("finish_deferred",),  # the queue found empty
    ]
    assert pool.stop(5)
    assert calls[6:] == [("finish_deferred",)]  # and as the worker leaves


# -- caller_runs: a hand-over of a few quick fires runs on the caller's own thread ---------------------------
class Recorder:
    """``run`` and ``run_many`` for a pool, recording which thread ran which fires; ``gate`` holds up the
    fires named ``hangs`` until set."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], threading.Thread]] = []
        self.busy_seen: list[int] = []
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.pool: WorkerPool | None = None

    def run(self, given: Fire) -> None:
        self._ran("alone", [given])

    def run_many(self, batch: list[Fire], *, defer: bool) -> None:
        self._ran("batch", batch)

    def _ran(self, how: str, batch: list[Fire]) -> None:
        assert self.pool is not None
        self.busy_seen.append(self.pool.busy())
        self.calls.append((how, [f.job.name for f in batch], threading.current_thread()))
        if any(f.job.name == "hangs" for f in batch):
            self.entered.set()
            self.gate.wait(10)


def hand_over(pool: WorkerPool, name: str) -> None:
    """What the dispatcher does with one due fire: hand it over, then flush."""
    pool.submit(fire(name))
    pool.flush()


def hand_over_all(pool: WorkerPool, recorder: Recorder, names: list[str]) -> list[tuple[list[str], threading.Thread]]:
    """Hand fires of these names over and flush, as the dispatcher does; each run of them (a batch or one)
    with the thread that ran it, once all have run."""
    recorder.calls.clear()
    for name in names:
        pool.submit(fire(name))
    pool.flush()
    assert wait_until(lambda: sum(len(n) for _, n, _ in recorder.calls) == len(names), timeout=5)
    return [(n, thread) for _, n, thread in recorder.calls]


def caller_pool(recorder: Recorder, **options: object) -> WorkerPool:
    pool = WorkerPool(
        recorder.run, workers=2, queue_size=64, run_many=recorder.run_many,
        batchable=lambda f: not f.job.name.startswith("slow"), caller_runs=True, **options,  # type: ignore[arg-type]
    )  # fmt: skip
    recorder.pool = pool
    return pool


def test_a_few_quick_fires_into_an_empty_queue_run_on_the_callers_thread_at_flush() -> None:
    recorder = Recorder()
    pool = caller_pool(recorder)
    me = threading.current_thread()
    handed = fires(5)
    for each in handed:
        pool.submit(each)
    assert recorder.calls == [] and pool.depth() == 0  # held for the flush, not queued: no worker woken
    pool.flush()
    assert [(how, names, thread) for how, names, thread in recorder.calls] == [
        ("batch", [f.job.name for f in handed], me)
    ]
    assert recorder.busy_seen == [1]  # counted as busy while it ran
    assert pool.busy() == 0
    pool.flush()  # nothing held: nothing runs
    assert len(recorder.calls) == 1
    assert pool.stop(5)


def test_a_hand_over_of_more_than_a_batch_or_of_a_slow_fire_goes_to_the_workers_in_order() -> None:
    recorder = Recorder()
    pool = caller_pool(recorder, batch=4)
    me = threading.current_thread()
    many = fires(6)  # more than a batch of 4: those held go into the queue first, then the rest
    for each in many:
        pool.submit(each)
    pool.flush()
    assert wait_until(lambda: sum(len(names) for _, names, _ in recorder.calls) == 6, timeout=5)
    assert [name for _, names, _ in recorder.calls for name in names] == [f.job.name for f in many]
    assert all(thread is not me for _, _, thread in recorder.calls)
    recorder.calls.clear()
    mixed = [fire("quick-1"), fire("slow-2"), fire("quick-3")]
    for each in mixed:
        pool.submit(each)
    pool.flush()
    assert wait_until(lambda: sum(len(names) for _, names, _ in recorder.calls) == 3, timeout=5)
    assert [name for _, names, _ in recorder.calls for name in names] == ["quick-1", "slow-2", "quick-3"]
    assert all(thread is not me for _, _, thread in recorder.calls)
    assert pool.stop(5)


def test_past_a_batch_a_caller_keeps_a_hand_over_only_while_its_expected_runs_fit_the_budget() -> None:
    """``caller_batch`` and ``caller_budget``: a hand-over of more than a batch is the caller's while the
    fires' expected runs add up to the budget at most, up to ``caller_batch``; one that does not fit, or is
    longer, goes to the workers whole, in order. Within a batch the budget does not count (as before it)."""
    recorder = Recorder()
    expected = {"cheap": 0.001, "dear": 0.004}
    pool = caller_pool(
        recorder, batch=4, caller_batch=8, caller_budget=0.010,
        expected=lambda f: expected[f.job.name.split("-")[0]],
    )  # fmt: skip
    me = threading.current_thread()

    hand = functools.partial(hand_over_all, pool, recorder)
    cheap = [f"cheap-{i}" for i in range(8)]  # 8 ms expected: past the batch of 4, within the budget
    assert hand(cheap) == [(cheap, me)]
    nine = [f"cheap-{i}" for i in range(9)]  # one more than caller_batch: the workers', in order
    ran = hand(nine)
    assert [name for names, _ in ran for name in names] == nine and all(t is not me for _, t in ran)
    dear = [f"dear-{i}" for i in range(4)]  # 16 ms expected, but a batch at most: the caller's, as before
    assert hand(dear) == [(dear, me)]
    over = [f"cheap-{i}" for i in range(4)] + ["dear-4", "dear-5"]  # 12 ms at the sixth: over the budget
    ran = hand(over)
    assert [name for names, _ in ran for name in names] == over and all(t is not me for _, t in ran)
    fits = [f"cheap-{i}" for i in range(5)] + ["dear-5"]  # 9 ms: fits
    assert hand(fits) == [(fits, me)]
    assert pool.stop(5)


class Timed(Recorder):
    """A ``Recorder`` whose caller's runs (those on ``caller``) take ``cost`` seconds a fire on ``clock``, the
    pool's monotonic clock; ``fails`` makes them raise once they have taken it."""

    def __init__(self, caller: threading.Thread, cost: float) -> None:
        super().__init__()
        self.caller, self.cost, self.fails = caller, cost, False
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def run_many(self, batch: list[Fire], *, defer: bool) -> None:
        super().run_many(batch, defer=defer)
        if threading.current_thread() is self.caller:
            self.now += self.cost * len(batch)
            if self.fails:
                raise RuntimeError("the store went away")


def test_past_a_batch_a_caller_counts_each_fire_at_the_pace_of_its_own_hand_overs() -> None:
    """The caller's own hand-overs are timed on the pool's clock, whole (a lock's round trips and the
    store's writes with the handlers' runs): past a batch, a fire counts at the longer of its handler's
    expected run and that pace, a moving average from 0. So a caller whose fires cost more than their
    handlers keeps about what fits its budget, and the pace follows what its hand-overs take; the
    workers' runs are not the caller's pace."""
    me = threading.current_thread()
    recorder = Timed(me, cost=0.002)
    pool = caller_pool(
        recorder, batch=4, caller_batch=8, caller_budget=0.010, expected=lambda f: 0.0001,
        monotonic=recorder.clock, relieve_after=10.0,
    )  # fmt: skip
    hand = functools.partial(hand_over_all, pool, recorder)
    eight = [f"cheap-{i}" for i in range(8)]
    four, five, six = eight[:4], eight[:5], eight[:6]
    assert pool.caller_pace == 0.0
    assert hand(eight) == [(eight, me)]  # not measured yet: 8 x 0.1 ms fits the 10 ms
    assert pool.caller_pace == pytest.approx(0.002 / 8)  # an eighth of the way from 0
    for _ in range(40):
        assert hand(four) == [(four, me)]  # a batch: the caller's whatever its pace
    assert pool.caller_pace == pytest.approx(0.002, rel=0.01)
    for names in (eight, six):  # 16 and 12 ms at ~2 ms a fire: over the budget, the workers' whole, in order
        ran = hand(names)
        assert [name for n, _ in ran for name in n] == names and all(t is not me for _, t in ran)
    assert pool.caller_pace == pytest.approx(0.002, rel=0.01)  # the workers' runs did not move it
    assert hand(five) == [(five, me)]  # ~10 ms: fits
    recorder.cost = 0.020
    before = pool.caller_pace
    assert hand(four) == [(four, me)]
    assert pool.caller_pace == pytest.approx(before + (0.020 - before) / 8)
    recorder.cost = 0.0005
    for _ in range(40):
        assert hand(four) == [(four, me)]
    assert pool.caller_pace < 0.00125  # back toward 0.5 ms: 8 x 1.25 ms fits the 10 ms again
    assert hand(eight) == [(eight, me)]
    assert pool.stop(5)


def test_a_callers_run_counts_at_most_the_relief_bound_and_one_that_failed_not_at_all() -> None:
    """A caller's run longer than ``relieve_after`` (a hang, or fires dearer than any hand-over past a batch
    can afford: a slow lock's round trips) counts as that bound, relieved or not; a run that raised says
    nothing of the pace."""
    me = threading.current_thread()
    recorder = Timed(me, cost=0.050)
    pool = caller_pool(recorder, batch=4, monotonic=recorder.clock, relieve_after=0.05)
    four = [f"cheap-{i}" for i in range(4)]
    assert hand_over_all(pool, recorder, four) == [(four, me)]  # 200 ms on the pool's clock
    assert pool.caller_pace == pytest.approx(0.05 / 4 / 8)  # as 50 ms, not 200
    recorder.fails = True
    hand_over_all(pool, recorder, four)
    assert pool.caller_pace == pytest.approx(0.05 / 4 / 8)  # unchanged
    assert pool.stop(5)


def test_without_a_caller_batch_a_hand_over_of_more_than_a_batch_is_the_workers_whatever_its_runs() -> None:
    recorder = Recorder()
    pool = caller_pool(recorder, batch=4, expected=lambda f: 0.0)  # no budget given: none past a batch
    me = threading.current_thread()
    for i in range(5):
        pool.submit(fire(f"cheap-{i}"))
    pool.flush()
    assert wait_until(lambda: sum(len(n) for _, n, _ in recorder.calls) == 5, timeout=5)
    assert all(thread is not me for _, _, thread in recorder.calls)
    assert pool.stop(5)


def test_a_caller_held_up_by_its_run_is_relieved_once_and_its_handlers_fires_go_to_the_workers_meanwhile() -> None:
    recorder = Recorder()
    pool = caller_pool(recorder, relieve_after=0.05)
    relieved: list[threading.Thread] = []
    pool.on_relieve = relieved.append
    caller = threading.Thread(target=hand_over, args=(pool, "hangs"), name="the-dispatcher")
    caller.start()
    try:
        assert recorder.entered.wait(5)
        assert wait_until(lambda: relieved == [caller], timeout=5)  # reported once, with the caller's thread
        assert pool.running_caller(caller)
        # the relieved run's handler: its next fires are the workers' while that run lasts
        pool.submit(fire("later"))  # every fire here has the one handler (noop)
        pool.flush()
        assert wait_until(lambda: any(names == ["later"] for _, names, _ in recorder.calls), timeout=5)
        [(_, _, ran_on)] = [c for c in recorder.calls if c[1] == ["later"]]
        assert ran_on is not threading.current_thread() and ran_on is not caller
        time.sleep(0.2)
        assert relieved == [caller]  # once
    finally:
        recorder.gate.set()
    caller.join(5)
    assert not pool.running_caller(caller) and pool.busy() == 0
    assert pool.caller_pace == pytest.approx(0.05 / 8)  # the hung run counts as the relief's bound
    pool.submit(fire("again"))
    pool.flush()  # the run is over: its handler's fires are the caller's again
    assert recorder.calls[-1][1:] == (["again"], threading.current_thread())
    assert 0.0 < pool.caller_pace < 0.05 / 8  # a quick run brings it down
    assert pool.stop(5)


def test_held_fires_are_handed_back_when_the_pool_stops_taking_fires() -> None:
    recorder = Recorder()
    pool = caller_pool(recorder)
    held = fires(3)
    for each in held:
        pool.submit(each)
    assert [f.job.id for f in pool.drain_unstarted()] == [f.job.id for f in held]  # a stop gives them back
    assert recorder.calls == []
    assert pool.stop(5)

    recorder = Recorder()
    pool = caller_pool(recorder)
    first, second = fires(2)
    pool.submit(first)
    pool.close_intake()
    with pytest.raises(QueueUnavailable) as refused:
        pool.submit(second)  # refused: with the fire held before it, for the dispatcher to give back
    assert [f.job.id for f in refused.value.fires] == [first.job.id, second.job.id]
    assert recorder.calls == []
    assert pool.stop(5)

    recorder = Recorder()
    pool = caller_pool(recorder)
    pool.submit(first)
    pool.close_intake()
    with pytest.raises(QueueUnavailable) as at_flush:
        pool.flush()
    assert [f.job.id for f in at_flush.value.fires] == [first.job.id]
    assert recorder.calls == [] and pool.drain_unstarted() == []
    assert pool.stop(5)


def test_stop_waits_for_a_callers_run_unless_it_was_reported_stuck() -> None:
    recorder = Recorder()
    pool = caller_pool(recorder, relieve_after=30)
    caller = threading.Thread(target=hand_over, args=(pool, "hangs"))
    caller.start()
    try:
        assert recorder.entered.wait(5)
        assert not pool.stop(0.2)  # a running fire is waited for, as a worker's is
        pool.stuck(caller)  # its handler was given up (the invoker's watchdog): not waited for any more
        assert pool.busy() == 0
        assert pool.stop(5)
    finally:
        recorder.gate.set()
    caller.join(5)
    assert pool.busy() == 0


def test_a_relieved_callers_run_ends_only_once_its_relief_is_in_place() -> None:
    # the caller, back from its run, must find itself replaced: were the run to end before ``on_relieve``
    # had done its work, the caller would go on dispatching beside the new dispatcher
    recorder = Recorder()
    pool = caller_pool(recorder, relieve_after=0.05)
    moments: dict[str, float] = {}

    def relieve(thread: threading.Thread) -> None:
        recorder.gate.set()  # the run ends now, while the relief is still being put in place
        time.sleep(0.2)
        moments["relieved"] = time.monotonic()

    pool.on_relieve = relieve

    def caller() -> None:
        hand_over(pool, "hangs")
        moments["returned"] = time.monotonic()

    thread = threading.Thread(target=caller)
    thread.start()
    thread.join(5)
    assert moments["returned"] >= moments["relieved"]
    assert pool.stop(5)


def test_once_a_hand_over_spills_into_the_queue_its_later_fires_follow_even_if_the_queue_drains() -> None:
    recorder = Recorder()
    pool = caller_pool(recorder, batch=2)
    me = threading.current_thread()
    first = fires(3)  # the third spills the two held before it into the queue
    for each in first:
        pool.submit(each)
    assert wait_until(lambda: sum(len(names) for _, names, _ in recorder.calls) == 3, timeout=5)
    assert pool.depth() == 0
    pool.submit(fire("fourth"))  # the queue is empty again, but the hand-over is not over: no overtaking
    assert wait_until(lambda: any(names == ["fourth"] for _, names, _ in recorder.calls), timeout=5)
    pool.flush()
    assert all(thread is not me for _, _, thread in recorder.calls)
    pool.submit(fire("next"))  # a new hand-over: held for the caller again
    pool.flush()
    assert recorder.calls[-1][1:] == (["next"], me)
    assert pool.stop(5)


class Stalls:
    """A runner's ``take_stalled`` for a pool: records each call; hands over one rest, once armed, that
    runs until ``gate`` is set. ``taking``: an armed call waits until it is set before it returns (as
    long as taking the rest and logging it can take)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, int]] = []
        self.armed = threading.Event()
        self.gate = threading.Event()
        self.taking = threading.Event()
        self.taking.set()
        self.inside = threading.Event()
        self.threads: list[threading.Thread] = []

    def take_stalled(self, after: float, most: int) -> list[object]:
        self.calls.append((after, most))
        if not self.armed.is_set():
            return []
        self.armed.clear()
        self.inside.set()
        self.taking.wait(10)
        return [self.rest]

    def rest(self) -> None:
        self.threads.append(threading.current_thread())
        self.gate.wait(10)


def stalling_pool(recorder: Recorder, stalls: Stalls, *names: str) -> WorkerPool:
    """One worker; a hand-over of fires named ``names`` (``hangs`` and ``behind`` if none) runs as its
    batch, held up by the first."""
    pool = WorkerPool(
        recorder.run, workers=1, queue_size=8, run_many=recorder.run_many, batchable=lambda f: True,
        relieve_after=0.05, take_stalled=stalls.take_stalled,  # type: ignore[arg-type]
    )  # fmt: skip
    recorder.pool = pool
    for each in [fire(name) for name in names or ("hangs", "behind")]:  # made first: submitted back to back
        pool.submit(each)
    assert recorder.entered.wait(5)
    return pool


def test_the_rest_of_a_workers_batch_held_up_runs_on_a_thread_of_its_own_counted_and_waited_for() -> None:
    recorder, stalls = Recorder(), Stalls()
    pool = stalling_pool(recorder, stalls, "hangs", "behind", "also-behind")  # the worker's batch, held up
    try:
        assert wait_until(lambda: (0.05, 1) in stalls.calls, timeout=5)  # asked, with room for one rest
        stalls.armed.set()
        assert wait_until(lambda: len(stalls.threads) == 1, timeout=5)
        [rest] = stalls.threads
        assert rest.name.startswith("ticklock-batch-rest-") and rest is not threading.current_thread()
        assert pool.busy() == 2  # the held-up worker and the rest
        recorder.gate.set()  # the worker's run ends; the rest still runs
        assert wait_until(lambda: pool.busy() == 1, timeout=5)
        assert not pool.stop(0.2)  # the rest's run is waited for, as a worker's is
        pool.stuck(rest)  # its handler given up (the invoker's watchdog): not waited for any more
        assert pool.busy() == 0
        assert pool.stop(5)
    finally:
        recorder.gate.set()
        stalls.gate.set()
    assert wait_until(lambda: not any(t.is_alive() for t in stalls.threads), timeout=5)
    assert pool.busy() == 0


def test_rests_are_bounded_by_the_workers_and_none_once_the_pool_stops_taking_fires() -> None:
    recorder, stalls = Recorder(), Stalls()
    pool = stalling_pool(recorder, stalls)
    try:
        stalls.armed.set()
        assert wait_until(lambda: len(stalls.threads) == 1, timeout=5)
        seen = len(stalls.calls)
        time.sleep(0.3)  # a few of the watch's rounds, the worker and the rest both held up
        assert len(stalls.calls) == seen  # the one rest fills the room (``workers``): not asked again
        pool.close_intake()
        stalls.gate.set()
        assert wait_until(lambda: not stalls.threads[0].is_alive(), timeout=5)
        seen = len(stalls.calls)
        time.sleep(0.3)  # a few of the watch's rounds, the worker still held up
        assert len(stalls.calls) == seen  # stopping: the batch keeps its rest
    finally:
        recorder.gate.set()
        stalls.gate.set()
    assert pool.stop(5)


def test_a_take_stalled_that_fails_leaves_the_watch_relieving_callers() -> None:
    failures: list[int] = []

    def take_stalled(after: float, most: int) -> list[object]:
        failures.append(most)
        raise RuntimeError("the runner failed")

    recorder = Recorder()
    pool = caller_pool(recorder, relieve_after=0.05, take_stalled=take_stalled)
    relieved: list[threading.Thread] = []
    pool.on_relieve = relieved.append
    try:
        hand_over(pool, "quick")  # the watch wakes for the runs from now on, and asks take_stalled each round
        assert wait_until(lambda: len(failures) >= 3, timeout=5)
        caller = threading.Thread(target=hand_over, args=(pool, "hangs"))
        caller.start()
        assert wait_until(lambda: relieved == [caller], timeout=5)  # the watch went on
    finally:
        recorder.gate.set()
    caller.join(5)
    assert pool.stop(5)


def test_a_stop_that_begins_while_a_rest_is_being_taken_waits_for_it() -> None:
    # the rest is taken from the runner (and so from the held-up thread) before its thread is counted: a
    # stop that sees no worker and no rest in between must not return then, or the rest would run after it
    recorder, stalls = Recorder(), Stalls()
    stalls.taking.clear()
    pool = stalling_pool(recorder, stalls)
    try:
        stalls.armed.set()
        assert stalls.inside.wait(5)  # the watch is taking the rest
        recorder.gate.set()  # the held-up run ends: the worker is free, and takes its stop
        pool.close_intake()
        assert not pool.stop(0.3)
        stalls.taking.set()
        assert wait_until(lambda: len(stalls.threads) == 1, timeout=5)  # the rest runs, counted
        assert pool.busy() == 1 and not pool.stop(0.2)
        stalls.gate.set()
        assert pool.stop(5)
    finally:
        recorder.gate.set()
        stalls.taking.set()
        stalls.gate.set()
    assert pool.busy() == 0


def test_a_rest_whose_thread_cannot_start_runs_on_the_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    start = threading.Thread.start

    def refusing(thread: threading.Thread) -> None:
        if thread.name.startswith("ticklock-batch-rest-"):
            raise RuntimeError("can't start new thread")
        start(thread)

    recorder, stalls = Recorder(), Stalls()
    pool = stalling_pool(recorder, stalls)
    monkeypatch.setattr(threading.Thread, "start", refusing)
    try:
        stalls.gate.set()  # the rest returns at once
        stalls.armed.set()
        assert wait_until(lambda: len(stalls.threads) == 1, timeout=5)
        assert stalls.threads[0].name == "ticklock-pool-relief"  # run by the watch itself
        assert wait_until(lambda: pool.busy() == 1, timeout=5)  # the held-up worker only: nothing left counted
        stalls.armed.set()  # and the watch goes on
        assert wait_until(lambda: len(stalls.threads) == 2, timeout=5)
    finally:
        recorder.gate.set()
    assert pool.stop(5)
    assert pool.busy() == 0


def test_a_rest_reported_stuck_gives_its_room_back() -> None:
    recorder, stalls = Recorder(), Stalls()
    pool = stalling_pool(recorder, stalls)
    try:
        stalls.armed.set()
        assert wait_until(lambda: len(stalls.threads) == 1, timeout=5)
        seen = len(stalls.calls)
        time.sleep(0.2)
        assert len(stalls.calls) == seen  # the one rest fills the room (one worker)
        pool.stuck(stalls.threads[0])  # its handler given up past its deadline: it no longer counts
        assert wait_until(lambda: len(stalls.calls) > seen and stalls.calls[-1] == (0.05, 1), timeout=5)
    finally:
        recorder.gate.set()
        stalls.gate.set()
    assert pool.stop(5)


def test_a_workers_batch_is_watched_for_as_long_as_it_runs() -> None:
    # the watch sleeps RELIEF_IDLE after the last batch began, unless one still runs: a run that hangs
    # only after a while (a fire run alone after the batch, having waited for its job's lock) is seen too
    recorder, stalls = Recorder(), Stalls()
    pool = stalling_pool(recorder, stalls)
    try:
        time.sleep(RELIEF_IDLE + 0.3)
        seen = len(stalls.calls)
        assert wait_until(lambda: len(stalls.calls) > seen + 2, timeout=2)  # still asking
        stalls.armed.set()
        assert wait_until(lambda: len(stalls.threads) == 1, timeout=5)
    finally:
        recorder.gate.set()
        stalls.gate.set()
    assert pool.stop(5)
    calls = len(stalls.calls)
    time.sleep(0.2)
    assert len(stalls.calls) == calls  # stopped: the watch asks no more
