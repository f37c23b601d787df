"""The ``JobStore`` role's contract for the jobs table the dashboard reads: its filters, sorts and keyset
pages (checked against a plain Python oracle: filter the list, sort it, slice it) and the counts by state.
Run unchanged on every adapter."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from tests.contract.store.helpers import run
from tests.support.factories import T0, make_job
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.jobs import Hold, HoldKind, Job
from ticklock.domain.states import JOB_FILTERS, JobState, job_conditions, job_state
from ticklock.ports import JOB_SORTS, JobQuery, Store

FAILED = {"failed", "timeout", "lost"}
NOW = T0 + timedelta(seconds=90)  # the instant states are judged at: some holds end before it, some after


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
