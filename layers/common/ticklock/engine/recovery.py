"""After a crash: an execution whose runner died or was cut off, finalised as LOST once nothing will resume
it; and the claims of a dead process of this host, released at start (docs/design.md, "What a crash can
cause")."""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime, timedelta

from ticklock.clock import Clock
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fire_rules import cause
from ticklock.domain.fires import LOCK_MARGIN, Fire
from ticklock.domain.ids import new_id, new_token
from ticklock.domain.jobs import Job
from ticklock.engine.reporting import Reporter
from ticklock.errors import JobNotFound
from ticklock.ports import FireStore, Store

log = logging.getLogger("ticklock.recovery")

ORPHANS_PER_SWEEP = 100


def finalise_lost(store: Store, reporter: Reporter, clock: Clock, execution: Execution, job: Job | None,
                  error: str) -> bool:  # fmt: skip
    """Finish ``execution`` as LOST with ``error`` (unless someone else took it over), and say so."""
    lost = execution.with_changes(status=ExecutionStatus.LOST, finished_at=clock.now(), error=error)
    if not store.finish_execution(lost):
        return False
    reporter.lost(lost, job)
    return True


def unfinished(store: Store, fire: Fire, owner: str, now: datetime) -> Execution | None:
    """The execution of a fire that cannot be processed at all (a message about to be dead-lettered), to be
    recorded as LOST: a placeholder row if it has none; None if it is final or runs somewhere right now
    (that run decides)."""
    placeholder = Execution(id=new_id(), job_id=fire.job.id, fire_key=fire.key, handler=fire.job.handler,
                            trigger=fire.trigger, scheduled_at=fire.scheduled_at, started_at=now, deadline_at=now,
                            run_token=new_token(), owner=owner)  # fmt: skip
    started = store.start_execution(placeholder)
    execution = started.execution
    live = execution.deadline_at + timedelta(seconds=LOCK_MARGIN) >= now
    if execution.status.final or (not started.created and execution.status is ExecutionStatus.RUNNING and live):
        return None
    return execution


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


def release_the_dead(store: FireStore, owner: str, clock: Clock, *, host: str | None = None) -> int:
    """At start: release the claims held by processes of this host that are gone, so that their jobs run
    again at once rather than when the claims lapse. An owner is ``host:pid``: gone when no process has
    that pid, or when it is this process's own name (a process of an earlier life, as in a container whose
    every process is pid 1). Their runs found running are resumed by the next claim. Returns how many."""
    host = socket.gethostname() if host is None else host
    released = 0
    for job_id, lease in store.live_claims(now=clock.now()):
        on, _, pid = lease.owner.rpartition(":")
        if on != host or not pid.isdigit() or (lease.owner != owner and _alive(int(pid))):
            continue
        store.release(job_id, lease.token)
        released += 1
    if released:
        log.warning("claims.taken_over", extra={"claims": released, "host": host})
    return released


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # somebody else's process: alive
        return True
    return True
