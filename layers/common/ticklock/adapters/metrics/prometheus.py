"""Prometheus metrics per handler, on a registry of their own (served at /metrics)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest

# The *_created series double the output and no dashboard of ours reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]

_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


class PrometheusMetrics:
    """The ``Metrics`` port as Prometheus counters, histograms and gauges."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry
        self.executions = Counter(
            "ticklock_executions", "Executions that reached a final status", ["handler", "status"], registry=r
        )
        self.attempts = Counter("ticklock_attempts", "Handler attempts, retries included", ["handler"], registry=r)
        self.duration = Histogram(
            "ticklock_execution_duration_seconds",
            "Execution duration, retries included",
            ["handler"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.lag = Histogram(
            "ticklock_dispatch_lag_seconds",
            "Handler start minus scheduled fire time",
            ["handler"],
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.skips = Counter("ticklock_skips", "Fires not run, by reason", ["handler", "reason"], registry=r)
        self.fires = Counter(
            "ticklock_fires", "Fires by their ledger outcome and reason", ["outcome", "reason"], registry=r
        )
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
        ~1.5 us a call, five calls a fire. A metric's children live as long as it does."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def fire_started(self, handler: str, lag: float) -> None:
        self._child(self.lag, handler).observe(max(lag, 0.0))

    def fire_finished(self, handler: str, status: str, duration: float, attempts: int) -> None:
        self._child(self.executions, handler, status).inc()
        self._child(self.attempts, handler).inc(attempts)
        self._child(self.duration, handler).observe(duration)

    def fire_skipped(self, handler: str, reason: str) -> None:
        self._child(self.skips, handler, reason).inc()

    def fires_accounted(self, outcome: str, reason: str, count: int) -> None:
        self._child(self.fires, outcome, reason).inc(count)

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
