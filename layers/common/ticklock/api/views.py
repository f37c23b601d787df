"""The overview (``GET /overview``): what the dashboard's first page shows, read in one answer.

- **Activity**: the window's fires per step by what became of them. Runs are counted by the store
  (``ExecutionStore.activity``, by each execution's scheduled time and status); the ledger's skipped and missed
  entries are spread over the steps their range of slots covers, in proportion to the time it covers in
  each (an entry of many slots holds their count, not each slot's time).
- **Lag**: percentiles over the latest ``LAG_SAMPLE`` runs of the window (a sample, stated in the answer:
  an hour of a busy service has hundreds of thousands of runs).
- **Failures**: the latest runs of the last day that failed, timed out or were lost.
- **Alerts**: the alerts of the first ``alerts`` jobs with one raised, by job name (``state=alerting``; how
  many such jobs there are is in ``jobs``, and ``GET /alerts`` lists them all).

Each part reads what grows with the window's runs or the alerts raised, not with the jobs stored.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Protocol

from ticklock.api.schemas.alerts import AlertOut
from ticklock.api.schemas.executions import ExecutionOut
from ticklock.api.schemas.overview import ActivityOut, LagOut, OverviewOut, OverviewQuery
from ticklock.domain.executions import FAILED_STATUSES
from ticklock.ports import ExecutionStore, JobQuery, JobStore, LedgerStore

LAG_SAMPLE = 2000
LEDGER_ENTRIES = 5000  # the most ledger entries one overview spreads over its steps
FAILURES_SINCE = timedelta(days=1)
_MICRO = timedelta(microseconds=1)


class OverviewStore(JobStore, ExecutionStore, LedgerStore, Protocol):
    """The roles the overview reads: the jobs' counts and alerts, the runs, the ledger."""


def service_overview(store: OverviewStore, now: datetime, q: OverviewQuery) -> OverviewOut:
    step = timedelta(seconds=q.step)
    epoch = datetime.fromtimestamp(0, now.tzinfo)
    start = now - timedelta(minutes=q.window)
    start -= (start - epoch) % step  # steps aligned on the epoch, as the store's are
    counts: dict[datetime, dict[str, int]] = {start + i * step: {} for i in range((now - start) // step + 1)}
    for at, status, n in store.activity(start=start, end=now, step=step):
        if at in counts:
            counts[at][status] = counts[at].get(status, 0) + n
    for entry in store.list_fires(None, start=start, end=now, limit=LEDGER_ENTRIES):
        _spread(counts, entry.outcome, entry.first_at, entry.last_at, entry.count, start, step)
    lags = sorted(max(0.0, lag) for lag in store.lags(start=start, end=now, limit=LAG_SAMPLE))
    failed = [s.value for s in FAILED_STATUSES]
    failures = (
        store.executions_between(None, start=now - FAILURES_SINCE, end=now, limit=q.failures, statuses=failed)
        if q.failures
        else []
    )
    alerting = store.find_jobs(JobQuery(state="alerting", sort="name", at=now), limit=q.alerts) if q.alerts else []
    return OverviewOut(
        now=now,
        jobs=store.count_jobs(now),
        window=q.window,
        step=q.step,
        activity=[ActivityOut(at=at, counts=c) for at, c in sorted(counts.items())],
        lag=LagOut(
            p50=_percentile(lags, 0.5), p99=_percentile(lags, 0.99), max=lags[-1] if lags else None, sample=len(lags)
        ),
        failures=[ExecutionOut.of(e) for e in failures],
        alerts=[a for job in alerting for a in AlertOut.all_of(job)],
    )


def _spread(
    counts: dict[datetime, dict[str, int]],
    outcome: str,
    first: datetime,
    last: datetime,
    count: int,
    start: datetime,
    step: timedelta,
) -> None:
    """Add ``count`` slots from ``first`` to ``last`` to the steps they fall in, as if evenly spaced (exact
    for an interval or a regular cron; the steps before ``start`` are left out)."""
    if count <= 1 or last <= first:
        bucket = start + (first - start) // step * step
        if bucket in counts:
            counts[bucket][outcome] = counts[bucket].get(outcome, 0) + count
        return
    span = (last - first) // _MICRO  # slot k is at first + k * span / (count - 1): integers, exactly
    lo, hi = max(start, start + (first - start) // step * step), start + (last - start) // step * step
    bucket = lo
    while bucket <= hi:
        # the slots k (0..count-1) with first + k * span / (count - 1) in [bucket, bucket + step)
        below = max(0, min(count, -(-((bucket - first) // _MICRO) * (count - 1) // span)))
        upto = max(0, min(count, -(-((bucket + step - first) // _MICRO) * (count - 1) // span)))
        if upto > below and bucket in counts:
            counts[bucket][outcome] = counts[bucket].get(outcome, 0) + upto - below
        bucket += step


def _percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile of sorted ``values``."""
    if not values:
        return None
    rank = max(0, min(len(values) - 1, math.ceil(q * len(values)) - 1))
    return round(values[rank], 3)
