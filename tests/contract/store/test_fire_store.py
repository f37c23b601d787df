"""The ``FireStore`` role's contract (ticklock/ports.py): a fire's writes from its claim to its advance
(claims and leases, release and advance, the execution's start, take-over and finish, ``complete`` and
the runner's batches), run unchanged on every adapter. The job's run summary those writes keep is in
test_fire_store_summary.py."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contract.store.helpers import SLACK, claim
from tests.support.factories import T0, make_execution, make_job, manual_fire
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fires import Fire, Lease, Trigger
from ticklock.errors import StaleVersion
from ticklock.ports import Completion, Store


# -- claims ----------------------------------------------------------------------------------------
def test_extending_claims_keeps_the_jobs_claimed_and_leaves_other_claims_alone(store: Store) -> None:
    mine, other, done = (store.add_job(make_job(timeout=600)) for _ in range(3))
    claimed = {j.id: j for j in claim(store, owner="me")}
    assert set(claimed) == {mine.id, other.id, done.id}
    lease = {job_id: job.lease for job_id, job in claimed.items()}
    assert all(lease.values())
    assert store.advance(Fire.of(claimed[done.id]), next_run_at=T0 + timedelta(hours=1), now=T0)
    later = T0 + SLACK + timedelta(seconds=20)
    held = [(mine.id, lease[mine.id].token), (done.id, lease[done.id].token), ("no-such-job", "x")]  # type: ignore[union-attr]
    assert store.extend_claims(held, until=later) == 1  # the advanced claim is gone, and the unknown job
    assert store.extend_claims([(other.id, "not-its-token")], until=later) == 0
    # past the claim's own end: the extended job is still claimed, the other one is due again
    again = claim(store, now=T0 + SLACK, owner="you")
    assert [j.id for j in again] == [other.id]
    assert store.get_job(mine.id).lease == Lease(claimed[mine.id].lease.token, "me", later)  # type: ignore[union-attr]
    assert [j.id for j in claim(store, now=later, owner="you")] == [mine.id]
    assert store.extend_claims([], until=later) == 0


def test_live_claims_name_each_claim_that_lasts_past_now(store: Store) -> None:
    a, b = store.add_job(make_job()), store.add_job(make_job(next_run_at=T0 + timedelta(seconds=5)))
    store.add_job(make_job(next_run_at=T0 + timedelta(hours=1)))  # never claimed
    [first] = claim(store, owner="host-a:1")
    [second] = claim(store, now=T0 + timedelta(seconds=5), owner="host-b:2")
    assert first.id == a.id and second.id == b.id
    live = dict(store.live_claims(now=T0 + timedelta(seconds=1)))
    assert live == {a.id: first.lease, b.id: second.lease}
    assert dict(store.live_claims(now=T0 + SLACK)) == {b.id: second.lease}  # a's ended at T0 + slack
    store.release(b.id, second.lease.token)  # type: ignore[union-attr]
    assert store.live_claims(now=T0 + timedelta(seconds=1)) == [(a.id, first.lease)]


def test_claim_takes_due_jobs_oldest_first_up_to_the_limit(store: Store) -> None:
    jobs = [make_job(next_run_at=T0 - timedelta(seconds=s)) for s in (5, 1, 9, 3)]
    for job in jobs:
        store.add_job(job)
    store.add_job(make_job(next_run_at=T0 + timedelta(seconds=5)))  # not due
    got = claim(store, limit=3)
    assert [j.next_run_at for j in got] == [T0 - timedelta(seconds=s) for s in (9, 5, 3)]
    assert [j.next_run_at for j in claim(store, limit=3)] == [T0 - timedelta(seconds=1)]
    assert claim(store) == []


def test_a_claim_takes_as_many_as_its_limit_past_a_servers_default_batch(store: Store) -> None:
    """A batch size over 101 (MongoDB's and FerretDB's first batch) is honoured: the claim's single-batch
    find asks for the whole limit in its one batch."""
    store.add_jobs([make_job(next_run_at=T0 - timedelta(milliseconds=i)) for i in range(250)])
    got = claim(store, limit=240)
    assert len(got) == 240
    assert [j.next_run_at for j in got] == [T0 - timedelta(milliseconds=i) for i in range(249, 9, -1)]
    assert len(claim(store, limit=240)) == 10


def test_claim_sets_a_lease_and_the_job_is_not_due_while_it_holds(store: Store) -> None:
    store.add_job(make_job(timeout=10))
    [job] = claim(store, owner="me")
    assert job.lease is not None and job.lease.owner == "me"
    assert job.lease.until == T0 + SLACK  # the slack alone: a heartbeat keeps it while the fire runs
    # invariant 2: no storm while it runs
    for second in range(1, 30):
        assert claim(store, now=T0 + timedelta(seconds=second)) == []
    # a lease that ends makes the fire due again (a crashed claimer does not lose it)
    [again] = claim(store, now=job.lease.until)
    assert Fire.of(again).scheduled_at == T0
    assert again.lease is not None and again.lease.token != job.lease.token


def test_claim_with_horizon_takes_jobs_due_soon(store: Store) -> None:
    store.add_job(make_job(next_run_at=T0 + timedelta(milliseconds=700)))
    store.add_job(make_job(next_run_at=T0 + timedelta(milliseconds=1500)))
    got = claim(store, horizon=timedelta(seconds=1))
    assert len(got) == 1
    assert got[0].lease is not None
    assert got[0].lease.until == T0 + timedelta(seconds=1) + SLACK  # horizon + slack (a heartbeat keeps it)


def test_paused_jobs_are_not_claimed_but_a_trigger_is(store: Store) -> None:
    job = store.add_job(make_job(enabled=False))
    assert claim(store) == []
    store.update_job(job.with_changes(trigger_at=T0), expected_version=job.version)
    [got] = claim(store)
    fire = Fire.of(got)
    assert fire.trigger is Trigger.MANUAL and fire.scheduled_at == T0


def test_one_fire_is_claimed_once_under_concurrent_claimers(store: Store, open_store: Callable[[], Store]) -> None:
    jobs = [make_job(next_run_at=T0 - timedelta(milliseconds=i)) for i in range(300)]
    for job in jobs:
        store.add_job(job)
    claimers = [open_store() for _ in range(4)]
    seen: list[str] = []
    mutex = threading.Lock()
    start = threading.Barrier(len(claimers))

    def work(s: Store, owner: str) -> None:
        start.wait()
        while True:
            got = s.claim_due(now=T0, horizon=T0, limit=7, owner=owner, slack=SLACK)
            if not got:
                return
            with mutex:
                seen.extend(j.id for j in got)

    threads = [threading.Thread(target=work, args=(s, f"o{i}")) for i, s in enumerate(claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    counts = Counter(seen)
    assert len(counts) == 300
    assert max(counts.values()) == 1


# -- release and advance ---------------------------------------------------------------------------
def test_release_makes_the_same_fire_due_again(store: Store) -> None:
    store.add_job(make_job())
    [job] = claim(store)
    assert job.lease is not None
    store.release(job.id, "not-the-token")
    assert claim(store, now=T0 + timedelta(seconds=1)) == []
    store.release(job.id, job.lease.token)
    [again] = claim(store, now=T0 + timedelta(seconds=1))
    assert Fire.of(again).scheduled_at == T0


def test_advance_moves_the_schedule_and_drops_the_lease(store: Store) -> None:
    store.add_job(make_job())
    [job] = claim(store)
    fire = Fire.of(job)
    assert store.advance(fire, next_run_at=T0 + timedelta(seconds=60), now=T0)
    stored = store.get_job(job.id)
    assert stored.next_run_at == T0 + timedelta(seconds=60) and stored.lease is None and stored.enabled
    assert claim(store, now=T0 + timedelta(seconds=59)) == []
    assert len(claim(store, now=T0 + timedelta(seconds=60))) == 1


def test_advance_with_no_next_time_disables_a_one_shot(store: Store) -> None:
    store.add_job(make_job())
    [job] = claim(store)
    assert store.advance(Fire.of(job), next_run_at=None, now=T0)
    stored = store.get_job(job.id)
    assert not stored.enabled and stored.next_run_at is None
    assert claim(store, now=T0 + timedelta(days=1)) == []


def test_advance_with_a_lost_lease_changes_nothing(store: Store) -> None:
    store.add_job(make_job())
    [job] = claim(store)
    assert job.lease is not None
    [taken] = claim(store, now=job.lease.until)
    assert not store.advance(Fire.of(job), next_run_at=T0 + timedelta(hours=1), now=T0)
    assert store.get_job(job.id).lease == taken.lease
    assert store.get_job(job.id).next_run_at == T0


def test_advance_keeps_an_edit_made_during_the_run(store: Store) -> None:
    store.add_job(make_job())
    [job] = claim(store)
    edited_time = T0 + timedelta(hours=5)
    store.update_job(job.with_changes(next_run_at=edited_time, lease=None), expected_version=job.version)
    assert store.advance(Fire.of(job), next_run_at=T0 + timedelta(seconds=60), now=T0)
    stored = store.get_job(job.id)
    assert stored.next_run_at == edited_time and stored.lease is None


def test_advance_moves_the_version_so_a_stale_edit_conflicts(store: Store) -> None:
    job = store.add_job(make_job())
    [claimed] = claim(store)
    store.advance(Fire.of(claimed), next_run_at=T0 + timedelta(seconds=60), now=T0)
    with pytest.raises(StaleVersion):
        store.update_job(job.with_changes(payload={"x": 1}), expected_version=job.version)


def test_manual_fire_clears_its_trigger_and_keeps_the_schedule(store: Store) -> None:
    job = store.add_job(make_job(next_run_at=T0 + timedelta(hours=1)))
    store.update_job(job.with_changes(trigger_at=T0), expected_version=job.version)
    [claimed] = claim(store)
    fire = Fire.of(claimed)
    assert fire.trigger is Trigger.MANUAL
    assert store.advance(fire, next_run_at=None, now=T0)
    stored = store.get_job(job.id)
    assert stored.trigger_at is None and stored.next_run_at == T0 + timedelta(hours=1) and stored.enabled


def test_a_trigger_arriving_during_a_manual_run_is_kept(store: Store) -> None:
    job = store.add_job(make_job(next_run_at=T0 + timedelta(hours=1)))
    job = store.update_job(job.with_changes(trigger_at=T0), expected_version=job.version)
    [claimed] = claim(store)
    later = T0 + timedelta(seconds=2)
    current = store.get_job(job.id)
    store.update_job(current.with_changes(trigger_at=later, lease=None), expected_version=current.version)
    store.advance(manual_fire(claimed, T0), next_run_at=None, now=T0)
    assert store.get_job(job.id).trigger_at == later


# -- the execution's row: start, take over, finish ------------------------------------------------
def test_execution_is_unique_per_fire(store: Store) -> None:
    store.add_job(make_job())
    [job] = claim(store)
    fire = Fire.of(job)
    first = store.start_execution(make_execution(fire))
    second = store.start_execution(make_execution(fire, owner="other"))
    assert first.created and not second.created
    assert second.execution == first.execution
    assert store.get_execution(first.execution.id) == first.execution


def test_finish_is_guarded_by_the_run_token(store: Store) -> None:
    store.add_job(make_job())
    [job] = claim(store)
    execution = store.start_execution(make_execution(Fire.of(job))).execution
    impostor = execution.with_changes(run_token="other", status=ExecutionStatus.SUCCESS, finished_at=T0)
    assert not store.finish_execution(impostor)
    done = execution.with_changes(status=ExecutionStatus.FAILED, attempts=3, error="boom", finished_at=T0, duration=1.5)
    assert store.finish_execution(done)
    assert store.get_execution(execution.id) == done
    assert not store.finish_execution(done.with_changes(status=ExecutionStatus.SUCCESS))


def test_take_over_is_guarded_by_the_previous_token(store: Store) -> None:
    store.add_job(make_job())
    [job] = claim(store)
    execution = store.start_execution(make_execution(Fire.of(job))).execution
    resumed = execution.with_changes(run_token="new", owner="b", resumes=1, started_at=T0 + timedelta(seconds=30))
    assert not store.take_over_execution(resumed, previous_token="wrong")
    assert store.take_over_execution(resumed, previous_token=execution.run_token)
    assert store.get_execution(execution.id) == resumed
    assert not store.take_over_execution(resumed.with_changes(run_token="x"), previous_token=execution.run_token)


# fires of one job drawn with repeats: a few slots a second apart, each under any trigger (a manual or
# backfill fire on a scheduled instant is another fire), in any order, some given twice
DRAWN_FIRES = st.lists(
    st.tuples(st.integers(0, 4), st.sampled_from([Trigger.SCHEDULE, Trigger.MANUAL, Trigger.BACKFILL])),
    min_size=1,
    max_size=20,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=DRAWN_FIRES, page=st.integers(1, 5), together=st.booleans())
def test_each_fire_is_recorded_once_and_a_jobs_history_pages_newest_first(
    store: Store, drawn: list[tuple[int, Trigger]], page: int, together: bool
) -> None:
    """Against an oracle kept apart from any store: the first execution given for a fire (its job, slot
    and trigger) is the one recorded, every later one gets it back; ``execution_for`` finds it; and
    ``list_executions`` paged ``page`` at a time gives each recorded one once, newest slot first, ties
    (one slot, several triggers) by id, highest first."""
    job = store.add_job(make_job(f"history-{uuid.uuid4().hex[:8]}"))  # the examples share the store
    given_ = [make_execution(Fire(job, T0 + timedelta(seconds=s), trigger, "t")) for s, trigger in drawn]
    started = store.start_executions(given_) if together else [store.start_execution(e) for e in given_]
    first: dict[tuple[Trigger, datetime], Execution] = {}
    for execution in given_:
        first.setdefault((execution.trigger, execution.scheduled_at), execution)
    recorded = [first[(e.trigger, e.scheduled_at)] for e in given_]
    assert [s.created for s in started] == [r is e for r, e in zip(recorded, given_, strict=True)]
    assert [s.execution for s in started] == recorded
    for (trigger, at), execution in first.items():
        assert store.execution_for(job.id, trigger, at) == execution
    expected = sorted(first.values(), key=lambda e: (e.scheduled_at, e.id), reverse=True)
    paged: list[Execution] = []
    while len(paged) <= len(expected):
        chunk = store.list_executions(job.id, limit=page, before=paged[-1].id if paged else None)
        if not chunk:
            break
        paged.extend(chunk)
    assert [e.id for e in paged] == [e.id for e in expected]


# -- complete: the finish and the advance together -------------------------------------------------
def test_complete_finishes_and_advances_together(store: Store) -> None:
    store.add_job(make_job())
    [job] = claim(store)
    fire = Fire.of(job)
    execution = store.start_execution(make_execution(fire)).execution
    done = execution.with_changes(status=ExecutionStatus.SUCCESS, attempts=1, finished_at=T0, duration=0.1)
    assert store.complete(done, fire, next_run_at=T0 + timedelta(seconds=60), now=T0) == (True, True)
    assert store.get_execution(execution.id).status is ExecutionStatus.SUCCESS
    assert store.get_job(job.id).next_run_at == T0 + timedelta(seconds=60)


def test_complete_does_not_advance_when_the_finish_was_taken_over(store: Store) -> None:
    store.add_job(make_job())
    [job] = claim(store)
    fire = Fire.of(job)
    execution = store.start_execution(make_execution(fire)).execution
    store.take_over_execution(execution.with_changes(run_token="theirs", resumes=1), previous_token=execution.run_token)
    done = execution.with_changes(status=ExecutionStatus.SUCCESS, finished_at=T0)
    assert store.complete(done, fire, next_run_at=T0 + timedelta(seconds=60), now=T0) == (False, False)
    stored = store.get_job(job.id)
    assert stored.next_run_at == T0
    assert stored.lease == job.lease


def test_concurrent_completes_each_advance_their_own_job(store: Store) -> None:
    for _ in range(40):
        store.add_job(make_job())
    claimed = claim(store)
    edited = claimed[0]
    store.update_job(
        edited.with_changes(next_run_at=T0 + timedelta(hours=5), lease=None), expected_version=edited.version
    )
    fires = [Fire.of(j) for j in claimed]
    executions = [store.start_execution(make_execution(f)).execution for f in fires]
    results: list[tuple[bool, bool]] = []
    mutex = threading.Lock()
    start = threading.Barrier(8)

    def work(part: list[int]) -> None:
        start.wait()
        for i in part:
            done = executions[i].with_changes(status=ExecutionStatus.SUCCESS, finished_at=T0, duration=0.1)
            outcome = store.complete(done, fires[i], next_run_at=T0 + timedelta(seconds=60), now=T0)
            with mutex:
                results.append(outcome)

    threads = [threading.Thread(target=work, args=(list(range(k, 40, 8)),)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [(True, True)] * 40
    for job in claimed:
        stored = store.get_job(job.id)
        assert stored.lease is None
        assert stored.next_run_at == (T0 + timedelta(hours=5) if job.id == edited.id else T0 + timedelta(seconds=60))


# -- the runner's batches: each item as if alone, in order ------------------------------------------
def test_start_executions_records_each_fire_once_in_order(store: Store) -> None:
    for _ in range(5):
        store.add_job(make_job())
    fires = [Fire.of(j) for j in claim(store)]
    earlier = store.start_execution(make_execution(fires[1])).execution  # a fire already recorded
    fresh = [make_execution(f) for f in fires]
    twice = make_execution(fires[3])  # the same fire given twice in one batch
    started = store.start_executions([*fresh, twice])
    assert [s.created for s in started] == [True, False, True, True, True, False]
    assert started[1].execution == earlier  # the stored row, unchanged
    assert started[5].execution == fresh[3]  # the first of the two
    for execution in (fresh[0], fresh[2], fresh[3], fresh[4]):
        assert store.get_execution(execution.id) == execution
    assert store.execution_for(fires[1].job.id, fires[1].trigger, fires[1].scheduled_at) == earlier
    assert store.start_executions([]) == []


def test_complete_many_completes_each_as_complete_would(store: Store) -> None:
    for _ in range(5):
        store.add_job(make_job())
    claimed = claim(store)
    assert claimed[4].lease is not None
    fires = [*(Fire.of(j) for j in claimed[:4]), manual_fire(claimed[4], T0)]  # a manual fire: the slow path
    executions = [store.start_execution(make_execution(f)).execution for f in fires]
    # 1: its finish was taken over by another runner; 2: its claim was given back since
    store.take_over_execution(executions[1].with_changes(run_token="theirs", resumes=1),
                              previous_token=executions[1].run_token)  # fmt: skip
    assert claimed[2].lease is not None
    store.release(claimed[2].id, claimed[2].lease.token)
    statuses = [ExecutionStatus.SUCCESS, ExecutionStatus.SUCCESS, ExecutionStatus.FAILED, ExecutionStatus.TIMEOUT,
                ExecutionStatus.SUCCESS]  # fmt: skip
    done = [
        e.with_changes(status=s, attempts=1, finished_at=T0, duration=0.1)
        for e, s in zip(executions, statuses, strict=True)
    ]
    later = T0 + timedelta(seconds=60)
    completions = [Completion(d, f, later) for d, f in zip(done, fires, strict=True)]
    assert store.complete_many(completions, now=T0) == [
        (True, True), (False, False), (True, False), (True, True), (True, True)
    ]  # fmt: skip
    assert [store.get_execution(e.id).status for e in executions] == [
        ExecutionStatus.SUCCESS, ExecutionStatus.RUNNING, ExecutionStatus.FAILED, ExecutionStatus.TIMEOUT,
        ExecutionStatus.SUCCESS
    ]  # fmt: skip
    after = [store.get_job(j.id) for j in claimed]
    # (a manual fire does not move the schedule: its advance keeps the job's next fire)
    assert [j.next_run_at for j in after] == [later, T0, T0, later, claimed[4].next_run_at]
    assert after[2].lease is None
    assert after[1].lease == claimed[1].lease  # not advanced: its finish did not apply
    summaries = [(r.status.value, r.runs) if (r := j.last_run) else None for j in after]
    assert summaries == [("success", 1), None, ("failed", 1), ("timeout", 1), ("success", 1)]  # each once
    # once more: every finish is guarded, nothing applies twice
    assert store.complete_many(completions, now=T0) == [(False, False)] * 5
    again = [store.get_job(j.id).last_run for j in claimed]
    assert [r.runs if r else 0 for r in again] == [1, 0, 1, 1, 1]
    assert store.complete_many([], now=T0) == []
