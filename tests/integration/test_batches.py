"""Fires run together (``TaskRunner.run_many``, what serve's workers do with a run of quick fires), on the
real SQLite store: each fire as ``run`` would take it alone, its record and final write shared."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.integration.conftest import Harness
from tests.support.factories import make_execution
from tests.support.waiting import wait_until
from ticklock.clock import FakeClock
from ticklock.domain import lifecycle
from ticklock.domain.jobs import Execution, ExecutionStatus, Fire, Overlap, Policy
from ticklock.domain.lifecycle import QUICK_RUNS, SkipReason, TaskRunner
from ticklock.errors import StoreUnavailable
from ticklock.ports import Completion, Started


class Counting:
    """The store, counting its calls by name; ``failing`` names the calls that raise StoreUnavailable."""

    def __init__(self, store: Any, failing: Sequence[str] = ()) -> None:
        self._store = store
        self.calls: Counter[str] = Counter()
        self.order: list[str] = []
        self.failing = set(failing)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            self.order.append(name)
            if name in self.failing:
                raise StoreUnavailable(f"{name}: planned outage")
            return attr(*args, **kwargs)

        return call


def quick(runner: TaskRunner, handler: str = "noop") -> None:
    """``handler`` counts as quick to ``runner``, as after QUICK_RUNS quick runs of it."""
    for _ in range(QUICK_RUNS):
        runner._timed(handler, 0.0001)


def quick_runner(h: Harness, store: Any = None) -> TaskRunner:
    """The harness's runner, on ``store`` if given, with noop counting as quick."""
    runner = h.runner()
    if store is not None:
        runner.store = store
    quick(runner)
    return runner


def claimed(h: Harness, count: int, handler: str = "noop", **kw: Any) -> list[Fire]:
    for _ in range(count):
        h.add(handler, **kw)
    return h.claim(at_least=count)


def statuses(h: Harness, fires: list[Fire]) -> list[str]:
    return [e.status.value for f in fires for e in h.store.list_executions(f.job.id)]


def test_a_batch_records_in_one_write_and_finishes_in_one(fake: Harness) -> None:
    fires = claimed(fake, 12)
    store = Counting(fake.store)
    runner = quick_runner(fake, store)
    assert all(runner.batchable(f) for f in fires)
    outcomes = runner.run_many(fires)
    assert [o.execution.status for o in outcomes if o.execution] == [ExecutionStatus.SUCCESS] * 12
    assert [o.execution.job_id for o in outcomes if o.execution] == [f.job.id for f in fires]  # in order
    assert store.calls["start_executions"] == 1 and store.calls["complete_many"] == 1
    assert store.calls["start_execution"] == 0 and store.calls["complete"] == 0
    assert statuses(fake, fires) == ["success"] * 12
    for fire in fires:
        job = fake.store.get_job(fire.job.id)
        assert job.lease is None and job.next_run_at == fake.clock.now() + timedelta(seconds=60)
        assert job.last_run is not None and job.last_run.runs == 1
    types = Counter(fake.publisher.types())
    assert types == Counter({"job.execution.started": 12, "job.execution.succeeded": 12})
    assert len(fake.metrics.started) == 12 and len(fake.metrics.finished) == 12
    assert fake.locker is not None
    assert all(fake.locker.acquire(f"job:{f.job.id}", 1) for f in fires)  # every lock let go


def test_the_fires_a_batch_cannot_take_run_alone_after_it(fake: Harness, tmp_path: Any) -> None:
    fires = claimed(fake, 4)
    runner = quick_runner(fake)
    # 1: recorded (and finished) before, a second delivery; 2: its job's lock held by someone else
    first = make_execution(fires[1]).with_changes(status=ExecutionStatus.SUCCESS, finished_at=fake.clock.now())
    fake.store.start_execution(first)
    assert fake.locker is not None
    holder = fake.locker.acquire(f"job:{fires[2].job.id}", 600)
    assert holder is not None
    outcomes = runner.run_many(fires)
    assert outcomes[0].execution is not None and outcomes[3].execution is not None
    assert outcomes[1].skipped is SkipReason.DUPLICATE  # met its row on the single path
    assert outcomes[2].skipped is SkipReason.LOCK_HELD
    assert [e.id for e in fake.store.list_executions(fires[1].job.id)] == [first.id]
    assert fake.store.list_executions(fires[2].job.id) == []


def test_a_failed_record_sends_each_fire_the_single_way(fake: Harness) -> None:
    fires = claimed(fake, 5)
    store = Counting(fake.store, failing=["start_executions"])
    runner = quick_runner(fake, store)
    runner.run_many(fires)
    assert store.calls["start_execution"] == 5
    assert statuses(fake, fires) == ["success"] * 5


def test_a_failed_final_write_completes_each_alone_and_counts_each_run_once(fake: Harness) -> None:
    fires = claimed(fake, 5)
    store = Counting(fake.store, failing=["complete_many"])
    runner = quick_runner(fake, store)
    runner.run_many(fires)
    assert store.calls["complete"] == 5
    assert statuses(fake, fires) == ["success"] * 5
    for fire in fires:
        job = fake.store.get_job(fire.job.id)
        assert job.lease is None and job.last_run is not None and job.last_run.runs == 1


class ApplyThenFail:
    """A store whose ``complete_many`` writes and then reports an outage (the answer lost on the way)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def complete_many(self, completions: Sequence[Completion], *, now: datetime) -> list[tuple[bool, bool]]:
        self._store.complete_many(completions, now=now)
        raise StoreUnavailable("the answer was lost")


def test_a_final_write_that_applied_but_answered_an_error_is_not_lost_or_doubled(fake: Harness) -> None:
    fires = claimed(fake, 3)
    runner = quick_runner(fake, ApplyThenFail(fake.store))
    outcomes = runner.run_many(fires)
    assert statuses(fake, fires) == ["success"] * 3
    for fire in fires:
        job = fake.store.get_job(fire.job.id)
        assert job.lease is None and job.next_run_at == fake.clock.now() + timedelta(seconds=60)
        assert job.last_run is not None and job.last_run.runs == 1
    assert fake.metrics.finished and len(fake.metrics.finished) == 3  # each finished once
    assert all(o.execution is not None for o in outcomes)


def test_a_handler_is_quick_only_after_enough_quick_runs(fake: Harness) -> None:
    [fire] = claimed(fake, 1)
    runner = fake.runner()
    assert not runner.batchable(fire)
    for _ in range(QUICK_RUNS - 1):
        runner._timed("noop", 0.0001)
    assert not runner.batchable(fire)
    runner._timed("noop", 0.0001)
    assert runner.batchable(fire)
    runner._timed("noop", 0.5)  # one slow run and it is not quick again until the average says so
    assert not runner.batchable(fire)


@pytest.mark.parametrize(
    "change",
    [
        {"max_retries": 2},  # a retry's backoff would hold up the batch
        {"policy": Policy(overlap=Overlap.ALLOW_ALL)},
    ],
)
def test_fires_the_single_path_must_take_are_not_batchable(fake: Harness, change: dict[str, Any]) -> None:
    [fire] = claimed(fake, 1)
    runner = quick_runner(fake)
    assert runner.batchable(fire)
    assert not runner.batchable(replace(fire, job=fire.job.with_changes(**change)))


def batch_worker(h: Harness, fires: list[Fire]) -> tuple[TaskRunner, threading.Thread]:
    """The harness's runner, ``test.maybe_hang`` quick to it, and a worker thread (not started) that runs
    ``fires`` through its ``run_many``."""
    runner = h.runner()
    quick(runner, "test.maybe_hang")
    return runner, threading.Thread(target=runner.run_many, args=(fires,), daemon=True)


def all_final(h: Harness, fires: list[Fire]) -> bool:
    """Every fire's execution is recorded and final. One reading: two could see no rows yet (vacuously
    final) and then the ones just recorded."""
    now = statuses(h, fires)
    return len(now) == len(fires) and "running" not in now


def test_a_batched_run_past_its_deadline_is_taken_over_and_the_rest_go_on(inline: Harness) -> None:
    # the second of four fires hangs: its take-over finishes it as a timeout and runs the last two, while
    # the worker's thread is still held by the hung handler
    release = threading.Event()
    runs: list[tuple[str, threading.Thread]] = []

    def handler(ctx: Any) -> None:
        runs.append((ctx.job_name, threading.current_thread()))
        if ctx.payload.get("hang"):
            release.wait(10)

    inline.registry.register("test.maybe_hang", handler)
    fires = [
        *claimed(inline, 1, "test.maybe_hang", name="a", timeout=0.3),
    ]
    inline.add("test.maybe_hang", name="b", timeout=0.3, payload={"hang": True})
    inline.add("test.maybe_hang", name="c", timeout=0.3)
    inline.add("test.maybe_hang", name="d", timeout=0.3)
    fires += inline.claim(at_least=3)
    fires.sort(key=lambda f: f.job.name)
    _, worker = batch_worker(inline, fires)
    try:
        worker.start()

        assert wait_until(lambda: all_final(inline, fires))
        assert statuses(inline, fires) == ["success", "timeout", "success", "success"]
        assert worker.is_alive()  # still held by b's handler
        assert [name for name, _ in runs] == ["a", "b", "c", "d"]
        assert runs[0][1] is worker and runs[1][1] is worker
        assert runs[2][1] is not worker and runs[2][1] is runs[3][1]  # c and d ran on the take-over's thread
        for fire in fires:
            assert inline.store.get_job(fire.job.id).lease is None  # each advanced
    finally:
        release.set()
    worker.join(10)
    assert not worker.is_alive()
    assert statuses(inline, fires) == ["success", "timeout", "success", "success"]
    assert len(inline.metrics.finished) == 4  # each finished once, the straggler's return wrote nothing
    assert Counter(inline.publisher.types())["job.execution.timeout"] == 1


def four_with_b_hanging(h: Harness, *, timeout: float) -> tuple[list[Fire], threading.Event, list[Any]]:
    """Four claimed fires of one quick handler, a to d; b's run hangs until the event is set."""
    release = threading.Event()
    runs: list[tuple[str, threading.Thread]] = []

    def handler(ctx: Any) -> None:
        runs.append((ctx.job_name, threading.current_thread()))
        if ctx.payload.get("hang"):
            release.wait(10)

    h.registry.register("test.maybe_hang", handler)
    for name in "abcd":
        h.add("test.maybe_hang", name=name, timeout=timeout, payload={"hang": name == "b"})
    fires = sorted(h.claim(at_least=4), key=lambda f: f.job.name)
    return fires, release, runs


def test_the_rest_of_a_batch_held_up_by_a_run_is_taken_to_another_thread(inline: Harness) -> None:
    # b hangs (its deadline 30 s away): a ran before it, c and d wait behind it. take_stalled hands a's
    # final write and c's and d's runs to a thread of their own, so none waits for b; b's thread writes
    # only b, when b returns
    fires, release, runs = four_with_b_hanging(inline, timeout=30)
    runner, worker = batch_worker(inline, fires)
    try:
        worker.start()
        assert wait_until(lambda: [name for name, _ in runs] == ["a", "b"])
        assert runner.take_stalled(30, 10) == []  # b has not run that long
        rests = runner.take_stalled(0.0, 10)
        assert len(rests) == 1
        assert runner.take_stalled(0.0, 10) == []  # taken: nothing more to hand over while b runs
        rest = threading.Thread(target=rests[0], daemon=True)
        rest.start()
        rest.join(10)
        assert statuses(inline, fires) == ["success", "running", "success", "success"]
        assert [name for name, _ in runs] == ["a", "b", "c", "d"]
        assert runs[2][1] is rest and runs[3][1] is rest  # c and d ran on the rest's thread
        for fire in fires:
            job = inline.store.get_job(fire.job.id)
            assert (job.lease is None) == (fire.job.name != "b")  # a, c and d advanced; b still leased
        assert worker.is_alive()
    finally:
        release.set()
    worker.join(10)
    assert not worker.is_alive()
    assert statuses(inline, fires) == ["success"] * 4
    assert inline.store.get_job(fires[1].job.id).lease is None
    assert len(inline.metrics.finished) == 4  # each finished once
    assert Counter(inline.publisher.types()) == Counter({"job.execution.started": 4, "job.execution.succeeded": 4})
    assert inline.locker is not None
    assert all(inline.locker.acquire(f"job:{f.job.id}", 1) for f in fires)  # every lock let go


def test_a_run_handed_off_from_then_outliving_its_deadline_is_concluded_once(inline: Harness) -> None:
    # the rest goes to another thread; b's take-over at its deadline then finds nothing left of the batch
    # to go on with, and concludes b alone
    fires, release, runs = four_with_b_hanging(inline, timeout=2)
    runner, worker = batch_worker(inline, fires)
    try:
        worker.start()
        assert wait_until(lambda: len(runs) == 2)
        [rest] = runner.take_stalled(0.0, 10)
        rest()
        assert statuses(inline, fires) == ["success", "running", "success", "success"]

        assert wait_until(lambda: all_final(inline, fires))
        assert statuses(inline, fires) == ["success", "timeout", "success", "success"]
        assert worker.is_alive()
    finally:
        release.set()
    worker.join(10)
    assert [name for name, _ in runs] == ["a", "b", "c", "d"]  # each ran once
    assert statuses(inline, fires) == ["success", "timeout", "success", "success"]
    assert len(inline.metrics.finished) == 4
    assert Counter(inline.publisher.types())["job.execution.timeout"] == 1
    for fire in fires:
        assert inline.store.get_job(fire.job.id).lease is None


def test_a_batch_whose_last_run_hangs_hands_over_only_the_final_writes_before_it(inline: Harness) -> None:
    release = threading.Event()
    runs: list[str] = []

    def handler(ctx: Any) -> None:
        runs.append(ctx.job_name)
        if ctx.payload.get("hang"):
            release.wait(10)

    inline.registry.register("test.maybe_hang", handler)
    for name in "abc":
        inline.add("test.maybe_hang", name=name, timeout=30, payload={"hang": name == "c"})
    fires = sorted(inline.claim(at_least=3), key=lambda f: f.job.name)
    runner, worker = batch_worker(inline, fires)
    try:
        worker.start()
        assert wait_until(lambda: runs == ["a", "b", "c"])
        [rest] = runner.take_stalled(0.0, 10)
        rest()  # writes a and b: their jobs' next fires do not wait for c
        assert statuses(inline, fires) == ["success", "success", "running"]
        assert [inline.store.get_job(f.job.id).lease is None for f in fires] == [True, True, False]
    finally:
        release.set()
    worker.join(10)
    assert statuses(inline, fires) == ["success"] * 3
    assert len(inline.metrics.finished) == 3


def test_the_fires_to_run_alone_after_a_batch_go_with_its_rest(inline: Harness) -> None:
    # a hangs; b is the batch's, c and d run alone after it (retries: not batchable), c hanging too. The
    # rest of a's batch takes b, c and d; the rest of that one, while c hangs, takes d
    gates = {name: threading.Event() for name in "ac"}
    runs: list[tuple[str, threading.Thread]] = []

    def handler(ctx: Any) -> None:
        runs.append((ctx.job_name, threading.current_thread()))
        if ctx.job_name in gates:
            gates[ctx.job_name].wait(10)

    inline.registry.register("test.maybe_hang", handler)
    for name in "abcd":
        inline.add("test.maybe_hang", name=name, timeout=30, max_retries=0 if name in "ab" else 1)
    fires = sorted(inline.claim(at_least=4), key=lambda f: f.job.name)
    runner, worker = batch_worker(inline, fires)
    assert [runner.batchable(f) for f in fires] == [True, True, False, False]
    rests: list[threading.Thread] = []
    try:
        worker.start()
        assert wait_until(lambda: [name for name, _ in runs] == ["a"])
        [rest] = runner.take_stalled(0.0, 10)
        rests.append(threading.Thread(target=rest, daemon=True))
        rests[0].start()
        assert wait_until(lambda: [name for name, _ in runs] == ["a", "b", "c"])
        [rest] = runner.take_stalled(0.0, 10)
        rests.append(threading.Thread(target=rest, daemon=True))
        rests[1].start()
        rests[1].join(10)
        assert [name for name, _ in runs] == ["a", "b", "c", "d"]
        assert [thread for _, thread in runs] == [worker, rests[0], rests[0], rests[1]]
        assert statuses(inline, fires) == ["running", "success", "running", "success"]
    finally:
        for gate in gates.values():
            gate.set()
    worker.join(10)
    rests[0].join(10)
    assert statuses(inline, fires) == ["success"] * 4
    assert len(inline.metrics.finished) == 4
    for fire in fires:
        assert inline.store.get_job(fire.job.id).lease is None


def test_a_batch_not_held_up_is_not_taken_apart(fake: Harness) -> None:
    # between runs (a fire's restamp, the final write) nothing runs that could hang: a batch then has
    # nothing to hand over, however long those take; once done, no batch is driven
    fires = claimed(fake, 3)
    runner = quick_runner(fake)
    taken: list[int] = []
    on_time, finish_many = runner._on_time, runner._finish_many

    def looked(real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            taken.append(len(runner.take_stalled(0.0, 10)))  # as if it had lasted for ever
            return real(*args, **kwargs)

        return call

    runner._on_time = looked(on_time)  # type: ignore[method-assign]
    runner._finish_many = looked(finish_many)  # type: ignore[method-assign]
    runner.run_many(fires)
    assert taken == [0, 0, 0, 0]  # three restamp checks, one final write
    assert runner._driving == {}
    assert statuses(fake, fires) == ["success"] * 3


def test_a_batch_cut_off_by_shutdown_is_interrupted_and_released(fake: Harness) -> None:
    fires = claimed(fake, 3)
    runner = quick_runner(fake)
    runner.shutdown.set()  # no attempt starts: each fire is interrupted and its claim given back
    runner.run_many(fires)
    assert statuses(fake, fires) == ["interrupted"] * 3
    for fire in fires:
        job = fake.store.get_job(fire.job.id)
        assert job.lease is None and job.next_run_at == fire.job.next_run_at


def test_start_executions_and_complete_many_match_the_single_calls(fake: Harness) -> None:
    # the shapes the batch path hands the store: checked against the one-at-a-time calls' results
    fires = claimed(fake, 3)
    executions: list[Execution] = [make_execution(f) for f in fires]
    started: list[Started] = fake.store.start_executions(executions)
    assert [s.created for s in started] == [True, True, True]
    assert [fake.store.start_execution(e).created for e in executions] == [False, False, False]
    done = [
        e.with_changes(status=ExecutionStatus.SUCCESS, finished_at=fake.clock.now(), duration=0.0) for e in executions
    ]
    later = fake.clock.now() + timedelta(seconds=60)
    assert fake.store.complete_many([Completion(d, f, later) for d, f in zip(done, fires, strict=True)],
                                    now=fake.clock.now()) == [(True, True)] * 3  # fmt: skip


def test_deferred_finishes_are_written_later_as_of_the_runs_end(fake: Harness) -> None:
    """``run_many(defer=True)`` (serve's workers, while more fires are queued): the runs start and end, their
    final writes wait for ``finish_deferred``, and are then written as they would have been at the runs' end."""
    assert isinstance(fake.clock, FakeClock)
    fires = claimed(fake, 6)
    store = Counting(fake.store)
    runner = quick_runner(fake, store)
    ended = fake.clock.now()
    outcomes = runner.run_many(fires[:3], defer=True)
    assert [o.execution.status for o in outcomes if o.execution] == [ExecutionStatus.RUNNING] * 3
    assert statuses(fake, fires[:3]) == ["running"] * 3 and store.calls["complete_many"] == 0
    assert fake.locker is not None
    assert all(fake.locker.acquire(f"job:{f.job.id}", 1) for f in fires[:3])  # the locks went with the runs
    fake.clock.advance(0.02)
    runner.run_many(fires[3:], defer=True)
    assert statuses(fake, fires) == ["running"] * 6
    fake.clock.advance(0.03)  # within DEFER_SECONDS of the first
    runner.run_many([], defer=True)  # a batch's start looks at the age of what waits
    assert store.calls["complete_many"] == 0
    runner.finish_deferred()
    assert store.calls["complete_many"] == 2  # a write per batch, the older first
    assert statuses(fake, fires) == ["success"] * 6
    for fire, at in [(f, ended) for f in fires[:3]] + [(f, ended + timedelta(seconds=0.02)) for f in fires[3:]]:
        (execution,) = fake.store.list_executions(fire.job.id)
        assert execution.finished_at == at
        job = fake.store.get_job(fire.job.id)
        assert job.lease is None and job.next_run_at == at + timedelta(seconds=60)  # interval: from the end
    runner.finish_deferred()
    assert store.calls["complete_many"] == 2  # nothing twice
    assert Counter(fake.publisher.types()) == Counter({"job.execution.started": 6, "job.execution.succeeded": 6})


def test_deferred_finishes_are_written_before_the_next_batch_not_deferred(fake: Harness) -> None:
    fires = claimed(fake, 6)
    store = Counting(fake.store)
    runner = quick_runner(fake, store)
    runner.run_many(fires[:3], defer=True)
    order: list[list[str]] = []
    complete_many = store._store.complete_many

    def recording(completions: Sequence[Completion], *, now: datetime) -> list[tuple[bool, bool]]:
        order.append([c.fire.job.id for c in completions])
        done: list[tuple[bool, bool]] = complete_many(completions, now=now)
        return done

    store._store = _Patched(store._store, complete_many=recording)
    runner.run_many(fires[3:])
    assert order == [[f.job.id for f in fires[:3]], [f.job.id for f in fires[3:]]]
    assert statuses(fake, fires) == ["success"] * 6
    # and a fire run alone finishes what waits before it starts
    more = claimed(fake, 3)
    runner.run_many(more[:2], defer=True)
    runner.run_many(more[2:], defer=True)  # one fire: the single path
    assert statuses(fake, more) == ["success"] * 3


@pytest.mark.parametrize("bound", ["runs", "seconds"])
def test_deferred_finishes_are_bounded_in_number_and_in_age(fake: Harness, bound: str, monkeypatch: Any) -> None:
    assert isinstance(fake.clock, FakeClock)
    if bound == "runs":
        monkeypatch.setattr(lifecycle, "DEFER_RUNS", 4)
    fires = claimed(fake, 6)
    runner = quick_runner(fake)
    runner.run_many(fires[:2], defer=True)
    assert statuses(fake, fires[:2]) == ["running"] * 2
    if bound == "runs":
        runner.run_many(fires[2:4], defer=True)  # four deferred: the bound
        assert statuses(fake, fires[:4]) == ["success"] * 4
    else:
        fake.clock.advance(lifecycle.DEFER_SECONDS - 0.001)
        runner.run_many(fires[2:4], defer=True)
        assert statuses(fake, fires[:4]) == ["running"] * 4
        fake.clock.advance(0.001)
        runner.run_many([], defer=True)  # the first ended DEFER_SECONDS ago: all are written
        assert statuses(fake, fires[:4]) == ["success"] * 4
    runner.run_many(fires[4:], defer=True)
    assert statuses(fake, fires[4:]) == ["running"] * 2
    runner.finish_deferred()
    assert statuses(fake, fires) == ["success"] * 6


def test_what_waits_is_written_before_a_fire_of_the_batch_runs_alone(fake: Harness, tmp_path: Any) -> None:
    """A fire of a batch that goes the single way may take long (a held lock, a slow run, a take-over that
    retires the worker): the deferred finishes are written before it, not left behind it."""
    fires = claimed(fake, 3)
    alone = claimed(fake, 1, handler="test.record", payload={"path": str(tmp_path / "calls")})  # not quick
    store = Counting(fake.store)
    runner = quick_runner(fake, store)
    runner.run_many(fires[:2], defer=True)
    assert statuses(fake, fires[:2]) == ["running"] * 2
    store.order.clear()
    runner.run_many([fires[2], *alone], defer=True)
    # what waited, and the batch's own runs (over before it), are written; then the fire alone is recorded
    assert [name for name in store.order if name in ("complete_many", "start_execution")] == [
        "complete_many", "complete_many", "start_execution"
    ]  # fmt: skip
    assert statuses(fake, fires) == ["success"] * 3 and statuses(fake, alone) == ["success"]


def test_deferred_finishes_are_written_on_time_whatever_the_workers_do_next(real: Harness) -> None:
    """No worker comes back (the next batch hangs in a handler till its deadline, or nothing follows): the
    deferred finishes are written all the same, once ``DEFER_SECONDS`` old, by the timer the first started."""
    fires = claimed(real, 3)
    runner = quick_runner(real)
    runner.run_many(fires, defer=True)
    assert statuses(real, fires) == ["running"] * 3
    assert wait_until(lambda: statuses(real, fires) == ["success"] * 3, timeout=10)


def test_a_deferred_run_whose_final_state_cannot_be_made_keeps_no_other_from_being_written(
    fake: Harness, monkeypatch: Any
) -> None:
    """An error making one run's final state (none is known; anything unforeseen) leaves that run to be
    resumed by the next claim, as a run cut off is, and every other deferred run of its batch and of the
    batches after it is written all the same."""
    fires = claimed(fake, 6)
    runner = quick_runner(fake)
    runner.run_many(fires[:3], defer=True)
    runner.run_many(fires[3:], defer=True)
    broken = {e.id for e in fake.store.list_executions(fires[1].job.id)}
    done = lifecycle._done

    def failing(execution: Execution, outcome: Any, now: datetime) -> Execution:
        if execution.id in broken:
            raise RuntimeError("unforeseen")
        return done(execution, outcome, now)

    monkeypatch.setattr(lifecycle, "_done", failing)
    runner.finish_deferred()
    assert statuses(fake, fires) == ["success", "running", "success", "success", "success", "success"]


class _Patched:
    """``target`` with some attributes replaced."""

    def __init__(self, target: Any, **replaced: Any) -> None:
        self._target, self._replaced = target, replaced

    def __getattr__(self, name: str) -> Any:
        return self._replaced[name] if name in self._replaced else getattr(self._target, name)
