"""Two `ticklock serve` processes on one SQLite file: every fire runs exactly once."""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from tests.e2e.conftest import Serve
from ticklock.domain.schedules import CronSchedule

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

JOBS = 200
SECONDS = 20


def test_two_processes_share_one_store_and_run_each_fire_once(start: Callable[..., Serve], tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    calls = tmp_path / "calls"
    first = start(db)
    second = start(db)
    cron = CronSchedule("* * * * * *")
    for i in range(JOBS):
        target = first if i % 2 else second
        target.create(
            name=f"job-{i}",
            handler="test.record",
            schedule={"kind": "cron", "expr": cron.expr},
            payload={"path": str(calls)},
        )
    time.sleep(SECONDS)
    assert first.terminate() == 0
    assert second.terminate() == 0

    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT job_id, fire_key, scheduled_at, finished_at, status, owner FROM executions"
        ).fetchall()
    assert rows, "nothing ran"
    # exactly once: one execution per fire, and one handler start per execution
    assert max(Counter(r[1] for r in rows).values()) == 1
    starts = Counter((c["job_id"], c["scheduled_at"]) for c in map(json.loads, calls.read_text().splitlines()))
    assert max(starts.values()) == 1
    assert sum(starts.values()) == len(rows)
    assert {r[4] for r in rows} == {"success"}
    # both processes did part of the work
    assert len({r[5] for r in rows}) == 2
    # nothing lost: each job's next fire is the one the schedule gives after the previous run ended
    # (a slot that passed while a run was late collapses into one fire: the documented policy)
    by_job: dict[str, list[tuple[int, int]]] = {}
    for job_id, _, scheduled, finished, _, _ in rows:
        by_job.setdefault(job_id, []).append((scheduled, finished))
    assert len(by_job) == JOBS
    collapsed = 0
    for fires in by_job.values():
        fires.sort()
        assert len(fires) >= 3  # every job kept running; the chain check below proves none went missing
        for (scheduled, finished), (next_scheduled, _) in pairwise(fires):
            after = max(_at(finished), _at(scheduled))
            assert _at(next_scheduled) == cron.next_after(after)
            collapsed += int((_at(next_scheduled) - _at(scheduled)) > timedelta(seconds=1))
    print(f"{len(rows)} fires, {collapsed} slots collapsed by lateness")


def _at(micros: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
