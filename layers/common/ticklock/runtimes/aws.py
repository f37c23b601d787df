"""The Lambda composition root: what the tick, runner and api functions share, built once per container.

A warm container reuses everything built here (store client, Redis client, boto3 clients, the handler
registry), so only a cold start pays for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from ticklock.adapters.metrics.prometheus import PrometheusMetrics
from ticklock.adapters.queue.sqs import decode_fire
from ticklock.clock import Clock, SystemClock
from ticklock.domain.invoke import Invoker
from ticklock.domain.lifecycle import LockFailure, TaskRunner
from ticklock.handlers.registry import Registry, register_all
from ticklock.ports import Publisher, Store
from ticklock.runtimes.wiring import build_locker, build_metrics, build_publisher, build_store
from ticklock.settings import Settings

log = logging.getLogger("ticklock.lambda")


@dataclass
class Container:
    """Everything a runner invocation needs, wired once."""

    settings: Settings
    store: Store
    metrics: PrometheusMetrics
    publisher: Publisher
    runner: TaskRunner


def build(settings: Settings, *, clock: Clock | None = None, registry: Registry | None = None) -> Container:
    clock = clock or SystemClock()
    owner = settings.effective_owner
    metrics = build_metrics(settings, owner)
    store = build_store(settings, metrics)
    publisher = build_publisher(settings, metrics)
    runner = TaskRunner(
        store=store,
        locker=build_locker(settings, clock),
        publisher=publisher,
        metrics=metrics,
        registry=registry or register_all(Registry(), modules=settings.handler_modules),
        clock=clock,
        invoker=Invoker(),
        owner=owner,
        lock_failure=LockFailure(settings.lock_failure),
    )
    return Container(settings, store, metrics, publisher, runner)


@cache
def container() -> Container:
    """The container of this Lambda environment (built on first use, then reused while warm)."""
    return build(Settings.load())


def run_batch(event: dict[str, Any], context: Any, box: Container) -> dict[str, Any]:
    """Run an SQS batch of fires; a record that raises is reported as a batch item failure (retried, then
    dead-lettered) and does not make the others run again. A skip is a success: it was handled."""
    processor = BatchProcessor(event_type=EventType.SQS)

    def record_handler(record: SQSRecord) -> None:
        try:
            fire = decode_fire(record.body)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("fire.undecodable", extra={"message_id": record.message_id, "error": str(exc)})
            raise
        box.runner.run(fire)

    try:
        return dict(
            process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
        )
    finally:
        box.publisher.flush(2.0)
        box.metrics.flush()
