"""Claims and locks that last seconds past their last beat (engine/heartbeat.py), the resume of a run whose
process stopped beating, and the claims of a dead process of this host taken over at start
(engine/recovery.py), on every store."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from datetime import timedelta

from tests.support.engine import Engine, T
from tests.support.factories import make_job
from ticklock.adapters.lock.local import LocalLocker
from ticklock.clock import FakeClock
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.fire_rules import SkipReason
from ticklock.domain.fires import Fire
from ticklock.engine.fire_path import TaskRunner
from ticklock.engine.heartbeat import Heartbeat
from ticklock.engine.recovery import release_the_dead
from ticklock.handlers.contract import HandlerContext
from ticklock.ports import Store

LEASE = 6.0


def _runner(engine: Engine, locker: LocalLocker, owner: str) -> TaskRunner:
    return TaskRunner(store=engine.store, locker=locker, publisher=engine.publisher, metrics=engine.metrics,
                      registry=engine.registry, clock=engine.clock, invoker=engine.invoker, owner=owner,
                      lease=LEASE, lookahead=0.0)  # fmt: skip


def _claim(engine: Engine, owner: str) -> Fire:
    now = engine.clock.now()
    [job] = engine.store.claim_due(now=now, horizon=now, limit=10, owner=owner, slack=timedelta(seconds=LEASE))
    return Fire.of(job, now)


def test_a_beat_keeps_the_held_claims_and_locks_and_a_dropped_one_lapses(store: Store) -> None:
    clock = FakeClock(T)
    locker = LocalLocker(clock)
    beat = Heartbeat(store=store, locker=locker, clock=clock, lease=LEASE, lookahead=0.0)
    kept, dropped = (store.add_job(make_job(next_run_at=T)) for _ in range(2))
    fires = {j.id: Fire.of(j, T) for j in store.claim_due(now=T, horizon=T, limit=10, owner="me",
                                                           slack=timedelta(seconds=LEASE))}  # fmt: skip
    for fire in fires.values():
        beat.hold(fire)
    token = locker.acquire(f"job:{kept.id}", LEASE)
    assert token is not None
    beat.locked(fires[kept.id], f"job:{kept.id}", token)
    beat.drop(fires[dropped.id])
    for _ in range(10):  # a minute of beats, every third of the lease
        clock.advance(LEASE / 3)
        beat.beat()
    now = clock.now()
    claimed = store.claim_due(now=now, horizon=now, limit=10, owner="you", slack=timedelta(seconds=LEASE))
    assert [j.id for j in claimed] == [dropped.id]  # the kept one is still held; the dropped one lapsed
    assert locker.acquire(f"job:{kept.id}", LEASE) is None  # its lock too
    assert beat.until(fires[kept.id]) == now + timedelta(seconds=LEASE)  # its last beat was now
    beat.drop(fires[kept.id])
    clock.advance(LEASE)
    now = clock.now()
    assert kept.id in [j.id for j in store.claim_due(now=now, horizon=now, limit=10, owner="you",
                                                     slack=timedelta(seconds=LEASE))]  # fmt: skip
    assert locker.acquire(f"job:{kept.id}", LEASE) is not None


def test_a_run_whose_process_stopped_beating_is_resumed_once_its_claim_lapses(store: Store) -> None:
    engine = Engine(store)
    started, release = threading.Event(), threading.Event()

    def hangs(ctx: HandlerContext) -> None:
        if ctx.execution_id and not started.is_set():
            started.set()
            release.wait(30)

    engine.registry.register("hangs", hangs)
    job = engine.store.add_job(make_job(handler="hangs", next_run_at=T, timeout=600))
    locker = LocalLocker(engine.clock)  # one lock table: the replicas share a Redis
    first = _claim(engine, "host-a:1")
    dead = _runner(engine, locker, "host-a:1")
    thread = threading.Thread(target=dead.run, args=(first,))
    thread.start()
    try:
        assert started.wait(10)
        # while it runs and beats, a second claimer finds nothing due
        engine.clock.advance(LEASE / 2)
        dead.heartbeat.beat()
        engine.clock.advance(LEASE / 2 + 1)
        now = engine.clock.now()
        assert engine.store.claim_due(now=now, horizon=now, limit=10, owner="host-b:2",
                                      slack=timedelta(seconds=LEASE)) == []  # fmt: skip
        # then its process stops beating (it died): its claim and lock lapse within the lease
        engine.clock.advance(LEASE)
        survivor = _runner(engine, locker, "host-b:2")
        outcome = survivor.run(_claim(engine, "host-b:2"))
        assert outcome.execution is not None and outcome.execution.status is ExecutionStatus.SUCCESS
        assert outcome.execution.resumes == 1 and outcome.execution.owner == "host-b:2"
    finally:
        release.set()
        thread.join(10)
    [execution] = engine.store.list_executions(job.id)
    assert execution.status is ExecutionStatus.SUCCESS and execution.owner == "host-b:2"  # the dead run's end lost


def test_a_second_delivery_under_the_same_claim_does_not_resume_the_run(store: Store) -> None:
    engine = Engine(store)
    started, release = threading.Event(), threading.Event()

    def hangs(ctx: HandlerContext) -> None:
        started.set()
        release.wait(30)

    engine.registry.register("hangs", hangs)
    engine.store.add_job(make_job(handler="hangs", next_run_at=T, timeout=600))
    fire = _claim(engine, "host-a:1")
    thread = threading.Thread(target=_runner(engine, LocalLocker(engine.clock), "host-a:1").run, args=(fire,))
    thread.start()
    try:
        assert started.wait(10)
        # another runner, another lock table: only the row and its claim tell it the fire runs
        copy = Fire(fire.job, fire.scheduled_at, fire.trigger, fire.lease_token)
        other = _runner(engine, LocalLocker(engine.clock), "host-b:2")
        assert other.run(copy).skipped is SkipReason.RUNNING_ELSEWHERE
    finally:
        release.set()
        thread.join(10)


def test_at_start_the_claims_of_dead_processes_of_this_host_are_released(store: Store) -> None:
    clock = FakeClock(T)
    host = socket.gethostname()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    owners = {
        "dead": f"{host}:{dead_pid}",
        "alive": f"{host}:{os.getppid()}",  # a live process of this host: still running its fires
        "me": f"{host}:{os.getpid()}",  # this process's own name: an earlier life of it
        "elsewhere": f"another-{host}:{dead_pid}",  # another host's: its pids are not ours to judge
        "named": "a-name-without-a-pid",
    }
    jobs = {}
    for label, owner in owners.items():
        store.add_job(make_job(next_run_at=T))
        [jobs[label]] = store.claim_due(now=T, horizon=T, limit=1, owner=owner, slack=timedelta(seconds=LEASE))
    assert release_the_dead(store, owners["me"], clock, host=host) == 2
    live = {job_id for job_id, _ in store.live_claims(now=T)}
    assert live == {jobs[k].id for k in ("alive", "elsewhere", "named")}
    again = store.claim_due(now=T, horizon=T, limit=10, owner="new", slack=timedelta(seconds=LEASE))
    assert {j.id for j in again} == {jobs["dead"].id, jobs["me"].id}
