"""The ``FireStore`` role's contract for the runs' summary on each job (``Job.last_run``), which finishing
and completing runs keep: each run counted once, whatever became of its claim. Run unchanged on every
adapter."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tests.contract.store.helpers import run
from tests.support.factories import T0, make_execution, make_job, manual_fire
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.fires import Fire, Trigger
from ticklock.ports import Store


def test_finishing_runs_keeps_the_jobs_summary(store: Store) -> None:
    job = store.add_job(make_job())
    assert store.get_job(job.id).last_run is None
    run(store, job, ExecutionStatus.SUCCESS, T0)
    run(store, job, ExecutionStatus.FAILED, T0 + timedelta(minutes=1))
    run(store, job, ExecutionStatus.SUCCESS, T0 + timedelta(minutes=2))
    run(store, job, ExecutionStatus.TIMEOUT, T0 + timedelta(minutes=3))
    summary = store.get_job(job.id).last_run
    assert summary is not None
    assert (summary.status, summary.at, summary.runs, summary.ok) == (
        ExecutionStatus.TIMEOUT,
        T0 + timedelta(minutes=3, seconds=1),
        4,
        2,
    )
    assert summary.failing and summary.success_rate == 0.5


def test_a_run_that_ended_before_the_last_counts_but_is_not_the_last(store: Store) -> None:
    job = store.add_job(make_job())
    run(store, job, ExecutionStatus.SUCCESS, T0 + timedelta(minutes=5))
    run(store, job, ExecutionStatus.FAILED, T0)  # overlapping runs (allow_all) may end out of order
    summary = store.get_job(job.id).last_run
    assert summary is not None
    assert (summary.status, summary.runs, summary.ok) == (ExecutionStatus.SUCCESS, 2, 1)


def test_a_run_not_finished_is_not_counted_and_an_edit_keeps_the_summary(store: Store) -> None:
    job = store.add_job(make_job())
    execution = make_execution(manual_fire(job, T0))
    store.start_execution(execution)
    store.finish_execution(execution.with_changes(status=ExecutionStatus.INTERRUPTED))
    assert store.get_job(job.id).last_run is None
    run(store, job, ExecutionStatus.FAILED, T0 + timedelta(minutes=1))
    current = store.get_job(job.id)
    edited = store.update_job(current.with_changes(name="renamed", last_run=None), expected_version=current.version)
    assert edited.last_run == current.last_run
    assert store.get_job(job.id).last_run == current.last_run


def test_complete_keeps_the_summary_too(store: Store) -> None:
    job = store.add_job(make_job())
    [claimed] = store.claim_due(now=T0, horizon=T0, limit=10, owner="a", slack=timedelta(seconds=30))
    fire = Fire(claimed, T0, Trigger.SCHEDULE, claimed.lease.token if claimed.lease else "")
    execution = make_execution(fire)
    store.start_execution(execution)
    done = execution.with_changes(status=ExecutionStatus.SUCCESS, finished_at=T0 + timedelta(seconds=2), attempts=1)
    assert store.complete(done, fire, next_run_at=T0 + timedelta(minutes=1), now=T0) == (True, True)
    summary = store.get_job(job.id).last_run
    assert summary is not None and (summary.status, summary.runs, summary.ok) == (ExecutionStatus.SUCCESS, 1, 1)


def test_complete_counts_the_run_once_when_a_second_delivery_advanced_the_job_first(store: Store) -> None:
    """A second delivery of the fire met its final row and advanced the job (as the run advances it) before
    the run's own advance: the run is counted once, and the job moved on once."""
    job = store.add_job(make_job())
    [claimed] = store.claim_due(now=T0, horizon=T0, limit=10, owner="a", slack=timedelta(seconds=30))
    fire = Fire(claimed, T0, Trigger.SCHEDULE, claimed.lease.token if claimed.lease else "")
    execution = make_execution(fire)
    store.start_execution(execution)
    following = T0 + timedelta(minutes=1)
    assert store.advance(fire, next_run_at=following, now=T0)  # the second delivery's
    done = execution.with_changes(status=ExecutionStatus.SUCCESS, finished_at=T0 + timedelta(seconds=2), attempts=1)
    assert store.complete(done, fire, next_run_at=following, now=T0) == (True, False)
    after = store.get_job(job.id)
    assert after.version == claimed.version + 1 and after.next_run_at == following
    assert after.last_run is not None
    assert (after.last_run.status, after.last_run.runs, after.last_run.ok) == (ExecutionStatus.SUCCESS, 1, 1)


def test_complete_counts_each_run_of_many_completed_at_once(open_store: Callable[[], Store]) -> None:
    """Runs of many jobs completed together (on MongoDB, one bulk write of advances): each job moved on
    and counted its run once, whether its claim still held or not."""
    store = open_store()
    jobs = [store.add_job(make_job(f"many-{i}")) for i in range(12)]
    claimed = store.claim_due(now=T0, horizon=T0, limit=100, owner="a", slack=timedelta(seconds=30))
    fires = [Fire(c, T0, Trigger.SCHEDULE, c.lease.token if c.lease else "") for c in claimed]
    lost = {f.job.id for f in fires[::4]}
    runs = []
    for fire in fires:
        execution = make_execution(fire)
        store.start_execution(execution)
        if fire.job.id in lost:
            store.release(fire.job.id, fire.lease_token)
        runs.append(
            execution.with_changes(status=ExecutionStatus.SUCCESS, finished_at=T0 + timedelta(seconds=1), attempts=1)
        )
    outcomes: dict[str, tuple[bool, bool]] = {}

    def complete(fire: Fire, done: Any) -> None:
        outcomes[fire.job.id] = store.complete(done, fire, next_run_at=T0 + timedelta(minutes=1), now=T0)

    threads = [threading.Thread(target=complete, args=pair) for pair in zip(fires, runs, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert {job_id: o for job_id, o in outcomes.items()} == {j.id: (True, j.id not in lost) for j in jobs}
    for job in jobs:
        after = store.get_job(job.id)
        assert after.last_run is not None and after.last_run.runs == 1, job.id
        if job.id not in lost:
            assert after.next_run_at == T0 + timedelta(minutes=1) and after.lease is None


def test_complete_counts_the_run_even_when_its_claim_is_gone(store: Store) -> None:
    """The run finished; the advance finds the claim released (its lease ran out, another replica took the
    job): the job's summary counts the run all the same (on MongoDB it rides in the advances' bulk write)."""
    job = store.add_job(make_job())
    [claimed] = store.claim_due(now=T0, horizon=T0, limit=10, owner="a", slack=timedelta(seconds=30))
    fire = Fire(claimed, T0, Trigger.SCHEDULE, claimed.lease.token if claimed.lease else "")
    execution = make_execution(fire)
    store.start_execution(execution)
    store.release(job.id, fire.lease_token)
    done = execution.with_changes(status=ExecutionStatus.FAILED, finished_at=T0 + timedelta(seconds=2), attempts=1)
    assert store.complete(done, fire, next_run_at=T0 + timedelta(minutes=1), now=T0)[0]
    summary = store.get_job(job.id).last_run
    assert summary is not None
    assert (summary.status, summary.at, summary.runs, summary.ok) == (
        ExecutionStatus.FAILED,
        T0 + timedelta(seconds=2),
        1,
        0,
    )
