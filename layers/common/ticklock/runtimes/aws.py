"""The Lambda composition root: what the tick, runner and api functions share, built once per container.

A warm container reuses everything built here (store client, Redis client, boto3 clients, the handler
registry), so only a cold start pays for it. The three functions in ``functions/`` are thin: each calls
one of ``tick``, ``run_batch`` or ``api`` below with ``container()``.

Timing rules of the deployment (README, "Deploy on AWS"): the runner's timeout bounds every job's
(``Settings.effective_max_timeout``); a fire message is valid while its claim lasts; a message that keeps
failing is recorded as LOST on its last delivery and then dead-lettered by SQS.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType, async_process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from ticklock.adapters.metrics.prometheus import PrometheusMetrics
from ticklock.adapters.queue.sqs import SQSQueue, decode_fire, sqs_client
from ticklock.clock import Clock, SystemClock
from ticklock.domain.service import JobService
from ticklock.engine.fire_path import TaskRunner
from ticklock.engine.tick_loop import TickLoop
from ticklock.errors import ConfigError
from ticklock.handlers.contract import Registry
from ticklock.ports import Locker, Publisher, Store
from ticklock.runtimes.plugins import Plugins
from ticklock.runtimes.wiring import (
    build_dispatcher,
    build_locker,
    build_metrics,
    build_publisher,
    build_runner,
    build_service,
    build_store,
    housekeep,
)
from ticklock.settings import Settings

if TYPE_CHECKING:  # the API stack (routes, OpenAPI, pydantic models) is imported by the api function only
    from ticklock.api.app import Api

log = logging.getLogger("ticklock.lambda")

TICK_MARGIN = 5.0  # seconds of the tick invocation kept for giving held fires back and flushing metrics
# the tick sends fires this early, in windows of half of it, so that SendMessageBatch calls go out full
# (fires spread over each second would otherwise go out as calls of one message each); the runner then
# waits for each fire's time, so SQS's own delivery delay is hidden as well
SEND_AHEAD = 0.2
# records of one SQS batch run at once, each on a thread of this many: the template's BatchSize is at most 10
RUNNER_THREADS = 10


@dataclass
class Container:
    """Everything an invocation needs, wired once per Lambda environment."""

    settings: Settings
    clock: Clock
    owner: str
    store: Store
    locker: Locker
    metrics: PrometheusMetrics
    publisher: Publisher
    registry: Registry
    plugins: Plugins
    runner: TaskRunner
    pool: ThreadPoolExecutor  # the runner's threads, one per record of a batch
    api: Api | None = None  # the API's, built on its first request
    beating: threading.Event = field(default_factory=threading.Event)  # set: the heartbeat stops

    def close(self) -> None:
        """Stop the threads and close the clients (Lambda never calls it: an environment just ends)."""
        self.beating.set()
        self.pool.shutdown(wait=False)
        self.runner.invoker.close()
        if self.runner.alerts is not None:
            self.runner.alerts.close()
        self.publisher.flush(1.0)
        self.store.close()


def build(settings: Settings, *, clock: Clock | None = None, registry: Registry | None = None) -> Container:
    clock = clock or SystemClock()
    # a Lambda environment's log stream names it uniquely; host:pid does not
    owner = settings.owner or os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME") or settings.effective_owner
    metrics = build_metrics(settings, owner)
    store = build_store(settings, metrics)
    locker = build_locker(settings, clock)
    publisher = build_publisher(settings, metrics)
    plugins = Plugins(settings)
    registry = registry or plugins.registry()
    runner = build_runner(
        settings,
        store=store,
        locker=locker,
        publisher=publisher,
        metrics=metrics,
        registry=registry,
        clock=clock,
        owner=owner,
    )
    pool = ThreadPoolExecutor(max_workers=RUNNER_THREADS, thread_name_prefix="ticklock-runner")
    box = Container(settings, clock, owner, store, locker, metrics, publisher, registry, plugins, runner, pool)
    # keeps the claims of the fires the runner runs (a frozen environment beats again when it thaws)
    threading.Thread(target=runner.heartbeat.run, args=(box.beating,), name="ticklock-heartbeat", daemon=True).start()
    return box


@cache
def container() -> Container:
    """The container of this Lambda environment (built on first use, then reused while warm)."""
    settings = Settings.load().with_secrets(read_secret)
    configure_logging(settings.log_level)
    box = build(settings)
    box.plugins.warn_deprecated()
    box.plugins.seed(_service(box))  # idempotent by name: every cold start may try
    return box


def read_secret(name: str) -> str:
    """A secret's string, read from Secrets Manager by powertools' parameters utility, once per Lambda
    environment (``container`` is built once): the function's environment holds the secret's name, never
    its value, and a rotated secret reaches each new environment without a redeploy. ``ConfigError`` if it
    cannot be read, with the service's reason (which never holds the value)."""
    from aws_lambda_powertools.utilities import parameters

    try:
        value = parameters.get_secret(name, force_fetch=True)
    except parameters.exceptions.GetParameterError as exc:
        raise ConfigError(f"the secret {name!r} could not be read: {exc}") from None
    if not isinstance(value, str):
        raise ConfigError(f"the secret {name!r} is not a string secret")
    return value


_logger: Logger | None = None


def configure_logging(level: str) -> Logger:
    """powertools' JSON formatter on the root logger, so every ``ticklock.*`` line (and every handler's)
    is one JSON object with the service, the Lambda context and its fields; ``run_batch`` adds the job
    id and fire time of the record a thread is working on to each line it logs."""
    global _logger
    if _logger is None:
        _logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "ticklock"), level=level.upper())
        _logger.registered_handler.addFilter(_name_the_logger)
        # the handler moves to the root logger alone: a logger named like the service ("ticklock") is the
        # parent of ticklock's own loggers, and would print each of their lines twice
        logging.getLogger(_logger.name).removeHandler(_logger.registered_handler)
    root = logging.getLogger()
    root.handlers[:] = [_logger.registered_handler]
    root.setLevel(level.upper())
    return _logger


def _name_the_logger(record: logging.LogRecord) -> bool:
    record.logger = record.name
    return True


def _thread_keys(**keys: str) -> None:
    if _logger is not None:
        _logger.thread_safe_append_keys(**keys)


def _clear_thread_keys() -> None:
    if _logger is not None:
        _logger.thread_safe_clear_keys()


@cache
def _sqs() -> Any:
    """The SQS client of this environment: made on the first tick, reused by every later one."""
    return sqs_client()


# -- tick ---------------------------------------------------------------------------------------------------
def tick(context: Any, box: Container, *, loop: TickLoop | None = None) -> dict[str, Any]:
    """One EventBridge invocation: per-second ticks for about a minute under the tick lease."""
    s = box.settings
    if not s.queue_url:
        raise ConfigError("TICKLOCK_QUEUE_URL must name the SQS queue the tick function sends fires to")
    if loop is None:
        dispatcher = build_dispatcher(
            s,
            store=box.store,
            queue=SQSQueue(s.queue_url, client=_sqs()),
            clock=box.clock,
            metrics=box.metrics,
            owner=box.owner,
            send_ahead=SEND_AHEAD,
        )
        loop = TickLoop(dispatcher=dispatcher, locker=box.locker, clock=box.clock)
    remaining = context.get_remaining_time_in_millis() / 1000 if context is not None else 75.0
    # the minute's housekeeping (history pruning, stale Pushgateway groups), as `ticklock serve` does it
    chores = threading.Thread(
        target=housekeep, args=(s, box.store, box.clock, box.runner), name="ticklock-housekeeping"
    )
    chores.start()
    try:
        return loop.run(budget=max(0.0, remaining - TICK_MARGIN)).as_dict()
    finally:
        chores.join(timeout=1.0)
        if box.runner.alerts is not None:
            box.runner.alerts.flush(2.0)
        box.metrics.flush()


# -- runner -------------------------------------------------------------------------------------------------
def run_batch(event: dict[str, Any], context: Any, box: Container) -> dict[str, Any]:
    """Run an SQS batch of fires through powertools' batch processor, which answers Lambda's partial batch
    response: a record that raised is listed in ``batchItemFailures``, SQS delivers it again, and the others
    are not re-run. On its last delivery (``TICKLOCK_MAX_RECEIVES``, the queue's maxReceiveCount) a failing
    fire is first recorded as LOST and its job advanced, then dead-lettered. A skip is a success: the fire
    was handled.

    The async processor awaits every record at once, each on a thread of ``box.pool``, so the runner's
    timeout bounds one job, not a batch of them. A batch whose records all failed is reported record by
    record too (``raise_on_entire_batch_failure=False``), so every failure goes through the same
    receive-count rule."""
    try:
        if not event.get("Records"):  # a warm-up invocation: the processor refuses an event without records
            return {"batchItemFailures": []}

        async def record_handler(record: SQSRecord) -> None:
            # the container's pool: asyncio's default one has min(32, cpus + 4) threads, 6 on a 2-vCPU
            # Lambda, which would hold the rest of a batch of 10 behind six long jobs
            try:
                running = asyncio.get_running_loop().run_in_executor(box.pool, _run_record, record, box)
            except RuntimeError as exc:  # the pool is shut down: this record comes back, the others go on
                log.error("fire.not_started", extra={"error": str(exc), "message_id": record.message_id})
                raise
            await running

        # one processor per invocation: it holds the batch's results, and tests run batches side by side
        processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        return dict(async_process_partial_response(event, record_handler, processor, context))
    finally:
        box.runner.tally.flush()  # the invocation's fires, in one line (TICKLOCK_FIRE_LOG=summary)
        box.publisher.flush(2.0)
        if box.runner.alerts is not None:
            box.runner.alerts.flush(2.0)
        box.metrics.flush()


def _run_record(record: SQSRecord, box: Container) -> None:
    """One record, on a thread of its own: decode its fire, wait for its time, run it; raise if it failed."""
    _thread_keys(message_id=record.message_id)
    try:
        body = record.get("body") or ""
        try:
            fire = decode_fire(body)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("fire.undecodable", extra={"error": str(exc), "body": body[:200]})
            raise
        _thread_keys(job_id=fire.job.id, fire_time=fire.scheduled_at.isoformat())
        early = (fire.due - box.clock.now()).total_seconds()
        if 0 < early <= 2 * SEND_AHEAD:  # sent ahead: start it on time (a larger gap is clock skew)
            box.clock.sleep(early)
        try:
            box.runner.run(fire)
        except Exception as exc:
            deliveries, max_receives = _deliveries(record), box.settings.max_receives
            log.exception("fire.failed", extra={"deliveries": deliveries, "max_receives": max_receives})
            if deliveries >= max_receives:
                error = f"dead-lettered after {deliveries} deliveries: {type(exc).__name__}: {exc}"
                try:
                    box.runner.give_up(fire, error)
                except Exception as inner:  # noqa: BLE001 - the claim's lease runs out and it is claimed again
                    log.error("fire.give_up_failed", extra={"error": str(inner)})
            raise
    finally:
        _clear_thread_keys()


def _deliveries(record: SQSRecord) -> int:
    try:
        return int((record.get("attributes") or {}).get("ApproximateReceiveCount") or 1)
    except (TypeError, ValueError):
        return 1


# -- api ----------------------------------------------------------------------------------------------------
def _service(box: Container) -> JobService:
    return build_service(box.settings, box.store, box.registry, box.clock)


def _api(box: Container) -> Api:
    if box.api is not None:
        return box.api
    from ticklock.api.app import Api
    from ticklock.api.routes import ApiDeps

    s = box.settings
    # API Gateway authorises (IAM) and throttles before the function runs; a token is an extra, optional check
    deps = ApiDeps(_service(box), None, box.plugins.health_checks())
    box.api = Api(deps, api_token=s.api_token, max_body_bytes=s.max_payload_bytes + 16 * 1024)
    return box.api


def api(event: dict[str, Any], context: Any, box: Container) -> dict[str, Any]:
    """One API Gateway (REST, proxy integration) request through the same routes as ``ticklock serve``."""
    from ticklock.api.gateway import handle_event

    return handle_event(_api(box), event)
