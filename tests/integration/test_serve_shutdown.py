"""``ticklock serve``'s orderly stop (``LocalService.stop``): what ran since the last summary line is not lost
from the log (with TICKLOCK_FIRE_LOG=summary, the default, a fire that runs well writes no line of its own;
the summary loop writes one a second, and the stop writes the last one), and no fire claimed is left behind."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.factories import make_job
from tests.support.waiting import wait_until
from ticklock.clock import SystemClock, to_ms
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.fires import Fire
from ticklock.domain.schedules import IntervalSchedule, OnceSchedule
from ticklock.handlers.contract import HandlerContext, Registry
from ticklock.runtimes.local import LocalService
from ticklock.settings import Settings


def test_stopping_writes_the_summary_of_the_fires_run_since_the_last_one(tmp_path: Path, caplog: Any) -> None:
    service = LocalService(Settings.load({"TICKLOCK_DB": str(tmp_path / "serve.db")}))
    stopped = False
    try:
        now = service.clock.now()
        jobs = [make_job(f"shutdown-{i}", next_run_at=now, schedule=IntervalSchedule(3600)) for i in range(3)]
        service.store.add_jobs(jobs)
        with caplog.at_level(logging.INFO, logger="ticklock.lifecycle"):
            # the loops are not started (no summary a second): only the stop can write the line
            claimed, _ = service.dispatcher.claim(service.clock.now())
            assert claimed == 3
            service.dispatcher.release_due(service.clock.now() + service.dispatcher.lookahead)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not all(
                [e.status for e in service.store.list_executions(job.id)] == [ExecutionStatus.SUCCESS] for job in jobs
            ):
                time.sleep(0.01)
            assert not [r for r in caplog.records if r.getMessage() == "fires.summary"]  # not yet written
            service.stop()
            stopped = True
    finally:
        if not stopped:
            service.stop()
    summaries = [r.__dict__ for r in caplog.records if r.getMessage() == "fires.summary"]
    assert len(summaries) == 1
    assert summaries[0]["started"] == 3
    assert summaries[0]["finished"] == {"success": 3}
    assert summaries[0]["handlers"] == {"noop": 3}


def test_a_fire_whose_hand_over_was_blocked_as_serve_stops_is_given_back(tmp_path: Path) -> None:
    """Every worker is in a handler and the queue is full, so the dispatcher's hand-over of the next fire is
    blocked in ``pool.submit`` as serve stops. Found by test_pool_and_runner_random.py: the stop waited 10 s
    for the dispatcher, drained the queue and gave its fires back, and the blocked hand-over then completed
    into the queue drained already, where no worker would run it; its job stayed claimed (till horizon +
    timeout + lease slack, ~91 s here) with no execution and no ledger entry. The stop now closes the pool's
    intake first: the blocked hand-over ends, its fire given back, and the dispatcher has stopped before the
    queue is drained ("dispatching stops at once")."""
    release, entered = threading.Event(), threading.Event()

    def hang(ctx: HandlerContext) -> None:  # a long run within its deadline: the worker is busy, not stuck
        entered.set()
        release.wait(60)

    registry = Registry()
    registry.register("test.long", hang)
    environ = {"TICKLOCK_DB": str(tmp_path / "stop.db"), "TICKLOCK_WORKERS": "1", "TICKLOCK_QUEUE_SIZE": "1"}
    service = LocalService(
        Settings.load({**environ, "TICKLOCK_SHUTDOWN_GRACE": "0.2"}, plugins=()), clock=SystemClock(), registry=registry
    )
    try:
        now = to_ms(service.clock.now())
        jobs = [make_job(f"stop-{i}", next_run_at=now, schedule=OnceSchedule(now), handler="test.long", timeout=30)
                for i in range(3)]  # fmt: skip
        service.store.add_jobs(jobs)
        service.start()
        # the first fire runs, the second waits in the queue, the third's hand-over is blocked on the full queue
        assert entered.wait(10)
        assert wait_until(lambda: service.pool.depth() == 1 and service.dispatcher.next_wake() is None)
        drain, dispatching = service.pool.drain_unstarted, list[str]()

        def drain_unstarted() -> Sequence[Fire]:
            dispatching.extend(t.name for t in service._threads if t.is_alive() and t.name == "ticklock-dispatcher")
            return drain()

        service.pool.drain_unstarted = drain_unstarted  # type: ignore[method-assign]
        service.stop()
        assert dispatching == []  # the dispatcher had stopped when the queue was drained
    finally:
        release.set()
        service.stop()
    reader = sqlite3.connect(tmp_path / "stop.db")
    try:
        claimed = reader.execute("SELECT name FROM jobs WHERE lease_token IS NOT NULL ORDER BY name").fetchall()
        runs = reader.execute("SELECT status FROM executions").fetchall()
    finally:
        reader.close()
    assert runs == [("interrupted",)]  # the fire that ran: cut off and released, as it should be
    assert claimed == [], f"left claimed by an orderly stop, neither run nor given back: {claimed}"
