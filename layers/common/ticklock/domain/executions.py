"""An execution, the record of one fire's run, its states, and the summary of a job's runs kept on the job."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ticklock.domain.copies import copied
from ticklock.domain.fires import Trigger


class ExecutionStatus(enum.StrEnum):
    """The states of an execution row. Every state but RUNNING is final."""

    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"  # cut off by a shutdown; the fire is resumed by the next claim
    LOST = "lost"  # its owner vanished too often; given up rather than resumed again
    CANCELLED = "cancelled"  # cut off when the job's next fire came due (overlap policy cancel_other)

    @property
    def final(self) -> bool:
        return self not in (ExecutionStatus.RUNNING, ExecutionStatus.INTERRUPTED)


FAILED_STATUSES = (ExecutionStatus.FAILED, ExecutionStatus.TIMEOUT, ExecutionStatus.LOST)


@dataclass(frozen=True)
class RunSummary:
    """What a job's runs came to, kept on the job as they finish (``Store.finish_execution``): the last
    run's status and when it ended, and how many runs ended and succeeded since the job was created. The
    jobs table shows it and filters on it without reading any execution."""

    status: ExecutionStatus
    at: datetime
    runs: int = 1
    ok: int = 0

    @property
    def failing(self) -> bool:
        """The last run failed, timed out or was lost (a cancelled run is not a failure)."""
        return self.status in FAILED_STATUSES

    @property
    def success_rate(self) -> float:
        return self.ok / self.runs if self.runs else 0.0


@dataclass(frozen=True)
class Execution:
    """The record of one fire: one per fire (its job, trigger and slot, which ``fire_key`` spells)."""

    id: str
    job_id: str
    fire_key: str
    handler: str
    trigger: Trigger
    scheduled_at: datetime
    started_at: datetime
    deadline_at: datetime
    run_token: str
    owner: str
    status: ExecutionStatus = ExecutionStatus.RUNNING
    attempts: int = 0
    resumes: int = 0
    finished_at: datetime | None = None
    duration: float | None = None
    error: str | None = None
    jitter: float = 0.0  # seconds after its slot the fire was due to start (``Policy.max_jitter``)
    detached: bool = False  # its job went on when it started (allow_all): no claim brings it back to resume
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def lag(self) -> float:
        """Seconds from when the fire was due (its slot plus its jitter) to its start."""
        return (self.started_at - self.scheduled_at).total_seconds() - self.jitter

    def with_changes(self, **changes: Any) -> Execution:
        return copied(self, changes)
