"""Metrics pushed to a Prometheus Pushgateway, for processes that cannot be scraped (Lambda).

Grouping: every process (every Lambda execution environment) pushes its own cumulative counters under
its own group, ``{job="ticklock", instance="<owner>"}``, with PUT, which replaces that group only.
So concurrent environments never overwrite each other (one shared group would: a PUT replaces the
whole group, and the Pushgateway does not add), and a query sums over instances:
``sum without (instance) (rate(ticklock_executions_total[5m]))``. The Pushgateway forgets nothing, so
groups of environments that are gone would pile up: ``delete_stale_groups`` removes every ticklock group
not pushed for ``stale_after`` seconds; the dispatcher side (the local service, the tick function) runs
it periodically. A push or clean-up failure is logged and never fails a run.
"""

from __future__ import annotations

import logging
import time
from urllib.parse import quote

import httpx
from prometheus_client import CollectorRegistry, push_to_gateway

from ticklock.adapters.metrics.prometheus import PrometheusMetrics

log = logging.getLogger("ticklock.metrics")
JOB = "ticklock"


class PushgatewayMetrics(PrometheusMetrics):
    """``PrometheusMetrics`` whose ``flush`` pushes this process's group."""

    def __init__(
        self, url: str, instance: str, *, registry: CollectorRegistry | None = None, timeout: float = 2.0
    ) -> None:
        super().__init__(registry)
        self.url = url.rstrip("/")
        self.instance = instance
        self.timeout = timeout

    def flush(self) -> None:
        try:
            push_to_gateway(
                self.url,
                job=JOB,
                registry=self.registry,
                grouping_key={"instance": self.instance},
                timeout=self.timeout,
            )
        except Exception as exc:  # noqa: BLE001 - a metrics outage never fails a run
            log.warning("metrics.push_failed", extra={"url": self.url, "error": f"{type(exc).__name__}: {exc}"})


def delete_stale_groups(url: str, *, stale_after: float, now: float | None = None, timeout: float = 2.0) -> list[str]:
    """Delete the ticklock groups whose last push is older than ``stale_after`` seconds; return their instances."""
    url = url.rstrip("/")
    now = time.time() if now is None else now
    try:
        groups = httpx.get(f"{url}/api/v1/metrics", timeout=timeout).raise_for_status().json()["data"]
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        log.warning("metrics.janitor_failed", extra={"url": url, "error": f"{type(exc).__name__}: {exc}"})
        return []
    removed = []
    for group in groups:
        labels = group.get("labels", {})
        if labels.get("job") != JOB or "instance" not in labels:
            continue
        pushed = float(group.get("push_time_seconds", {}).get("metrics", [{}])[0].get("value", 0))
        if now - pushed > stale_after and _delete_group(url, labels["instance"], timeout):
            removed.append(labels["instance"])
    if removed:
        log.info("metrics.stale_groups_deleted", extra={"instances": removed})
    return removed


def _delete_group(url: str, instance: str, timeout: float) -> bool:
    try:
        httpx.delete(f"{url}/metrics/job/{JOB}/instance/{quote(instance, safe='')}", timeout=timeout).raise_for_status()
    except httpx.HTTPError as exc:
        log.warning("metrics.delete_failed", extra={"instance": instance, "error": f"{type(exc).__name__}: {exc}"})
        return False
    return True
