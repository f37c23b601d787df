"""`/metrics` scraped by many clients at once while `ticklock serve` drains a burst of 10,000 fires.

The per-fire series (executions, attempts, duration, lag, the ledger's fires) are appended to a deque by the
workers and summed when a scrape reads them (``FireSeries``). Read by 16 concurrent clients in the middle
of a burst, every scrape must parse (with prometheus_client's own text parser, not our writer) and be one
consistent moment: buckets cumulative, ``+Inf`` equal to ``_count``, a fire's start counted before its end
and its ledger entry before its execution. Each client's counters never go back, and once the burst is
over they say what the store holds: 10,000 fires, each run once.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import Serve, wait_for

pytestmark = pytest.mark.e2e

JOBS = 10_000
SCRAPERS = 16
BATCH = 1_000  # POST /jobs:batch takes up to 1,000


def readings(text: str) -> dict[str, float]:
    """The noop handler's per-fire series in one scrape, checked for consistency within it."""
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    for histogram in ("ticklock_dispatch_lag_seconds", "ticklock_execution_duration_seconds"):
        buckets = sorted(
            (float(dict(labels)["le"]), value)
            for (name, labels), value in samples.items()
            if name == f"{histogram}_bucket" and dict(labels).get("handler") == "noop"
        )
        if not buckets:
            continue
        counts = [value for _, value in buckets]
        assert counts == sorted(counts), f"{histogram}: buckets not cumulative: {buckets}"
        assert buckets[-1][0] == float("inf")
        assert buckets[-1][1] == samples[f"{histogram}_count", (("handler", "noop"),)], histogram
    read = {
        "started": samples.get(("ticklock_dispatch_lag_seconds_count", (("handler", "noop"),)), 0.0),
        "succeeded": samples.get(("ticklock_executions_total", (("handler", "noop"), ("status", "success"))), 0.0),
        "durations": samples.get(("ticklock_execution_duration_seconds_count", (("handler", "noop"),)), 0.0),
        "attempts": samples.get(("ticklock_attempts_total", (("handler", "noop"),)), 0.0),
        "accounted": samples.get(("ticklock_fires_total", (("outcome", "ran"), ("reason", "success"))), 0.0),
    }
    # one moment: an execution's status, attempts and duration are counted together; its start before its
    # end; its ledger entry before its execution's end (the order a fire's metrics are added in)
    assert read["succeeded"] == read["durations"] == read["attempts"], read
    assert read["started"] >= read["succeeded"], read
    assert read["accounted"] >= read["succeeded"], read
    return read


async def scrape(url: str, done: asyncio.Event) -> list[dict[str, float]]:
    seen: list[dict[str, float]] = []
    async with httpx.AsyncClient(base_url=url, timeout=15) as client:
        while not done.is_set():
            response = await client.get("/metrics")
            assert response.status_code == 200, response.text[:500]
            seen.append(readings(response.text))
    return seen


def final_statuses(db: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM executions GROUP BY status").fetchall())


def test_many_concurrent_scrapes_during_a_10000_fire_burst_read_consistent_counts(
    start: Callable[..., Serve], tmp_path: Path
) -> None:
    db = tmp_path / "ticklock.db"
    serve = start(db)
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=10)
    schedule = {"kind": "once", "at": at.isoformat().replace("+00:00", "Z")}
    for first in range(0, JOBS, BATCH):
        jobs = [{"name": f"burst-{i}", "handler": "noop", "schedule": schedule} for i in range(first, first + BATCH)]
        response = serve.client.post("/jobs:batch", json={"jobs": jobs}, timeout=60)
        assert response.status_code == 201, response.text[:500]
    assert datetime.now(UTC) < at - timedelta(seconds=1), "the jobs were not all created before their instant"

    async def burst() -> list[list[dict[str, float]]]:
        done = asyncio.Event()
        scrapers = [asyncio.create_task(scrape(serve.url, done)) for _ in range(SCRAPERS)]

        def over() -> bool:
            return sum(final_statuses(db).values()) >= JOBS and not any(s.done() for s in scrapers)

        ends = time.monotonic() + 120
        while time.monotonic() < ends and not any(s.done() for s in scrapers):
            if await asyncio.to_thread(over):
                break
            await asyncio.sleep(0.2)
        done.set()
        return list(await asyncio.gather(*scrapers))  # a scraper's failed assertion is raised here

    seen = asyncio.run(burst())
    assert final_statuses(db) == {"success": JOBS}, "every fire of the burst ran once, and succeeded"

    for one in seen:
        assert one, "each client scraped at least once"
        for key in one[0]:
            values = [reading[key] for reading in one]
            assert values == sorted(values), f"{key} went back between one client's scrapes"
    during = [r for one in seen for r in one if 0 < r["succeeded"] < JOBS]
    assert during, "no scrape landed in the middle of the burst"

    last = wait_for(lambda: (r := readings(serve.client.get("/metrics").text))["accounted"] >= JOBS and r)
    assert last == {"started": JOBS, "succeeded": JOBS, "durations": JOBS, "attempts": JOBS, "accounted": JOBS}
    assert serve.terminate() == 0
