"""A TaskRunner wired to a real SQLite store, the local lock and recording publisher / metrics."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support import handlers
from tests.support.engine import Engine
from tests.support.factories import make_job
from tests.support.recorders import RecordingMetrics, RecordingPublisher
from ticklock.adapters.lock.local import LocalLocker
from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.clock import Clock, FakeClock, SystemClock
from ticklock.domain.fires import Fire
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import IntervalSchedule, Schedule
from ticklock.domain.service import JobService
from ticklock.engine.fire_path import TaskRunner
from ticklock.engine.invoke import Invoker
from ticklock.engine.job_lock import LockFailure
from ticklock.engine.reporting import FireLog
from ticklock.handlers.builtin import register as register_builtin
from ticklock.handlers.contract import Registry
from ticklock.ports import Locker, Metrics, Publisher, Store

# no heartbeat beats on a fake clock: claims and locks last as long as the runs these tests take
LEASE = 30.0


@dataclass
class Harness:
    store: SQLiteStore
    clock: Clock
    registry: Registry
    invoker: Invoker
    publisher: Any = field(default_factory=RecordingPublisher)
    metrics: Any = field(default_factory=RecordingMetrics)
    locker: Locker | None = None
    runners: list[TaskRunner] = field(default_factory=list)

    def runner(
        self,
        *,
        publisher: Publisher | None = None,
        metrics: Metrics | None = None,
        locker: Locker | None = None,
        lock_failure: LockFailure = LockFailure.SKIP,
        owner: str = "test-owner",
        fire_log: FireLog = FireLog.EACH,
    ) -> TaskRunner:
        if self.locker is None:
            self.locker = LocalLocker(self.clock)
        runner = TaskRunner(
            store=self.store,
            locker=locker or self.locker,
            publisher=publisher or self.publisher,
            metrics=metrics or self.metrics,
            registry=self.registry,
            clock=self.clock,
            invoker=self.invoker,
            owner=owner,
            lock_failure=lock_failure,
            fire_log=fire_log,
            lease=LEASE,
        )
        self.runners.append(runner)
        return runner

    def add(self, handler: str = "noop", *, schedule: Schedule | None = None, **kw: Any) -> Job:
        job = make_job(
            handler=handler,
            schedule=schedule or IntervalSchedule(60),
            next_run_at=kw.pop("next_run_at", self.clock.now()),
            created_at=self.clock.now(),
            **kw,
        )
        return self.store.add_job(job)

    def claim(self, *, at_least: int = 1) -> list[Fire]:
        jobs = self.store.claim_due(
            now=self.clock.now(), horizon=self.clock.now(), limit=100, owner="test-owner", slack=timedelta(seconds=30)
        )
        assert len(jobs) >= at_least
        return [Fire.of(j) for j in jobs]

    def claim_one(self) -> Fire:
        [fire] = self.claim()
        return fire


def _harness(tmp_path: Path, clock: Clock, *, inline: bool = False) -> Iterator[Harness]:
    registry = Registry()
    register_builtin(registry)
    handlers.register(registry)
    invoker = Invoker(inline=inline)
    store = SQLiteStore(tmp_path / "lifecycle.db")
    yield Harness(store=store, clock=clock, registry=registry, invoker=invoker)
    invoker.close()
    store.close()


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Harness]:
    """Fake time: backoff sleeps are instant, deadlines are computed on the fake clock."""
    yield from _harness(tmp_path, FakeClock())


@pytest.fixture
def real(tmp_path: Path) -> Iterator[Harness]:
    """Wall-clock time, for deadlines enforced by real threads."""
    yield from _harness(tmp_path, SystemClock())


@pytest.fixture
def inline(tmp_path: Path) -> Iterator[Harness]:
    """Wall-clock time, sync handlers run on the runner's own thread (``Invoker(inline=True)``, as in serve)."""
    yield from _harness(tmp_path, SystemClock(), inline=True)


@pytest.fixture(params=["threads", "inline"])
def engine(store: Store, request: pytest.FixtureRequest) -> Iterator[Engine]:
    """An ``Engine`` (tests/support/engine.py) on each store the ``store`` fixture gives, with a fake clock;
    its sync handlers run on threads of their own (the Lambda runner) and inline (serve)."""
    box = Engine(store, inline=request.param == "inline")
    yield box
    box.invoker.close()


@pytest.fixture
def service(engine: Engine) -> JobService:
    """The job use cases on the engine's store, registry and clock."""
    return JobService(engine.store, engine.registry, engine.clock)
