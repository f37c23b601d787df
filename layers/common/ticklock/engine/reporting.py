"""What a fire's steps tell the world: the log (a line per fire, or a summary line a second), the metrics,
the events on the bus and the alerts. Each of them fails soft: a publisher, metrics or alerts failure is
logged and never fails the run (docs/design.md, "Dependencies fail soft")."""

from __future__ import annotations

import enum
import logging
import math
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ticklock.clock import Clock
from ticklock.domain.alerts import Alerts
from ticklock.domain.events import ExecutionEvent
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fires import Fire
from ticklock.domain.jobs import Job
from ticklock.domain.ledger import LedgerEntry
from ticklock.ports import Metrics, Publisher

log = logging.getLogger("ticklock.lifecycle")


class FireLog(enum.StrEnum):
    """What the log says of a fire that runs without trouble (trouble is logged per fire either way)."""

    SUMMARY = "summary"  # one ``fires.summary`` line per interval, counting the fires started and finished
    EACH = "each"  # an ``execution.started`` and an ``execution.finished`` line per fire


def fields_of(fire: Fire) -> dict[str, Any]:
    """The log fields of a fire."""
    job = fire.job
    return {
        "job_id": job.id,
        "job_name": job.name,
        "fire_time": fire.scheduled_at.isoformat(),
        "trigger": fire.trigger.value,
        "handler": job.handler,
    }


def safely(event: str, fields: dict[str, Any], func: Callable[..., Any], *args: Any) -> None:
    """``func(*args)``, its failure logged as ``event``: for the parts of a fire that fail soft."""
    try:
        func(*args)
    except Exception as exc:  # noqa: BLE001 - events, metrics and alerts fail soft
        log.warning(event, extra={**fields, "error": f"{type(exc).__name__}: {exc}"})


class FireTally:
    """The fires since the last summary line (``FireLog.SUMMARY``: a line per fire is more CPU than the
    store's work for it). Thread-safe; ``flush`` writes the line, if any fire ran, and starts afresh."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._mutex = threading.Lock()
        self._since = clock.now()
        self._started = 0
        self._lag_total = 0.0
        self._lag_max = -math.inf
        self._finished: dict[str, int] = {}
        self._handlers: dict[str, int] = {}

    def started(self, handler: str, lag: float) -> None:
        with self._mutex:
            self._started += 1
            self._lag_total += lag
            self._lag_max = max(self._lag_max, lag)
            self._handlers[handler] = self._handlers.get(handler, 0) + 1

    def finished(self, status: ExecutionStatus) -> None:
        with self._mutex:
            self._finished[status.value] = self._finished.get(status.value, 0) + 1

    def flush(self) -> None:
        now = self._clock.now()
        with self._mutex:
            started, lag_total, lag_max = self._started, self._lag_total, self._lag_max
            finished, handlers, since = self._finished, self._handlers, self._since
            self._started, self._lag_total, self._lag_max, self._finished, self._handlers = 0, 0.0, -math.inf, {}, {}
            self._since = now
        if not started and not finished:
            return
        log.info(
            "fires.summary",
            extra={
                "since": since.isoformat(),
                "seconds": round((now - since).total_seconds(), 3),
                "started": started,
                "finished": finished,
                "handlers": handlers,
                "lag_mean": round(lag_total / started, 6) if started else None,
                "lag_max": round(lag_max, 6) if started else None,
            },
        )


class Reporter:
    """The log lines, measures, events and alerts of the fires' steps."""

    def __init__(
        self, *, metrics: Metrics, publisher: Publisher, clock: Clock, alerts: Alerts | None, fire_log: FireLog
    ) -> None:
        self.metrics = metrics
        self.publisher = publisher
        self.clock = clock
        self.alerts = alerts
        self.fire_log = fire_log
        self.tally = FireTally(clock)

    def started(self, fire: Fire, execution: Execution, fields: dict[str, Any], now: datetime) -> None:
        """A fire's execution is recorded (step 2): its run begins."""
        handler = execution.handler
        if self.fire_log is FireLog.EACH:
            log.info(
                "execution.started",
                extra={**fields, "execution_id": execution.id, "lag": round(execution.lag, 6),
                       "resumes": execution.resumes},
            )  # fmt: skip
        else:
            self.tally.started(handler, execution.lag)
        safely("metrics.failed", fields, self.metrics.fire_started, handler, execution.lag)
        job = fire.job
        if self.publisher.publishes:
            safely("publish.failed", fields, self.publisher.publish, ExecutionEvent.started(execution, job.name, now))
        if self.alerts is not None and job.open_alerts:
            safely("alert.failed", fields, self.alerts.started, job)

    def finished(self, fire: Fire, done: Execution, attempts: int, fields: dict[str, Any], *, advanced: bool) -> None:
        """A run's final write landed (step 4; ``advanced``: step 5's too)."""
        if not advanced:
            log.warning("fire.advance_lost", extra=fields)
        if done.status is not ExecutionStatus.INTERRUPTED:
            safely("metrics.failed", fields, self.metrics.fires_accounted, "ran", done.status.value, 1)
        succeeded = done.status is ExecutionStatus.SUCCESS
        if self.fire_log is FireLog.SUMMARY:
            self.tally.finished(done.status)
        if not succeeded or self.fire_log is FireLog.EACH:
            log.log(
                logging.INFO if succeeded else logging.WARNING,
                "execution.finished",
                extra={**fields, "status": done.status.value, "attempts": done.attempts, "duration": done.duration,
                       "error": done.error},
            )  # fmt: skip
        duration = done.duration or 0.0
        safely(
            "metrics.failed", fields, self.metrics.fire_finished, done.handler, done.status.value, duration, attempts
        )
        if self.publisher.publishes:
            safely("publish.failed", fields, self.publisher.publish, ExecutionEvent.finished(done, fire.job.name))
        if self.alerts is not None and (fire.job.alerts is not None or fire.job.open_alerts):
            safely("alert.failed", fields, self.alerts.finished, fire.job, done)

    def lost(self, lost: Execution, job: Job | None) -> None:
        """An execution was finalised as LOST (its runner gone, or given up)."""
        fields = {"job_id": lost.job_id, "fire_time": lost.scheduled_at.isoformat(), "execution_id": lost.id}
        log.error("execution.lost", extra={**fields, "error": lost.error})
        safely("metrics.failed", fields, self.metrics.fire_finished, lost.handler, lost.status.value, 0.0, 0)
        safely("metrics.failed", fields, self.metrics.fires_accounted, "ran", lost.status.value, 1)
        event = ExecutionEvent.finished(lost, job.name if job else "")
        safely("publish.failed", fields, self.publisher.publish, event)
        if self.alerts is not None and job is not None and job.alerts is not None:
            safely("alert.failed", fields, self.alerts.finished, job, lost)  # lost is a failure too

    def skipped(self, fire: Fire, reason: str) -> None:
        fields = {"job_id": fire.job.id, "fire_time": fire.scheduled_at.isoformat()}
        safely("metrics.failed", fields, self.metrics.fire_skipped, fire.job.handler, reason)

    def accounted(self, fire: Fire, entry: LedgerEntry) -> None:
        """A ledger entry was written: slots that did not run."""
        fields = {"job_id": fire.job.id, "fire_time": entry.first_at.isoformat(), "reason": entry.reason.value}
        log.info(
            f"fire.{entry.outcome.value}", extra={**fields, "count": entry.count, "last": entry.last_at.isoformat()}
        )
        accounted = self.metrics.fires_accounted
        safely("metrics.failed", fields, accounted, entry.outcome.value, entry.reason.value, entry.count)
        event = ExecutionEvent.not_run(entry, fire.job.name, fire.job.handler)
        safely("publish.failed", fields, self.publisher.publish, event)

    def disabled(self, fire: Fire, reason: str, execution: Execution | None) -> None:
        """A job was disabled: its schedule found no next fire."""
        fields = {"job_id": fire.job.id, "fire_time": fire.scheduled_at.isoformat()}
        safely("metrics.failed", fields, self.metrics.job_disabled, fire.job.handler)
        if execution is not None:
            event = ExecutionEvent.disabled(execution, fire.job.name, reason, self.clock.now())
            safely("publish.failed", fields, self.publisher.publish, event)
