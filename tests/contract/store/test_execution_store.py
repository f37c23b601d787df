"""The ``ExecutionStore`` role's contract (ticklock/ports.py): executions read by id, by job (paged), by
fire and by window, their lags and activity per step, the unfinished ones recovery looks for, and pruning.
Run unchanged on every adapter."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.contract.store.helpers import run
from tests.support.factories import T0, make_execution, make_job
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.fires import Fire, Trigger
from ticklock.ports import Store


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


def test_executions_are_found_by_fire_and_by_window(store: Store) -> None:
    from tests.support.factories import make_execution
    from ticklock.domain.fires import Fire

    job = store.add_job(make_job())
    fires = [Fire(job, T0 + timedelta(seconds=s), Trigger.SCHEDULE, "t") for s in (0, 10, 20, 30)]
    for fire in fires:
        store.start_execution(make_execution(fire))
    found = store.execution_for(job.id, Trigger.SCHEDULE, fires[1].scheduled_at)
    assert found is not None and found.scheduled_at == T0 + timedelta(seconds=10)
    assert store.execution_for(job.id, Trigger.SCHEDULE, T0 + timedelta(seconds=5)) is None
    window = store.executions_between(
        job.id, start=T0 + timedelta(seconds=10), end=T0 + timedelta(seconds=20), limit=10
    )
    assert [int((e.scheduled_at - T0).total_seconds()) for e in window] == [20, 10]
    newest = store.executions_between(job.id, start=T0, end=T0 + timedelta(minutes=1), limit=1)
    assert [int((e.scheduled_at - T0).total_seconds()) for e in newest] == [30]
    other = store.add_job(make_job(name="other"))
    store.start_execution(make_execution(Fire(other, T0 + timedelta(seconds=15), Trigger.SCHEDULE, "t")))
    every = store.executions_between(None, start=T0 + timedelta(seconds=5), end=T0 + timedelta(minutes=1), limit=10)
    assert [int((e.scheduled_at - T0).total_seconds()) for e in every] == [30, 20, 15, 10]
    assert store.executions_between(None, start=T0, end=T0 + timedelta(minutes=1), limit=10, statuses=["failed"]) == []
    running = store.executions_between(
        other.id, start=T0, end=T0 + timedelta(minutes=1), limit=10, statuses=["running"]
    )
    assert [e.job_id for e in running] == [other.id]


def test_lags_are_each_runs_lag_newest_fire_first(store: Store) -> None:
    """``Store.lags`` reads what ``Execution.lag`` says of each run (its start less its slot and jitter), in
    the order and window ``executions_between`` reads them, without the rest of the execution."""
    from tests.support.factories import make_execution
    from ticklock.domain.fires import Fire

    job = store.add_job(make_job())
    late = {0: 0.25, 10: 3.5, 20: 0.0, 30: 61.125}  # slot second -> how late it started
    for second, after in late.items():
        fire = Fire(job, T0 + timedelta(seconds=second), Trigger.SCHEDULE, "t")
        run = make_execution(fire, started_at=fire.scheduled_at + timedelta(seconds=after))
        store.start_execution(run.with_changes(jitter=0.125 if second == 10 else 0.0))
    start, end = T0 + timedelta(seconds=5), T0 + timedelta(minutes=1)
    assert store.lags(start=start, end=end, limit=10) == pytest.approx([61.125, 0.0, 3.375])
    runs = store.executions_between(None, start=start, end=end, limit=10)
    assert store.lags(start=start, end=end, limit=10) == pytest.approx([e.lag for e in runs])
    assert store.lags(start=T0, end=T0 + timedelta(minutes=1), limit=2) == pytest.approx([61.125, 0.0])
    assert store.lags(start=T0 + timedelta(hours=1), end=T0 + timedelta(hours=2), limit=10) == []


def test_activity_counts_runs_per_step_by_status(store: Store) -> None:
    job = store.add_job(make_job())
    other = store.add_job(make_job())
    start = T0 - timedelta(minutes=10)
    statuses = [ExecutionStatus.SUCCESS, ExecutionStatus.FAILED, ExecutionStatus.SUCCESS]
    expected: dict[tuple[datetime, str], int] = {}
    for i in range(40):
        at = start + timedelta(seconds=15 * i, milliseconds=250 * (i % 3))
        status = statuses[i % 3]
        run(store, job if i % 2 else other, status, at)
        bucket = at.replace(second=0, microsecond=0)
        expected[(bucket, status.value)] = expected.get((bucket, status.value), 0) + 1
    run(store, job, ExecutionStatus.SUCCESS, start - timedelta(seconds=1))  # before the window
    got = store.activity(start=start, end=start + timedelta(minutes=10), step=timedelta(minutes=1))
    assert got == sorted((b, s, n) for (b, s), n in expected.items())


@pytest.mark.parametrize("step", [timedelta(seconds=30), timedelta(minutes=5)])
def test_activity_buckets_are_aligned_on_the_epoch(store: Store, step: timedelta) -> None:
    job = store.add_job(make_job())
    at = T0 + timedelta(seconds=47)
    run(store, job, ExecutionStatus.SUCCESS, at)
    [(bucket, status, count)] = store.activity(start=T0 - timedelta(hours=1), end=T0 + timedelta(hours=1), step=step)
    width = int(step.total_seconds())
    assert (bucket.timestamp() % width, bucket <= at < bucket + step, status, count) == (0, True, "success", 1)


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
