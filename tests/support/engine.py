"""An engine on one store with a fake clock, for the ledger and policy tests: a runner, recorders for
metrics and events, handlers that take fake time, and claims at the fake now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.support.factories import make_job
from tests.support.recorders import RecordingMetrics, RecordingPublisher
from ticklock.adapters.lock.local import LocalLocker
from ticklock.clock import FakeClock
from ticklock.domain.alerts import Alerts
from ticklock.domain.fires import Fire
from ticklock.domain.job_settings import Policy
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import CronSchedule, Schedule
from ticklock.engine.fire_path import TaskRunner
from ticklock.engine.invoke import Invoker
from ticklock.engine.job_lock import LockFailure
from ticklock.handlers.contract import HandlerContext, Registry
from ticklock.ports import Locker, Store

T = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)  # a slot of every schedule below
EVERY_10 = CronSchedule("*/10 * * * * *")
# no heartbeat beats on the fake clock: claims and locks last as long as the runs these tests take
LEASE = 120.0


class Engine:
    def __init__(self, store: Store, *, inline: bool = False) -> None:
        self.store = store
        self.clock = FakeClock(T)
        self.metrics = RecordingMetrics()
        self.publisher = RecordingPublisher()
        self.registry = Registry()
        self.registry.register("noop", lambda ctx: None)
        self.registry.register("long", self._long)
        self.invoker = Invoker(inline=inline)

    def _long(self, ctx: HandlerContext) -> None:
        """Runs 25 s of fake time."""
        self.clock.advance(25)

    def runner(
        self,
        locker: Locker | None = None,
        lock_failure: LockFailure = LockFailure.SKIP,
        alerts: Alerts | None = None,
        store: Store | None = None,
    ) -> TaskRunner:
        return TaskRunner(
            store=store or self.store,
            locker=locker or LocalLocker(self.clock),
            publisher=self.publisher,
            metrics=self.metrics,
            registry=self.registry,
            clock=self.clock,
            invoker=self.invoker,
            owner="test",
            lock_failure=lock_failure,
            alerts=alerts,
            lease=LEASE,
        )

    def add(self, handler: str = "noop", schedule: Schedule = EVERY_10, policy: Policy | None = None) -> Job:
        job = make_job(
            handler=handler, schedule=schedule, next_run_at=T, created_at=T - timedelta(minutes=1), timeout=60
        )
        return self.store.add_job(job.with_changes(policy=policy or Policy()))

    def claim(self, of: Job | None = None) -> Fire:
        now = self.clock.now()
        jobs = self.store.claim_due(now=now, horizon=now, limit=10, owner="test", slack=timedelta(seconds=120))
        [job] = [j for j in jobs if of is None or j.id == of.id]
        return Fire.of(job, now)

    def ledger(self, job: Job) -> list[tuple[str, int, int, int]]:
        """(reason, first slot, last slot as seconds after T, count), oldest first."""
        found = self.store.list_fires(job.id, start=T - timedelta(hours=1), end=T + timedelta(hours=1))
        return [
            (e.reason.value, int((e.first_at - T).total_seconds()), int((e.last_at - T).total_seconds()), e.count)
            for e in reversed(found)
        ]
