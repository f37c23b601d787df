"""The Store port's contract (ticklock/ports.py), run unchanged on every adapter."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.factories import T0, make_execution, make_job, manual_fire
from ticklock.domain.jobs import AlertRules, Execution, ExecutionStatus, Fire, Job, Trigger
from ticklock.domain.schedules import CronSchedule
from ticklock.errors import DuplicateJobName, JobNotFound, StaleVersion
from ticklock.ports import Completion, Store

SLACK = timedelta(seconds=30)


def claim(
    store: Store, now: datetime = T0, limit: int = 100, horizon: timedelta = timedelta(0), owner: str = "a"
) -> list[Job]:
    return store.claim_due(now=now, horizon=now + horizon, limit=limit, owner=owner, slack=SLACK)


# -- definitions ------------------------------------------------------------------------------------
def test_add_then_get_round_trips_every_field(store: Store) -> None:
    job = make_job(
        schedule=CronSchedule("*/5 * * * * *", "Europe/London"), payload={"a": [1, "x"]}, timeout=2.5, max_retries=3
    )
    store.add_job(job)
    got = store.get_job(job.id)
    assert got == job
    assert got.next_run_at is not None and got.next_run_at.tzinfo is not None


def test_duplicate_name_is_rejected_and_nothing_is_written(store: Store) -> None:
    store.add_job(make_job("same"))
    with pytest.raises(DuplicateJobName):
        store.add_job(make_job("same"))
    assert len(store.list_jobs()) == 1


def test_concurrent_creates_of_one_name_leave_one_and_lose_none_of_the_others(store: Store) -> None:
    """Eight threads create 40 jobs each at once, every fourth one under a name all threads share (on
    SQLite the creates meet in group commits): each shared name is created once and refused to the
    other seven, and every job not refused is stored whole."""
    created: list[Job] = []
    refused: list[str] = []
    start = threading.Barrier(8)

    def add(side: int) -> None:
        start.wait()
        for i in range(40):
            job = make_job(f"shared-{i}" if i % 4 == 0 else f"own-{side}-{i}")
            try:
                created.append(store.add_job(job))
            except DuplicateJobName as exc:
                refused.append(exc.name)

    threads = [threading.Thread(target=add, args=(side,)) for side in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(refused) == sorted(f"shared-{i}" for i in range(0, 40, 4) for _ in range(7))
    assert len(created) == 8 * 30 + 10
    stored = {j.id: j for j in store.list_jobs(limit=1000)}
    assert stored == {j.id: j for j in created}


def test_add_jobs_inserts_every_job_of_the_batch(store: Store) -> None:
    jobs = [make_job(f"batch-{i:03}", schedule=CronSchedule(f"{i % 60} * * * * *")) for i in range(120)]
    store.add_jobs(jobs)
    for job in jobs:
        assert store.get_job(job.id) == job
    assert len(store.list_jobs(limit=500)) == 120


@pytest.mark.parametrize("taken_at", [0, 57, 119])
def test_add_jobs_with_a_taken_name_writes_nothing_and_names_it(store: Store, taken_at: int) -> None:
    existing = store.add_job(make_job(f"batch-{taken_at:03}"))
    jobs = [make_job(f"batch-{i:03}") for i in range(120)]
    with pytest.raises(DuplicateJobName) as raised:
        store.add_jobs(jobs)
    assert raised.value.name == f"batch-{taken_at:03}"
    assert [j.id for j in store.list_jobs(limit=500)] == [existing.id]


def test_add_jobs_with_a_name_twice_in_the_batch_writes_nothing(store: Store) -> None:
    jobs = [make_job("a"), make_job("b"), make_job("c"), make_job("b")]
    with pytest.raises(DuplicateJobName) as raised:
        store.add_jobs(jobs)
    assert raised.value.name == "b"
    assert store.list_jobs(limit=10) == []


def test_add_jobs_of_none_writes_nothing(store: Store) -> None:
    store.add_jobs([])
    assert store.list_jobs(limit=10) == []


def test_jobs_added_in_a_batch_are_claimed_when_due(store: Store) -> None:
    due = [make_job(f"due-{i}", next_run_at=T0) for i in range(5)]
    later = [make_job(f"later-{i}", next_run_at=T0 + timedelta(hours=1)) for i in range(5)]
    store.add_jobs([*due, *later])
    assert {j.id for j in claim(store)} == {j.id for j in due}


def test_concurrent_batches_racing_for_a_name_leave_one_whole_batch(open_store: Callable[[], Store]) -> None:
    """Two batches share their last name: one lands whole, the other not at all (on MongoDB, the loser
    may have inserted the rest before meeting the name, and must take it back)."""
    stores = [open_store(), open_store()]
    batches = [[make_job(f"{side}-{i:03}") for i in range(200)] + [make_job("shared")] for side in "ab"]
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def add(store: Store, batch: list[Job]) -> None:
        start.wait()
        try:
            store.add_jobs(batch)
            outcomes.append("added")
        except DuplicateJobName as exc:
            outcomes.append(exc.name)

    threads = [threading.Thread(target=add, args=(s, b)) for s, b in zip(stores, batches, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["added", "shared"]
    ids = {j.id for j in stores[0].list_jobs(limit=1000)}
    assert any(ids == {j.id for j in batch} for batch in batches), f"{len(ids)} jobs: not one whole batch"


def test_unknown_id_raises_not_found(store: Store) -> None:
    with pytest.raises(JobNotFound):
        store.get_job("missing")
    with pytest.raises(JobNotFound):
        store.delete_job("missing")
    assert store.find_job_by_name("missing") is None


def test_list_filters_and_pages_by_id(store: Store) -> None:
    jobs = [make_job(handler="noop" if i % 2 else "http.check", enabled=i % 3 != 0) for i in range(7)]
    for job in jobs:
        store.add_job(job)
    ids = sorted(j.id for j in jobs)
    first = store.list_jobs(limit=3)
    assert [j.id for j in first] == ids[:3]
    assert [j.id for j in store.list_jobs(limit=10, after=first[-1].id)] == ids[3:]
    assert {j.id for j in store.list_jobs(handler="noop")} == {j.id for j in jobs if j.handler == "noop"}
    assert {j.id for j in store.list_jobs(enabled=False)} == {j.id for j in jobs if not j.enabled}


def test_update_bumps_version_and_guards_against_stale_writes(store: Store) -> None:
    job = store.add_job(make_job("before"))
    updated = store.update_job(job.with_changes(name="after"), expected_version=job.version)
    assert updated.version == job.version + 1
    assert store.get_job(job.id).name == "after"
    with pytest.raises(StaleVersion):
        store.update_job(job.with_changes(name="stale"), expected_version=job.version)
    assert store.get_job(job.id).name == "after"


def test_disabled_reason_is_kept_and_cleared(store: Store) -> None:
    job = store.add_job(make_job("stopped"))
    assert store.get_job(job.id).disabled_reason is None
    reason = "its schedule found no next fire after 2026-10-25T00:55:00+00:00: no valid fire time"
    stopped = store.update_job(job.with_changes(enabled=False, disabled_reason=reason), expected_version=job.version)
    assert store.get_job(job.id).disabled_reason == reason
    assert [j.disabled_reason for j in store.list_jobs(enabled=False)] == [reason]
    store.update_job(stopped.with_changes(enabled=True, disabled_reason=None), expected_version=stopped.version)
    assert store.get_job(job.id).disabled_reason is None


def test_update_onto_a_taken_name_is_rejected(store: Store) -> None:
    store.add_job(make_job("taken"))
    job = store.add_job(make_job("mine"))
    with pytest.raises(DuplicateJobName):
        store.update_job(job.with_changes(name="taken"), expected_version=job.version)
    assert store.get_job(job.id).name == "mine"


def test_update_keeps_a_running_claim(store: Store) -> None:
    job = store.add_job(make_job())
    [claimed] = claim(store)
    store.update_job(claimed.with_changes(payload={"new": True}, lease=None), expected_version=claimed.version)
    assert store.get_job(job.id).lease == claimed.lease
    assert claim(store, now=T0 + timedelta(seconds=1)) == []


def test_delete_removes_job_and_history(store: Store) -> None:
    job = store.add_job(make_job())
    [claimed] = claim(store)
    execution = make_execution(Fire.of(claimed))
    store.start_execution(execution)
    store.delete_job(job.id)
    with pytest.raises(JobNotFound):
        store.get_job(job.id)
    with pytest.raises(JobNotFound):
        store.get_execution(execution.id)


# -- claims ----------------------------------------------------------------------------------------
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
    assert job.lease.until == T0 + timedelta(seconds=10) + SLACK
    # invariant 2: no storm while it runs
    for second in range(1, 40):
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
    assert got[0].lease.until == T0 + timedelta(seconds=1 + 10) + SLACK  # horizon + timeout + slack


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


# -- executions ------------------------------------------------------------------------------------
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


def test_executions_list_newest_first_with_paging(store: Store) -> None:
    job = store.add_job(make_job())
    ids = []
    for i in range(5):
        fire = Fire(job, T0 + timedelta(seconds=i), Trigger.SCHEDULE, "t")
        ids.append(store.start_execution(make_execution(fire)).execution.id)
    page = store.list_executions(job.id, limit=2)
    assert [e.id for e in page] == [ids[4], ids[3]]
    assert [e.id for e in store.list_executions(job.id, limit=10, before=page[-1].id)] == [ids[2], ids[1], ids[0]]
    assert store.list_executions("other-job") == []


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


def test_prune_keeps_running_rows_and_the_newest_per_job(store: Store) -> None:
    job = store.add_job(make_job())
    rows = []
    for i in range(6):
        fire = Fire(job, T0 + timedelta(seconds=i), Trigger.SCHEDULE, "t")
        execution = store.start_execution(make_execution(fire)).execution
        if i != 0:  # the oldest stays running
            execution = execution.with_changes(status=ExecutionStatus.SUCCESS, finished_at=fire.scheduled_at)
            store.finish_execution(execution)
        rows.append(execution)
    assert store.prune_executions(older_than=T0 - timedelta(days=1), keep_per_job=3) == 2
    left = {e.id for e in store.list_executions(job.id)}
    assert left == {rows[0].id, rows[3].id, rows[4].id, rows[5].id}
    assert store.prune_executions(older_than=T0 + timedelta(seconds=4, milliseconds=1), keep_per_job=100) == 2
    assert {e.id for e in store.list_executions(job.id)} == {rows[0].id, rows[5].id}


def test_prune_beyond_keep_per_job_takes_long_histories_whole_and_leaves_short_ones(store: Store) -> None:
    """700 finished runs of one job (more than one delete's chunk on SQLite) and 20 of another: keeping
    100 a job deletes the first's 600 oldest, and nothing of the second."""
    long, short = store.add_job(make_job("long")), store.add_job(make_job("short"))
    kept: list[str] = []
    for job, count in ((long, 700), (short, 20)):
        for i in range(count):
            fire = Fire(job, T0 + timedelta(seconds=i), Trigger.SCHEDULE, "t")
            execution = store.start_execution(make_execution(fire)).execution
            done = execution.with_changes(status=ExecutionStatus.SUCCESS, finished_at=fire.scheduled_at)
            store.finish_execution(done)
            if job is short or i >= 600:
                kept.append(execution.id)
    assert store.prune_executions(older_than=T0 - timedelta(days=1), keep_per_job=100) == 600
    left = {e.id for job in (long, short) for e in store.list_executions(job.id, limit=1000)}
    assert left == set(kept)


def test_open_executions_are_the_detached_unfinished_past_their_deadline_earliest_first(store: Store) -> None:
    job = store.add_job(make_job(timeout=10))
    rows = []
    for i, status in enumerate(
        [ExecutionStatus.RUNNING, ExecutionStatus.INTERRUPTED, ExecutionStatus.SUCCESS, ExecutionStatus.RUNNING]
    ):
        fire = Fire(job, T0 + timedelta(seconds=i), Trigger.SCHEDULE, "t")
        execution = make_execution(fire).with_changes(jitter=0.25 * i, detached=True)
        execution = store.start_execution(execution).execution
        if status is not ExecutionStatus.RUNNING:
            execution = execution.with_changes(status=status, finished_at=fire.scheduled_at)
            store.finish_execution(execution)
        rows.append(execution)
    assert store.get_execution(rows[3].id).jitter == 0.75  # the jitter round-trips too
    found = store.open_executions(deadline_before=T0 + timedelta(seconds=12.5), limit=10)
    assert [e.id for e in found] == [rows[0].id, rows[1].id]  # deadlines +10, +11; +13 not yet; +12 finished
    assert [e.id for e in store.open_executions(deadline_before=T0 + timedelta(hours=1), limit=1)] == [rows[0].id]
    assert store.open_executions(deadline_before=T0, limit=10) == []
    fire = Fire(job, T0 + timedelta(seconds=9), Trigger.SCHEDULE, "t")
    store.start_execution(make_execution(fire))  # not detached: its claim resumes it, it is not listed
    assert len(store.open_executions(deadline_before=T0 + timedelta(hours=1), limit=10)) == 3


def test_open_alerts_change_by_compare_and_set_once_among_many(store: Store, open_store: Callable[[], Store]) -> None:
    job = store.add_job(make_job().with_changes(alerts=AlertRules(late_after=5)))
    raised = {"late": {"raised_at": T0.isoformat(), "detail": "late"}}
    others = [open_store() for _ in range(4)]
    start = threading.Barrier(len(others))
    won: list[bool] = []

    def race(other: Store) -> None:
        start.wait()
        won.append(other.set_open_alerts(job.id, expected={}, new=raised))

    threads = [threading.Thread(target=race, args=(o,)) for o in others]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(won) == [False, False, False, True]  # one of four writers wins the state
    got = store.get_job(job.id)
    assert got.open_alerts == raised and got.version == job.version  # the version is left alone
    assert not store.set_open_alerts(job.id, expected={}, new={})  # no longer what it was
    assert store.set_open_alerts(job.id, expected=raised, new={})
    assert store.set_open_alerts(job.id, expected={}, new=raised)  # raised again after a clear
    edited = store.update_job(got.with_changes(timeout=3.0, open_alerts={}), expected_version=got.version)
    assert edited.open_alerts == raised and store.get_job(job.id).open_alerts == raised  # an edit keeps them
    assert not store.set_open_alerts("no-such-job", expected={}, new=raised)


def test_list_jobs_alerting_gives_the_jobs_with_rules_or_alerts_raised(store: Store) -> None:
    plain = store.add_job(make_job())
    ruled = store.add_job(make_job().with_changes(alerts=AlertRules(no_success_for=60, email="a@b.example")))
    raised = store.add_job(make_job())
    assert store.set_open_alerts(raised.id, expected={}, new={"late": {"raised_at": "x", "detail": "y"}})
    found = {j.id for j in store.list_jobs(alerting=True, limit=10)}
    assert found == {ruled.id, raised.id} and plain.id not in found
    assert store.get_job(ruled.id).alerts == AlertRules(no_success_for=60, email="a@b.example")


def test_ping_answers(store: Store) -> None:
    store.ping()


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
