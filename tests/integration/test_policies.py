"""The per-job policies through the engine, on every store, with a fake clock: the five overlap policies
(what happens to the slots that come due while a run goes on), the catch-up window with a buffer, and
jitter (each fire's fixed offset, claimed, held and recorded). Each policy's tests fail with it ignored
(the job behaving as ``skip`` with no jitter); a few guard what a policy must leave alone."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from tests.support.engine import Engine, T
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fire_rules import SkipReason
from ticklock.domain.fires import Fire
from ticklock.domain.job_settings import BUFFER_ALL_CAP, Overlap, Policy
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import IntervalSchedule
from ticklock.errors import StoreUnavailable
from ticklock.handlers.contract import HandlerContext
from ticklock.ports import Store


def _ran(engine: Engine, job: Job) -> list[tuple[int, str]]:
    """(slot as seconds after T, status) of the job's executions, oldest first."""
    runs = engine.store.list_executions(job.id, limit=500)
    return [(int((e.scheduled_at - T).total_seconds()), e.status.value) for e in reversed(runs)]


def _next(engine: Engine, job: Job) -> int:
    at = engine.store.get_job(job.id).next_run_at
    assert at is not None
    return int((at - T).total_seconds())


def test_skip_the_default_goes_on_at_the_first_slot_after_the_run(engine: Engine) -> None:
    job = engine.add("long")  # runs 25 s: +10 and +20 come due while it runs
    engine.runner().run(engine.claim())
    assert _next(engine, job) == 30 and engine.ledger(job) == [("overlap_skip", 10, 20, 2)]


def test_buffer_one_runs_the_latest_slot_that_came_due_right_after_the_run(engine: Engine) -> None:
    job = engine.add("long", policy=Policy(overlap=Overlap.BUFFER_ONE))
    engine.runner().run(engine.claim())  # T to +25
    assert _next(engine, job) == 20  # the latest of +10 and +20, due now: it runs next
    assert engine.ledger(job) == [("overlap_skip", 10, 10, 1)]
    engine.runner().run(engine.claim())  # +20, from +25 to +50: +30, +40, +50 come due
    assert _ran(engine, job) == [(0, "success"), (20, "success")]
    assert _next(engine, job) == 50
    assert engine.ledger(job) == [("overlap_skip", 10, 10, 1), ("overlap_skip", 30, 40, 2)]


def test_buffer_all_runs_every_slot_that_came_due_in_turn(engine: Engine) -> None:
    job = engine.add("long", policy=Policy(overlap=Overlap.BUFFER_ALL))
    for _ in range(4):
        engine.runner().run(engine.claim())  # each runs 25 s; the slots queue up behind
    assert _ran(engine, job) == [(0, "success"), (10, "success"), (20, "success"), (30, "success")]
    assert _next(engine, job) == 40 and engine.ledger(job) == []


def test_buffer_all_keeps_at_most_its_cap_waiting_and_skips_the_older(engine: Engine) -> None:
    job = engine.add(policy=Policy(overlap=Overlap.BUFFER_ALL))
    late = 10 * (BUFFER_ALL_CAP + 50)
    engine.clock.advance(late)  # the fire at T runs 1,500 s late: 150 slots passed
    engine.runner().run(engine.claim())
    assert _next(engine, job) == late - 10 * (BUFFER_ALL_CAP - 1)  # the oldest of the newest 100 runs next
    assert engine.ledger(job) == [("collapsed", 10, 500, 50)]


def test_a_buffer_keeps_no_slot_older_than_the_catch_up_window(engine: Engine) -> None:
    job = engine.add(policy=Policy(overlap=Overlap.BUFFER_ALL, catchup_window=35))
    engine.clock.advance(100)  # T is 100 s late: missed; +70 to +100 are within 35 s of now
    assert engine.runner().run(engine.claim()).skipped is SkipReason.CATCHUP_WINDOW_PASSED
    assert _next(engine, job) == 70
    assert engine.ledger(job) == [("catchup_window_passed", 0, 0, 1), ("collapsed", 10, 60, 6)]
    for _ in range(4):
        engine.runner().run(engine.claim())
    assert _ran(engine, job) == [(70, "success"), (80, "success"), (90, "success"), (100, "success")]


def test_cancel_other_cancels_a_sync_run_when_the_next_slot_comes_due_and_starts_it(engine: Engine) -> None:
    saw: list[bool] = []

    def stubborn(ctx: HandlerContext) -> None:
        if ctx.scheduled_at == T:
            saw.append(ctx.cancelled.wait(30))  # returns once told to stop (real seconds; the cut is 0.2 s away)

    engine.registry.register("stubborn", stubborn)
    job = engine.add("stubborn", policy=Policy(overlap=Overlap.CANCEL_OTHER))
    engine.clock.advance(9.8)  # the run starts 0.2 s before +10
    outcome = engine.runner().run(engine.claim())
    assert outcome.execution is not None and outcome.execution.status is ExecutionStatus.CANCELLED
    assert saw == [True] and "overlap policy cancel_other" in (outcome.execution.error or "")
    assert "+00:00" in (outcome.execution.error or "")  # it names the fire that cancelled it
    assert _next(engine, job) == 10 and engine.ledger(job) == []  # the fire that cancelled it runs next
    engine.clock.advance(1)
    assert engine.runner().run(engine.claim()).execution is not None
    assert _ran(engine, job)[0] == (0, "cancelled") and _ran(engine, job)[1][0] == 10
    types = [e.detail_type for e in engine.publisher.events]
    assert "job.execution.cancelled" in types


def test_cancel_other_cancels_an_async_run_for_real(engine: Engine) -> None:
    cancelled = threading.Event()

    async def sleeper(ctx: HandlerContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    engine.registry.register("sleeper", sleeper)
    job = engine.add("sleeper", policy=Policy(overlap=Overlap.CANCEL_OTHER))
    engine.clock.advance(9.8)
    outcome = engine.runner().run(engine.claim())
    assert outcome.execution is not None and outcome.execution.status is ExecutionStatus.CANCELLED
    assert cancelled.wait(5) and _next(engine, job) == 10


def test_cancel_other_lets_a_run_that_ends_in_time_be(engine: Engine) -> None:
    job = engine.add(policy=Policy(overlap=Overlap.CANCEL_OTHER))
    outcome = engine.runner().run(engine.claim())
    assert outcome.execution is not None and outcome.execution.status is ExecutionStatus.SUCCESS
    assert _next(engine, job) == 10


def test_allow_all_starts_the_next_fire_while_the_run_goes_on_once_per_fire(engine: Engine) -> None:
    release, started = threading.Event(), threading.Event()

    def held(ctx: HandlerContext) -> None:
        if ctx.scheduled_at == T:  # the first fire's run goes on until released
            started.set()
            release.wait(30)

    engine.registry.register("held", held)
    job = engine.add("held", policy=Policy(overlap=Overlap.ALLOW_ALL))
    runner = engine.runner()  # one runner, one lock table: as one process
    first = engine.claim()
    thread = threading.Thread(target=runner.run, args=(first,))
    thread.start()
    try:
        assert started.wait(10)
        engine.clock.advance(10)  # +10 comes due while T's run goes on
        second = engine.claim()  # the job was advanced when T's run started: it is claimable
        assert second.scheduled_at == T + timedelta(seconds=10)
        outcome = runner.run(second)
        assert outcome.execution is not None and outcome.execution.status is ExecutionStatus.SUCCESS
        # a second delivery of either fire runs nothing: one run per fire
        assert runner.run(second).skipped is SkipReason.DUPLICATE
        assert runner.run(first).skipped is SkipReason.LOCK_HELD  # the fire's own lock, held by its run
        assert engine.runner().run(first).skipped is SkipReason.RUNNING_ELSEWHERE  # another process: its row
    finally:
        release.set()
        thread.join(10)
    assert _ran(engine, job) == [(0, "success"), (10, "success")]
    assert _next(engine, job) == 20 and engine.ledger(job) == []


class _FinishFails:
    """The store, with every final write of an execution failing: the runner dies before it records one."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def finish_execution(self, execution: Execution) -> bool:
        raise StoreUnavailable("the runner died")

    def complete(self, *args: Any, **kwargs: Any) -> tuple[bool, bool]:
        raise StoreUnavailable("the runner died")


def test_allow_all_fires_whose_runner_vanished_are_lost_by_housekeeping(engine: Engine) -> None:
    together = engine.add(policy=Policy(overlap=Overlap.ALLOW_ALL))
    alone = engine.add()
    claimed = engine.store.claim_due(now=T, horizon=T, limit=10, owner="test", slack=timedelta(seconds=60))
    dying = engine.runner(store=_FinishFails(engine.store))
    for job in sorted(claimed, key=lambda j: j.id != together.id):  # each retry of its final write takes fake time
        with pytest.raises(StoreUnavailable):
            dying.run(Fire.of(job))  # it ran, and its runner died before the final write
    [row] = engine.store.list_executions(together.id)
    assert row.status is ExecutionStatus.RUNNING and row.detached
    assert _next(engine, together) == 10  # its job went on when it started
    runner = engine.runner()
    assert runner.lose_orphans() == 0  # still within its deadline
    engine.clock.advance((T + timedelta(seconds=66) - engine.clock.now()).total_seconds())  # past deadline + margin
    assert runner.lose_orphans() == 1
    lost = engine.store.get_execution(row.id)
    assert lost.status is ExecutionStatus.LOST and "allow_all" in (lost.error or "")
    [other] = engine.store.list_executions(alone.id)
    assert other.status is ExecutionStatus.RUNNING and not other.detached  # its claim comes back: resumed
    assert ("ran", "lost", 1) in engine.metrics.accounted
    assert runner.lose_orphans() == 0  # once


def test_allow_all_runs_even_when_its_early_advance_fails_and_advances_at_the_end(engine: Engine) -> None:
    class AdvanceFails:
        def __init__(self, store: Store) -> None:
            self._store, self.failed = store, 0

        def __getattr__(self, name: str) -> Any:
            return getattr(self._store, name)

        def advance(self, *args: Any, **kwargs: Any) -> bool:
            self.failed += 1
            raise StoreUnavailable("a blip")

    job = engine.add(policy=Policy(overlap=Overlap.ALLOW_ALL))
    flaky = AdvanceFails(engine.store)
    runner = engine.runner(store=flaky)
    outcome = runner.run(engine.claim())
    assert flaky.failed == 1
    assert outcome.execution is not None and outcome.execution.status is ExecutionStatus.SUCCESS
    assert _next(engine, job) == 10 and engine.store.get_job(job.id).lease is None  # advanced by the finish


def test_allow_all_leaves_an_interval_job_one_run_at_a_time(engine: Engine) -> None:
    job = engine.add("long", schedule=IntervalSchedule(10), policy=Policy(overlap=Overlap.ALLOW_ALL))
    outcome = engine.runner().run(engine.claim())
    assert outcome.execution is not None and not outcome.execution.detached
    assert engine.store.get_job(job.id).next_run_at == T + timedelta(seconds=35)  # 10 s after the 25 s run


def test_cancel_other_does_not_cut_a_manual_run(engine: Engine) -> None:
    job = engine.add("long", policy=Policy(overlap=Overlap.CANCEL_OTHER))
    paused = engine.store.update_job(
        engine.store.get_job(job.id).with_changes(enabled=False, trigger_at=T), expected_version=1
    )
    fire = engine.claim()
    assert fire.trigger.value == "manual" and not paused.enabled
    outcome = engine.runner().run(fire)  # 25 s: past +10, a slot that will not fire while paused
    assert outcome.execution is not None and outcome.execution.status is ExecutionStatus.SUCCESS


def test_a_trigger_before_a_jittered_fire_runs_first(engine: Engine) -> None:
    policy = Policy(max_jitter=8)
    job = _offset_at_least(engine, policy, 4.0)
    engine.store.update_job(
        engine.store.get_job(job.id).with_changes(trigger_at=T + timedelta(seconds=2)), expected_version=1
    )
    engine.clock.advance(2)  # the trigger is due, the scheduled fire (T + its offset) not yet
    fire = engine.claim()
    assert fire.trigger.value == "manual" and fire.due == T + timedelta(seconds=2)


def test_with_jitter_a_slot_whose_offset_has_not_come_is_not_passed(engine: Engine) -> None:
    policy = Policy(max_jitter=8)
    job = engine.add("long", policy=policy)  # runs 25 s: +10 and +20 came due, +30 may not have yet
    engine.clock.advance(policy.jitter(job.id, T))
    engine.runner().run(engine.claim())
    now = engine.clock.now()
    after = engine.store.get_job(job.id).next_run_at
    assert after is not None
    assert (job.with_changes(policy=policy).jittered(after) or after) > now  # the job waits for a fire not yet due
    previous = after - timedelta(seconds=10)
    assert (job.jittered(previous) or previous) <= now  # and the one before it had come due: passed
    [(reason, first, last, _)] = engine.ledger(job)
    assert reason == "overlap_skip" and first == 10 and last == int((previous - T).total_seconds())


def test_a_jittered_interval_job_keeps_its_offset_on_a_store_of_milliseconds() -> None:
    policy = Policy(max_jitter=30)
    slot = T + timedelta(seconds=12, microseconds=345_678)  # now + interval: microseconds
    kept = T + timedelta(seconds=12, microseconds=345_000)  # as MongoDB keeps it
    assert policy.jitter("job", slot) == policy.jitter("job", kept)


def test_a_policy_of_defaults_is_stored_as_the_release_before_policies_reads_it() -> None:
    assert Policy(catchup_window=5).to_record() == {"catchup_window": 5.0}  # what the release before wrote
    full = Policy(catchup_window=5, overlap=Overlap.BUFFER_ONE, max_jitter=1.5)
    assert full.to_record() == {"catchup_window": 5.0, "overlap": "buffer_one", "max_jitter": 1.5}
    assert Policy.from_dict(full.to_record()) == full and Policy.from_dict(Policy().to_record()) == Policy()


def test_jitter_is_fixed_per_fire_and_within_its_bound() -> None:
    policy = Policy(max_jitter=5)
    offsets = [policy.jitter("job-a", T + timedelta(seconds=10 * i)) for i in range(2000)]
    assert all(0 <= o <= 5 for o in offsets) and offsets == [
        Policy(max_jitter=5).jitter("job-a", T + timedelta(seconds=10 * i)) for i in range(2000)
    ]
    assert len(set(offsets)) > 1500  # spread, in milliseconds
    assert min(offsets) < 0.5 and max(offsets) > 4.5
    assert offsets != [policy.jitter("job-b", T + timedelta(seconds=10 * i)) for i in range(2000)]
    assert Policy().jitter("job-a", T) == 0.0


def _offset_at_least(engine: Engine, policy: Policy, seconds: float) -> Job:
    """A job with ``policy`` whose fire at T has an offset of at least ``seconds`` (ids are tried in turn)."""
    job = engine.add(policy=policy)
    chosen = next(f"{job.id}-{i}" for i in range(1000) if policy.jitter(f"{job.id}-{i}", T) >= seconds)
    engine.store.delete_job(job.id)
    return engine.store.add_job(job.with_changes(id=chosen))


def test_a_jittered_fire_is_claimed_at_its_offset_and_its_execution_carries_it(engine: Engine) -> None:
    policy = Policy(max_jitter=8)
    job = _offset_at_least(engine, policy, 1.0)
    offset = policy.jitter(job.id, T)
    none = engine.store.claim_due(now=T, horizon=T, limit=10, owner="test", slack=timedelta(seconds=60))
    assert none == []  # its slot came, its offset did not
    engine.clock.advance(offset)
    fire = engine.claim()
    assert fire.scheduled_at == T and fire.due == T + timedelta(seconds=offset)  # the fire keeps its slot
    outcome = engine.runner().run(fire)
    assert outcome.execution is not None
    stored = engine.store.get_execution(outcome.execution.id)
    assert stored.jitter == offset and stored.lag == pytest.approx(0.0, abs=1e-6)
    after = engine.store.get_job(job.id)
    assert after.next_run_at == T + timedelta(seconds=10)
    assert after.due_at(engine.clock.now()) == T + timedelta(seconds=10 + policy.jitter(job.id, after.next_run_at))


def test_a_catch_up_window_counts_from_the_jittered_time(engine: Engine) -> None:
    policy = Policy(max_jitter=5, catchup_window=2)  # the fire is due at +3 to +5, run before +10
    job = _offset_at_least(engine, policy, 3.0)
    offset = policy.jitter(job.id, T)
    engine.clock.advance(offset + 1.5)  # 1.5 s after it was due: more than 4.5 s after its slot
    outcome = engine.runner().run(engine.claim())
    assert outcome.execution is not None and engine.ledger(job) == []


def test_the_dispatcher_holds_a_jittered_fire_until_its_offset(engine: Engine) -> None:
    from ticklock.engine.dispatcher import Dispatcher

    class Recording:
        def __init__(self) -> None:
            self.fires: list[Fire] = []

        def submit(self, fire: Fire) -> None:
            self.fires.append(fire)

        def flush(self) -> None:
            pass

    policy = Policy(max_jitter=8)
    job = _offset_at_least(engine, policy, 1.0)
    offset = timedelta(seconds=policy.jitter(job.id, T))
    queue = Recording()
    dispatcher = Dispatcher(
        store=engine.store,
        queue=queue,  # type: ignore[arg-type]
        clock=engine.clock,
        metrics=engine.metrics,
        owner="test",
        lookahead=10.0,
    )
    assert dispatcher.claim(T)[0] == 1  # within the look-ahead
    dispatcher.release_due(T + offset - timedelta(milliseconds=1))
    assert queue.fires == []
    dispatcher.release_due(T + offset)
    assert [f.scheduled_at for f in queue.fires] == [T]


def test_a_policy_survives_every_store_and_a_record(engine: Engine) -> None:
    from ticklock.adapters.queue.sqs import decode_fire, encode_fire

    policy = Policy(catchup_window=30, overlap=Overlap.CANCEL_OTHER, max_jitter=2.5)
    job = engine.add(policy=policy)
    assert engine.store.get_job(job.id).policy == policy
    engine.clock.advance(3)
    assert decode_fire(encode_fire(engine.claim())).job.policy == policy


def test_every_overlap_policy_reads_back_and_an_unknown_one_is_refused() -> None:
    from ticklock.errors import InvalidJob

    for overlap in Overlap:
        assert Policy.from_dict(Policy(overlap=overlap).to_dict()).overlap is overlap
    assert Policy.from_dict({"catchup_window": 5}) == Policy(catchup_window=5)  # a stored policy of before
    with pytest.raises(InvalidJob, match="buffer_one") as raised:
        Policy.from_dict({"overlap": "queue"})
    assert raised.value.field == "policy.overlap"
    assert Policy(max_jitter=0.0005).jitter("j", T) <= 0.0005  # never past its bound, even below 1 ms


def test_the_lock_is_released_before_the_advance_so_a_buffered_fire_due_at_once_can_take_it(engine: Engine) -> None:
    from ticklock.adapters.lock.local import LocalLocker

    class Watching(LocalLocker):
        def __init__(self) -> None:
            super().__init__(engine.clock)
            self.leased_at_release: list[bool] = []

        def release(self, key: str, token: str) -> None:
            self.leased_at_release.append(engine.store.get_job(job.id).lease is not None)
            super().release(key, token)

    job = engine.add("long", policy=Policy(overlap=Overlap.BUFFER_ONE))
    locker = Watching()
    engine.runner(locker).run(engine.claim())
    assert locker.leased_at_release == [True]  # released while the claim still held the job
    assert _next(engine, job) == 20 and locker.acquire(f"job:{job.id}", 10) is not None


class _SlowComplete:
    """The store, with ``complete`` as two writes and ``between`` run between them (as on MongoDB)."""

    def __init__(self, store: Store, between: Callable[[], None]) -> None:
        self._store, self._between = store, between

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def complete(self, execution: Execution, fire: Fire, *, next_run_at: Any, now: Any) -> tuple[bool, bool]:
        if not self._store.finish_execution(execution):
            return False, False
        self._between()
        return True, self._store.advance(fire, next_run_at=next_run_at, now=now) or True  # as a group commit says


@pytest.mark.parametrize(("overlap", "after"), [(Overlap.SKIP, 30), (Overlap.CANCEL_OTHER, 10)])
def test_a_duplicate_between_the_final_write_and_the_advance_advances_as_the_run_would(
    engine: Engine, overlap: Overlap, after: int
) -> None:
    job = engine.add("long", policy=Policy(overlap=overlap))
    fire = engine.claim()
    outcomes = []
    runner = engine.runner(store=_SlowComplete(engine.store, lambda: outcomes.append(engine.runner().run(fire))))
    runner.run(fire)
    assert [o.skipped for o in outcomes] == [SkipReason.DUPLICATE]  # the lock was free: it took the advance
    assert _next(engine, job) == after
    if overlap is Overlap.SKIP:
        assert engine.ledger(job) == [("overlap_skip", 10, 20, 2)]  # once, as the run itself records it
