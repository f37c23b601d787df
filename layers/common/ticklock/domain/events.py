"""Execution events, as published on the event bus."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.ledger import LedgerEntry

STARTED = "job.execution.started"
DISABLED = "job.disabled"
NOT_RUN = {"skipped": "job.fire.skipped", "missed": "job.fire.missed"}
_FINISHED = {
    ExecutionStatus.SUCCESS: "job.execution.succeeded",
    ExecutionStatus.FAILED: "job.execution.failed",
    ExecutionStatus.TIMEOUT: "job.execution.timeout",
    ExecutionStatus.INTERRUPTED: "job.execution.interrupted",
    ExecutionStatus.LOST: "job.execution.lost",
    ExecutionStatus.CANCELLED: "job.execution.cancelled",
}


@dataclass(frozen=True)
class ExecutionEvent:
    """What happened to one execution, in a shape any bus can carry."""

    detail_type: str
    job_id: str
    job_name: str
    handler: str
    execution_id: str
    fire_time: datetime
    attempt: int
    at: datetime
    status: str
    duration: float | None = None
    error: str | None = None
    reason: str | None = None  # a fire that did not run: why (a ledger reason), how many slots, the last
    count: int | None = None
    last_fire_time: datetime | None = None
    alert: Mapping[str, Any] | None = None  # an alert raised or cleared: its document

    @staticmethod
    def alert_of(
        detail_type: str, job_id: str, job_name: str, document: Mapping[str, Any], at: datetime
    ) -> ExecutionEvent:
        """An alert raised or cleared (``job.alert.raised`` / ``.cleared``): ``document`` is its detail."""
        return ExecutionEvent(detail_type, job_id, job_name, "", "", at, 0, at, "alert", alert=document)

    @staticmethod
    def not_run(entry: LedgerEntry, job_name: str, handler: str) -> ExecutionEvent:
        """A fire (or a run of them) that did not run: ``job.fire.skipped`` / ``job.fire.missed``."""
        return ExecutionEvent(
            NOT_RUN[entry.outcome.value],
            entry.job_id,
            job_name,
            handler,
            "",
            entry.first_at,
            0,
            entry.recorded_at,
            entry.outcome.value,
            reason=entry.reason.value,
            count=entry.count,
            last_fire_time=entry.last_at,
        )

    @staticmethod
    def started(execution: Execution, job_name: str, at: datetime) -> ExecutionEvent:
        return ExecutionEvent._about(execution, job_name, STARTED, at, execution.status.value)

    @staticmethod
    def disabled(execution: Execution, job_name: str, reason: str, at: datetime) -> ExecutionEvent:
        """The job of ``execution`` was disabled after it: its schedule found no next fire."""
        return ExecutionEvent._about(execution, job_name, DISABLED, at, "disabled", error=reason)

    @staticmethod
    def finished(execution: Execution, job_name: str) -> ExecutionEvent:
        at = execution.finished_at or execution.started_at
        return ExecutionEvent._about(
            execution,
            job_name,
            _FINISHED[execution.status],
            at,
            execution.status.value,
            duration=execution.duration,
            error=execution.error,
        )

    @staticmethod
    def _about(
        execution: Execution,
        job_name: str,
        detail_type: str,
        at: datetime,
        status: str,
        *,
        duration: float | None = None,
        error: str | None = None,
    ) -> ExecutionEvent:
        return ExecutionEvent(
            detail_type,
            execution.job_id,
            job_name,
            execution.handler,
            execution.id,
            execution.scheduled_at,
            execution.attempts,
            at,
            status,
            duration,
            error,
        )

    def detail(self) -> dict[str, Any]:
        if self.alert is not None:
            return dict(self.alert)
        return {
            "job_id": self.job_id,
            "job_name": self.job_name,
            "handler": self.handler,
            "execution_id": self.execution_id,
            "fire_time": self.fire_time.isoformat(),
            "attempt": self.attempt,
            "status": self.status,
            "duration": self.duration,
            "error": self.error,
            "at": self.at.isoformat(),
            **(
                {}
                if self.reason is None
                else {
                    "reason": self.reason,
                    "count": self.count,
                    "last_fire_time": self.last_fire_time.isoformat() if self.last_fire_time else None,
                }
            ),
        }
