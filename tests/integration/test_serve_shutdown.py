"""``ticklock serve``'s orderly stop (``LocalService.stop``): what ran since the last summary line is not lost
from the log. With TICKLOCK_FIRE_LOG=summary (the default) a fire that runs well writes no line of its own;
the summary loop writes one a second, and the stop writes the last one."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from tests.support.factories import make_job
from ticklock.domain.jobs import ExecutionStatus
from ticklock.domain.schedules import IntervalSchedule
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
