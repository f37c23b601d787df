"""The Store port's contract for what the dashboard reads: the runs' summary on each job, the jobs table's
filters, sorts and keyset pages (checked against a plain Python oracle: filter the list, sort it, slice
it), the counts by state and the activity per minute. Run unchanged on every adapter."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.support.factories import T0, make_execution, make_job, manual_fire
from ticklock.domain.jobs import Execution, ExecutionStatus, Fire, Hold, HoldKind, Job, Trigger
from ticklock.domain.states import JOB_FILTERS, JobState, job_conditions, job_state
from ticklock.ports import JOB_SORTS, JobQuery, Store

FAILED = {"failed", "timeout", "lost"}
NOW = T0 + timedelta(seconds=90)  # the instant states are judged at: some holds end before it, some after


def run(store: Store, job: Job, status: ExecutionStatus, at: datetime, *, complete: bool = False) -> Execution:
    """One run of ``job`` scheduled at ``at``, ended ``status`` a second later."""
    execution = make_execution(manual_fire(job, at))
    store.start_execution(execution)
    done = execution.with_changes(status=status, finished_at=at + timedelta(seconds=1), duration=1.0, attempts=1)
    assert store.finish_execution(done)
    return done


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


# -- the jobs table ---------------------------------------------------------------------------------
def _population(store: Store, n: int = 40) -> list[Job]:
    """Jobs with every state, some ties on the sort keys, some without a next fire or a run."""
    rng = random.Random(7)
    jobs = []
    for i in range(n):
        job = make_job(
            f"{rng.choice(['Alpha', 'beta', 'gamma', 'DELTA'])}-{i:03d}",
            handler=rng.choice(["noop", "http.check", "report.daily"]),
            enabled=rng.random() > 0.3,
            next_run_at=rng.choice([None, T0, T0 + timedelta(minutes=rng.randrange(5))]),
        )
        if not job.enabled and rng.random() < 0.5:
            job = job.with_changes(disabled_reason="unknown handler")
        if job.enabled and job.next_run_at is not None and rng.random() < 0.4:  # a timed hold, ahead or ended
            ends = job.next_run_at + timedelta(seconds=rng.choice([-60, 0, 30, 600]))
            kind = rng.choice(list(HoldKind))
            hold = Hold(kind, T0 - timedelta(hours=1), skipped_from=T0 - timedelta(minutes=5), resumes_at=ends)
            job = job.with_changes(hold=hold, next_run_at=ends)
        if not job.enabled and rng.random() < 0.3 and job.disabled_reason is None:  # a one-shot that fired
            job = job.with_changes(next_run_at=None)
        store.add_job(job)
        for k in range(rng.randrange(4)):
            status = rng.choice([ExecutionStatus.SUCCESS, ExecutionStatus.FAILED, ExecutionStatus.LOST])
            run(store, job, status, T0 - timedelta(minutes=rng.choice([1, 2, 30]), seconds=k))
        if rng.random() < 0.2:
            assert store.set_open_alerts(job.id, expected={}, new={"late": {"raised_at": T0.isoformat()}})
        jobs.append(store.get_job(job.id))
    return jobs


def _in_state(job: Job, state: str) -> bool:
    """The states and conditions as the API documents them, written apart from ``domain.states``."""
    last = job.last_run
    hold_ahead = job.hold is not None and job.hold.resumes_at is not None and job.hold.resumes_at > NOW
    stopped_by_user = not job.enabled and job.disabled_reason is None
    return {
        "enabled": job.enabled and not hold_ahead,
        "paused": stopped_by_user and job.next_run_at is not None,
        "held": job.enabled and hold_ahead,
        "disabled": not job.enabled and job.disabled_reason is not None,
        "done": stopped_by_user and job.next_run_at is None,
        "failing": last is not None and last.status.value in FAILED,
        "alerting": bool(job.open_alerts),
    }[state]


def test_the_domains_state_and_conditions_agree_with_the_documented_rules(store: Store) -> None:
    for job in _population(store, 60):
        [state] = [s for s in JOB_FILTERS[:5] if _in_state(job, s)]
        assert job_state(job, NOW).value == state, job
        assert [c.value for c in job_conditions(job)] == [c for c in JOB_FILTERS[5:] if _in_state(job, c)]


def _key(job: Job, sort: str) -> Any:
    if sort in ("id", "name"):
        return job.id if sort == "id" else job.name
    if sort == "next_run_at":
        return job.next_run_at if job.enabled else None  # only an enabled job has a next fire
    return job.last_run.at if job.last_run else None


def _oracle(jobs: list[Job], query: JobQuery) -> list[str]:
    def matches(job: Job) -> bool:
        if query.search and not any(query.search.lower() in f.lower() for f in (job.name, job.handler)):
            return False
        if query.handler is not None and job.handler != query.handler:
            return False
        if query.enabled is not None and job.enabled != query.enabled:
            return False
        if query.state is not None and not _in_state(job, query.state):
            return False
        if query.outcome is not None:
            status = job.last_run.status.value if job.last_run else "none"
            return status == query.outcome
        return True

    found = list(filter(matches, jobs))
    # jobs without a value (no next fire, never ran) after all the others, whichever the direction
    valued = [j for j in found if _key(j, query.sort) is not None]
    valueless = [j for j in found if _key(j, query.sort) is None]
    valued.sort(key=lambda j: (_key(j, query.sort), j.id), reverse=query.descending)
    valueless.sort(key=lambda j: j.id, reverse=query.descending)
    return [j.id for j in valued + valueless]


def _walk(store: Store, query: JobQuery, size: int) -> list[str]:
    """Every page of ``query``, each after the previous page's last job."""
    seen: list[str] = []
    while True:
        page = store.find_jobs(query, limit=size)
        seen += [j.id for j in page]
        if len(page) < size:
            return seen
        last = page[-1]
        query = JobQuery(**{**query.__dict__, "after": (_key(last, query.sort), last.id)})
        assert len(seen) < 1000, "the pages do not end"


def test_find_jobs_filters_sorts_and_pages_as_the_oracle_does(store: Store) -> None:
    jobs = _population(store)
    rng = random.Random(11)
    queries = [JobQuery(sort=s, descending=d, at=NOW) for s in JOB_SORTS for d in (False, True)]
    queries += [JobQuery(state=state, at=NOW) for state in JOB_FILTERS]
    queries += [JobQuery(state=state, sort="next_run_at", at=NOW) for state in JOB_FILTERS]
    queries += [JobQuery(outcome=o) for o in ("none", "success", "failed", "lost")]
    queries += [JobQuery(search="ALP"), JobQuery(search="check"), JobQuery(search="-01"), JobQuery(search="%_")]
    for _ in range(25):  # and mixtures
        queries.append(
            JobQuery(
                search=rng.choice([None, "a", "gam", "report"]),
                handler=rng.choice([None, "noop", "http.check"]),
                enabled=rng.choice([None, None, True, False]),
                state=rng.choice([None, *JOB_FILTERS]),
                outcome=rng.choice([None, "none", "success", "failed"]),
                sort=rng.choice(JOB_SORTS),
                descending=rng.random() < 0.5,
                at=NOW,
            )
        )
    for query in queries:
        expected = _oracle(jobs, query)
        for size in (1, 3, 7, 100):
            assert _walk(store, query, size) == expected, (query, size)


def test_count_jobs_by_state(store: Store) -> None:
    jobs = _population(store, 30)
    counts = store.count_jobs(NOW)
    assert counts == {"total": 30, **{s: sum(_in_state(j, s) for j in jobs) for s in JOB_FILTERS}}
    assert sum(counts[s.value] for s in JobState) == 30  # every job in one state


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
