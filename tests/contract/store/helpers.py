"""What the store's contract suites share: a claim with the suites' slack, and a run of a job."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.support.factories import T0, make_execution, manual_fire
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.jobs import Job
from ticklock.ports import Store

SLACK = timedelta(seconds=30)


def claim(
    store: Store, now: datetime = T0, limit: int = 100, horizon: timedelta = timedelta(0), owner: str = "a"
) -> list[Job]:
    return store.claim_due(now=now, horizon=now + horizon, limit=limit, owner=owner, slack=SLACK)


def run(store: Store, job: Job, status: ExecutionStatus, at: datetime, *, complete: bool = False) -> Execution:
    """One run of ``job`` scheduled at ``at``, ended ``status`` a second later."""
    execution = make_execution(manual_fire(job, at))
    store.start_execution(execution)
    done = execution.with_changes(status=status, finished_at=at + timedelta(seconds=1), duration=1.0, attempts=1)
    assert store.finish_execution(done)
    return done
