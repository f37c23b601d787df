"""The per-job policies through the engine, on every store, with a fake clock: the five overlap policies
(what happens to the slots that come due while a run goes on), the catch-up window with a buffer, and
jitter (each fire's fixed offset, claimed, held and recorded). Each test fails with the policy ignored
(the job behaving as ``skip`` with no jitter)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.support.engine import EVERY_10, Engine, T
from tests.support.factories import make_execution
from ticklock.domain.handlers import HandlerContext
from ticklock.domain.jobs import BUFFER_ALL_CAP, ExecutionStatus, Fire, Job, Overlap, Policy
from ticklock.domain.lifecycle import SkipReason
from ticklock.ports import Store


@pytest.fixture
def engine(store: Store) -> Iterator[Engine]:
    box = Engine(store)
    yield box
    box.invoker.close()


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


def test_allow_all_fires_whose_runner_vanished_are_lost_by_housekeeping(engine: Engine) -> None:
    together = engine.add(policy=Policy(overlap=Overlap.ALLOW_ALL))
    alone = engine.add()
    claimed = engine.store.claim_due(now=T, horizon=T, limit=10, owner="test", slack=timedelta(seconds=60))
    fires = {job.id: Fire.of(job) for job in claimed}
    # each fire's row is written, then its runner dies
    rows = [engine.store.start_execution(make_execution(fires[job.id])).execution for job in (together, alone)]
    runner = engine.runner()
    assert runner.lose_orphans() == 0  # still within its deadline
    engine.clock.advance(60 + 6)  # past the deadline and the lock margin
    assert runner.lose_orphans() == 1
    lost = engine.store.get_execution(rows[0].id)
    assert lost.status is ExecutionStatus.LOST and "allow_all" in (lost.error or "")
    assert engine.store.get_execution(rows[1].id).status is ExecutionStatus.RUNNING  # its claim resumes it
    assert ("ran", "lost", 1) in engine.metrics.accounted


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
    from ticklock.domain.dispatcher import Dispatcher

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
    assert EVERY_10.next_after(T) == T + timedelta(seconds=10)
