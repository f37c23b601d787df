"""Runs that will not end by themselves: an execution whose runner died or was cut off, finalised as LOST
once nothing will resume it (docs/design.md, "What a crash can cause")."""

from __future__ import annotations

from datetime import timedelta

from ticklock.clock import Clock
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fire_rules import cause
from ticklock.domain.fires import LOCK_MARGIN
from ticklock.domain.jobs import Job
from ticklock.engine.reporting import Reporter
from ticklock.errors import JobNotFound
from ticklock.ports import Store

ORPHANS_PER_SWEEP = 100


def finalise_lost(store: Store, reporter: Reporter, clock: Clock, execution: Execution, job: Job | None,
                  error: str) -> bool:  # fmt: skip
    """Finish ``execution`` as LOST with ``error`` (unless someone else took it over), and say so."""
    lost = execution.with_changes(status=ExecutionStatus.LOST, finished_at=clock.now(), error=error)
    if not store.finish_execution(lost):
        return False
    reporter.lost(lost, job)
    return True


def lose_orphans(store: Store, reporter: Reporter, clock: Clock, *, limit: int = ORPHANS_PER_SWEEP) -> int:
    """Finalise as LOST the allow_all fires whose run was cut off or whose runner vanished (past the deadline
    and the lock margin): their job went on when they started, so no claim brings them back to be resumed.
    Other jobs' such fires are resumed by their next claim, and left alone here. Returns how many."""
    now = clock.now()
    found = store.open_executions(deadline_before=now - timedelta(seconds=LOCK_MARGIN), limit=limit)
    lost = 0
    for execution in found:
        try:
            job: Job | None = store.get_job(execution.job_id)
        except JobNotFound:
            job = None
        error = f"{cause(execution)}; not run again: under allow_all its job went on when it started"
        lost += finalise_lost(store, reporter, clock, execution, job, error)
    return lost
