"""The per-fire series (``FireSeries``: a fire appends, the counts are summed when read) say what
prometheus_client's own Counter and Histogram objects say when given the same calls: checked on any
sequence of calls, through the text a scrape reads, parsed by prometheus_client's own parser; and no call
is lost or counted twice while threads add and a scrape reads at once."""

from __future__ import annotations

import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ticklock.adapters.metrics.prometheus import _DURATION_BUCKETS, _LAG_BUCKETS, FireSeries, PrometheusMetrics

FAMILIES = (
    "ticklock_executions",
    "ticklock_attempts",
    "ticklock_execution_duration_seconds",
    "ticklock_dispatch_lag_seconds",
    "ticklock_fires",
)


class Reference:
    """The same series as prometheus_client's own metrics, updated at each call."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.executions = Counter("ticklock_executions", "x", ["handler", "status"], registry=r)
        self.attempts = Counter("ticklock_attempts", "x", ["handler"], registry=r)
        self.duration = Histogram(
            "ticklock_execution_duration_seconds", "x", ["handler"], buckets=_DURATION_BUCKETS, registry=r
        )
        self.lag = Histogram("ticklock_dispatch_lag_seconds", "x", ["handler"], buckets=_LAG_BUCKETS, registry=r)
        self.fires = Counter("ticklock_fires", "x", ["outcome", "reason"], registry=r)

    def fire_started(self, handler: str, lag: float) -> None:
        self.lag.labels(handler).observe(max(lag, 0.0))

    def fire_finished(self, handler: str, status: str, duration: float, attempts: int) -> None:
        self.executions.labels(handler, status).inc()
        self.attempts.labels(handler).inc(attempts)
        self.duration.labels(handler).observe(duration)

    def fires_accounted(self, outcome: str, reason: str, count: int) -> None:
        self.fires.labels(outcome, reason).inc(count)


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text.decode()):
        if family.name in FAMILIES:
            for s in family.samples:
                if not s.name.endswith("_created"):
                    found[s.name, tuple(sorted(s.labels.items()))] = s.value
    return found


# values on and around the buckets' bounds, and anywhere
bounds = sorted({*_LAG_BUCKETS, *_DURATION_BUCKETS})
seconds = st.sampled_from(bounds) | st.floats(-5, 5000, allow_nan=False) | st.sampled_from([0.0, 1e-9, 3600.0001])
names = st.sampled_from(["noop", "alerts.scan", 'we"ird\\name\n'])
calls = st.lists(
    st.tuples(st.just("fire_started"), names, seconds)
    | st.tuples(st.just("fire_finished"), names, st.sampled_from(["success", "failed"]), seconds, st.integers(0, 5))
    | st.tuples(st.just("fires_accounted"), st.sampled_from(["ran", "skipped"]), names, st.integers(1, 1000)),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(calls=calls, read_at=st.integers(0, 60))
def test_the_series_read_what_prometheus_clients_own_metrics_read(calls: list[tuple[Any, ...]], read_at: int) -> None:
    ours, theirs = PrometheusMetrics(), Reference()
    for k, (method, *args) in enumerate(calls):
        if k == read_at:
            ours.render()  # a scrape in between sums what came so far; what comes after is summed at the next
        getattr(ours, method)(*args)
        getattr(theirs, method)(*args)
    assert samples(ours.render()) == samples(generate_latest(theirs.registry))


def test_threads_adding_while_scrapes_read_lose_nothing() -> None:
    metrics = PrometheusMetrics()
    assert FireSeries.HELD < 4 * 20_000 * 2  # the threads add far more than are held: the adders fold too
    start = threading.Barrier(5)

    def add() -> None:
        start.wait()
        for _ in range(20_000):
            metrics.fire_finished("noop", "success", 0.001, 1)
            metrics.fire_started("noop", 0.002)

    def scrape() -> None:
        start.wait()
        for _ in range(50):
            metrics.render()

    threads = [threading.Thread(target=add) for _ in range(4)] + [threading.Thread(target=scrape)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    read = samples(metrics.render())
    assert read["ticklock_executions_total", (("handler", "noop"), ("status", "success"))] == 80_000
    assert read["ticklock_attempts_total", (("handler", "noop"),)] == 80_000
    assert read["ticklock_dispatch_lag_seconds_count", (("handler", "noop"),)] == 80_000
    assert read["ticklock_dispatch_lag_seconds_bucket", (("handler", "noop"), ("le", "0.001"))] == 0
    assert read["ticklock_dispatch_lag_seconds_bucket", (("handler", "noop"), ("le", "0.0025"))] == 80_000
    assert read["ticklock_execution_duration_seconds_bucket", (("handler", "noop"), ("le", "0.005"))] == 80_000
