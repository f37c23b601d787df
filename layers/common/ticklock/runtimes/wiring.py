"""Adapters chosen by configuration alone, shared by every composition root (local service, Lambda)."""

from __future__ import annotations

import logging
from datetime import timedelta

from ticklock.adapters.email import sender_from
from ticklock.adapters.events.basic import LogPublisher, NoPublisher
from ticklock.adapters.metrics.prometheus import PrometheusMetrics
from ticklock.adapters.webhook import webhook_from
from ticklock.clock import Clock
from ticklock.domain.alerts import Alerts, Destinations
from ticklock.domain.job_rules import Limits
from ticklock.domain.service import JobService
from ticklock.engine.dispatcher import Dispatcher
from ticklock.engine.fire_path import TaskRunner
from ticklock.engine.heartbeat import Heartbeat
from ticklock.engine.invoke import Invoker
from ticklock.engine.job_lock import LockFailure
from ticklock.engine.outbox import Outbox
from ticklock.engine.reporting import FireLog
from ticklock.handlers.contract import Registry
from ticklock.ports import ExecutionStore, FireQueue, Locker, Publisher, Store
from ticklock.settings import Settings


def build_store(settings: Settings, metrics: PrometheusMetrics | None = None) -> Store:
    """The store TICKLOCK_STORE (or TICKLOCK_DB) names. Raises ``StoreUnavailable`` if it cannot be opened."""
    url = settings.store_url
    if url.startswith("sqlite:///"):
        from ticklock.adapters.store.sqlite import SQLiteStore

        return SQLiteStore(url.removeprefix("sqlite:///"))
    from ticklock.adapters.store.mongo import CommandCounter, MongoStore, shared_client

    if metrics is None:
        return MongoStore(url)
    counter = CommandCounter(lambda name: metrics.store_commands.labels(name).inc())
    return MongoStore(url, client=shared_client(url, listeners=[counter]), owns_client=True)


def build_locker(settings: Settings, clock: Clock) -> Locker:
    if settings.lock == "local":
        from ticklock.adapters.lock.local import LocalLocker

        return LocalLocker(clock)
    from ticklock.adapters.lock.redis import RedisLocker

    return RedisLocker(settings.lock)


def build_metrics(settings: Settings, owner: str) -> PrometheusMetrics:
    if settings.pushgateway:
        from ticklock.adapters.metrics.pushgateway import PushgatewayMetrics

        return PushgatewayMetrics(settings.pushgateway, owner)
    return PrometheusMetrics()


def build_publisher(settings: Settings, metrics: PrometheusMetrics) -> Publisher:
    if settings.events == "log":
        return LogPublisher()
    if settings.events.startswith("eventbridge:"):
        from ticklock.adapters.events.eventbridge import EventBridgePublisher

        return EventBridgePublisher(settings.events.removeprefix("eventbridge:"), on_drop=metrics.events_dropped.inc)
    return NoPublisher()


def build_runner(
    settings: Settings,
    *,
    store: Store,
    locker: Locker,
    publisher: Publisher,
    metrics: PrometheusMetrics,
    registry: Registry,
    clock: Clock,
    owner: str,
    inline: bool = False,
) -> TaskRunner:
    """The five steps, with an invoker that reports abandoned handler threads to the metrics. ``inline``:
    sync handlers run on the worker's own thread (the caller replaces a worker stuck past a deadline,
    ``Invoker.on_stuck``)."""
    invoker = Invoker(inline=inline)
    invoker.on_abandoned = metrics.abandoned.set
    alerts = Alerts(
        store=store,
        publisher=publisher,
        clock=clock,
        outbox=Outbox(webhook_from(settings), sender_from(settings)),
        defaults=Destinations(webhook=settings.alerts_webhook or None, email=settings.alerts_email),
    )
    return TaskRunner(
        store=store,
        locker=locker,
        publisher=publisher,
        metrics=metrics,
        registry=registry,
        clock=clock,
        invoker=invoker,
        owner=owner,
        lock_failure=LockFailure(settings.lock_failure),
        max_resumes=settings.max_resumes,
        alerts=alerts,
        fire_log=FireLog(settings.fire_log),
        lease=settings.lease_slack,
        lookahead=settings.lookahead,
    )


def build_dispatcher(
    settings: Settings,
    *,
    store: Store,
    queue: FireQueue,
    clock: Clock,
    metrics: PrometheusMetrics,
    owner: str,
    send_ahead: float = 0.0,
    heartbeat: Heartbeat | None = None,
) -> Dispatcher:
    return Dispatcher(
        store=store,
        queue=queue,
        clock=clock,
        metrics=metrics,
        owner=owner,
        batch_size=settings.batch_size,
        lookahead=settings.lookahead,
        max_pending=settings.max_pending,
        lease_slack=settings.lease_slack,
        send_ahead=send_ahead,
        resolution=settings.dispatch_resolution,
        heartbeat=heartbeat,
    )


def build_service(settings: Settings, store: Store, registry: Registry, clock: Clock) -> JobService:
    """Job use cases, within the limits this deployment can honour."""
    return JobService(
        store,
        registry,
        clock,
        Limits(
            max_timeout=settings.effective_max_timeout,
            max_payload_bytes=settings.max_payload_bytes,
            max_timeout_reason=settings.max_timeout_reason,
        ),
    )


log = logging.getLogger("ticklock.housekeeping")


def housekeep(settings: Settings, store: ExecutionStore, clock: Clock, runner: TaskRunner) -> None:
    """Once a minute: judge the jobs' dead-man alerts (``Alerts.check``), finalise the allow_all fires whose runner
    vanished (``TaskRunner.lose_orphans``), prune execution history (``TICKLOCK_RETENTION_*``) and delete
    Pushgateway groups no process has pushed for ``TICKLOCK_METRICS_STALE_AFTER``. Fails soft: logged, tried
    again next time."""
    try:
        runner.lose_orphans()
    except Exception as exc:  # noqa: BLE001 - fails soft like the rest
        log.warning("executions.orphans_failed", extra={"error": str(exc)})
    if runner.alerts is not None:
        try:
            runner.alerts.check()
        except Exception as exc:  # noqa: BLE001 - fails soft like the rest
            log.warning("alerts.check_failed", extra={"error": str(exc)})
    try:
        gone = store.prune_executions(
            older_than=clock.now() - timedelta(days=settings.retention_days), keep_per_job=settings.retention_per_job
        )
        if gone:
            log.info("executions.pruned", extra={"deleted": gone})
    except Exception as exc:  # noqa: BLE001 - pruning fails soft
        log.warning("executions.prune_failed", extra={"error": str(exc)})
    if settings.pushgateway:
        from ticklock.adapters.metrics.pushgateway import delete_stale_groups

        try:
            delete_stale_groups(settings.pushgateway, stale_after=settings.metrics_stale_after)
        except Exception as exc:  # noqa: BLE001 - an odd answer must not end housekeeping
            log.warning("metrics.janitor_failed", extra={"error": str(exc)})
