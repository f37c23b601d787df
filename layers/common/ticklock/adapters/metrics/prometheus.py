"""Prometheus metrics per handler, on a registry of their own (served at /metrics)."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

# The *_created series double the output and no dashboard of ours reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]

_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


class FireSeries:
    """The series every fire moves (its lag, its execution's status, attempts and duration, its ledger
    outcome), as a collector of their own. A fire only appends what happened to a deque (thread-safe, no
    lock); the counts are summed when they are read (a scrape, a push) or when 4,096 wait, rather than
    seven increments a fire through prometheus_client's own metrics, each under a lock. What is read is
    what those metrics would say (the tests read both)."""

    HELD = 4096  # events kept before the thread that adds one sums them

    def __init__(self) -> None:
        self._events: deque[tuple[Any, ...]] = deque()
        self._mutex = threading.Lock()
        self._lag: dict[str, list[float]] = {}  # handler: count per bucket (+Inf last), then the sum
        self._duration: dict[str, list[float]] = {}
        self._executions: dict[tuple[str, str], float] = {}
        self._attempts: dict[str, float] = {}
        self._fires: dict[tuple[str, str], float] = {}

    def started(self, handler: str, lag: float) -> None:
        self._add((0, handler, lag))

    def finished(self, handler: str, status: str, duration: float, attempts: int) -> None:
        self._add((1, handler, status, duration, attempts))

    def accounted(self, outcome: str, reason: str, count: int) -> None:
        self._add((2, outcome, reason, count))

    def _add(self, event: tuple[Any, ...]) -> None:
        self._events.append(event)
        if len(self._events) >= self.HELD:
            self.sum()

    def sum(self) -> None:
        """Fold the events added so far into the counts (each event once, whoever folds it)."""
        events = self._events
        with self._mutex:
            for _ in range(len(events)):  # appends go on meanwhile: only what was there is taken, each once
                event = events.popleft()
                if event[0] == 0:
                    _observe(self._lag, _LAG_BUCKETS, event[1], max(event[2], 0.0))
                elif event[0] == 1:
                    _, handler, status, duration, attempts = event
                    self._executions[handler, status] = self._executions.get((handler, status), 0.0) + 1
                    self._attempts[handler] = self._attempts.get(handler, 0.0) + attempts
                    _observe(self._duration, _DURATION_BUCKETS, handler, duration)
                else:
                    self._fires[event[1], event[2]] = self._fires.get((event[1], event[2]), 0.0) + event[3]

    def describe(self) -> Iterator[Metric]:
        return self._families()

    def collect(self) -> Iterator[Metric]:
        self.sum()
        with self._mutex:
            families = list(self._families(filled=True))
        return iter(families)

    def _families(self, *, filled: bool = False) -> Iterator[Metric]:
        executions = CounterMetricFamily(
            "ticklock_executions", "Executions that reached a final status", labels=["handler", "status"]
        )
        attempts = CounterMetricFamily("ticklock_attempts", "Handler attempts, retries included", labels=["handler"])
        fires = CounterMetricFamily(
            "ticklock_fires", "Fires by their ledger outcome and reason", labels=["outcome", "reason"]
        )
        duration = HistogramMetricFamily(
            "ticklock_execution_duration_seconds", "Execution duration, retries included", labels=["handler"]
        )
        lag = HistogramMetricFamily(
            "ticklock_dispatch_lag_seconds", "Handler start minus scheduled fire time", labels=["handler"]
        )
        if filled:
            for (handler, status), value in self._executions.items():
                executions.add_metric([handler, status], value)
            for handler, value in self._attempts.items():
                attempts.add_metric([handler], value)
            for (outcome, reason), value in self._fires.items():
                fires.add_metric([outcome, reason], value)
            for family, counts, bounds in (
                (duration, self._duration, _DURATION_BUCKETS),
                (lag, self._lag, _LAG_BUCKETS),
            ):
                for handler, row in counts.items():
                    family.add_metric([handler], _cumulative(row, bounds), row[-1])
        yield from (executions, attempts, duration, lag, fires)


def _observe(counts: dict[str, list[float]], bounds: tuple[float, ...], handler: str, value: float) -> None:
    row = counts.get(handler)
    if row is None:
        row = counts[handler] = [0.0] * (len(bounds) + 2)
    row[bisect_left(bounds, value)] += 1  # the first bucket whose bound is >= value (le), or +Inf
    row[-1] += value


def _cumulative(row: list[float], bounds: tuple[float, ...]) -> list[tuple[str, float]]:
    buckets, total = [], 0.0
    for bound, count in zip((*bounds, float("inf")), row[:-1], strict=True):
        total += count
        buckets.append((floatToGoString(bound), total))  # type: ignore[no-untyped-call]
    return buckets


class PrometheusMetrics:
    """The ``Metrics`` port as Prometheus counters, histograms and gauges."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry
        self.fire_series = FireSeries()
        r.register(self.fire_series)
        self.skips = Counter("ticklock_skips", "Fires not run, by reason", ["handler", "reason"], registry=r)
        self.disabled = Counter(
            "ticklock_jobs_disabled", "Jobs disabled because their schedule found no next fire", ["handler"], registry=r
        )
        self.ticks = Counter("ticklock_ticks", "Dispatcher ticks", ["outcome"], registry=r)
        self.claimed = Counter("ticklock_claimed", "Jobs claimed by the dispatcher", registry=r)
        self.tick_seconds = Histogram("ticklock_tick_seconds", "Time one claim round took", registry=r)
        self.abandoned = Gauge(
            "ticklock_handler_threads_abandoned", "Sync handler threads still running past their deadline", registry=r
        )
        self.queue_depth = Gauge("ticklock_queue_depth", "Fires waiting for a worker", registry=r)
        self.store_commands = Counter(
            "ticklock_store_commands", "Commands sent to the store (MongoDB)", ["command"], registry=r
        )
        self.events_dropped = Counter(
            "ticklock_events_dropped", "Execution events that could not be published", registry=r
        )

    def _child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, looked up once: ``labels`` checks and joins the values under a lock,
        and a fire would call it five times. A metric's children live as long as it does."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def fire_started(self, handler: str, lag: float) -> None:
        self.fire_series.started(handler, lag)

    def fire_finished(self, handler: str, status: str, duration: float, attempts: int) -> None:
        self.fire_series.finished(handler, status, duration, attempts)

    def fire_skipped(self, handler: str, reason: str) -> None:
        self._child(self.skips, handler, reason).inc()

    def fires_accounted(self, outcome: str, reason: str, count: int) -> None:
        self.fire_series.accounted(outcome, reason, count)

    def job_disabled(self, handler: str) -> None:
        self.disabled.labels(handler).inc()

    def tick(self, claimed: int, seconds: float, failed: bool) -> None:
        self.ticks.labels("error" if failed else "ok").inc()
        self.claimed.inc(claimed)
        self.tick_seconds.observe(seconds)

    def flush(self) -> None:
        return None

    def render(self) -> bytes:
        return generate_latest(self.registry)
