"""What became of fires: a job's slots in a window (GET /jobs/{id}/fires), and every job's fire
ledger (GET /fires)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ticklock.api.schemas.fields import STRICT, Instant, parse_instant
from ticklock.domain.executions import Execution
from ticklock.domain.ledger import LedgerEntry, Reason, SlotFate
from ticklock.errors import InvalidJob

MAX_WINDOW = timedelta(days=31)  # the longest window /fires accounts for in one answer


LEDGER_REASONS = tuple(r.value for r in Reason)


class FiresQuery(BaseModel):
    model_config = STRICT
    from_: Instant = Field(
        None, alias="from", description="the window's start (RFC 3339); `to` less an hour if left out"
    )
    to: Instant = Field(None, description="the window's end (RFC 3339); now if left out")
    limit: int = Field(100, ge=1, le=1000, description="at most this many fires, the newest")

    def window(self, now: datetime) -> tuple[datetime, datetime]:
        """(start, end); raises ``ValueError`` for an empty or too long one (a 422 on ``query.from``)."""
        end = parse_instant(self.to) if self.to else now
        start = parse_instant(self.from_) if self.from_ else end - timedelta(hours=1)
        if start > end:
            raise InvalidJob("query.from: the window's start is after its end", field="query.from")
        if end - start > MAX_WINDOW:
            raise InvalidJob(f"query.from: a window is at most {MAX_WINDOW.days} days", field="query.from")
        return start, end


class AllFiresQuery(FiresQuery):
    status: Literal["skipped", "missed", "ran", "success", "failed", "timeout", "cancelled", "lost"] | None = Field(
        None, description="only the fires that ended so: not run (skipped, missed), or ran (any final status, or one)"
    )
    reason: Literal[LEDGER_REASONS] | None = Field(None, description="only the fires with this reason")  # type: ignore[valid-type]


class RangeOut(BaseModel):
    first: datetime = Field(description="the first slot of the run of slots this one is part of")
    last: datetime
    count: int = Field(description="how many slots the run has (counted up to 10,000)")


class SlotOut(BaseModel):
    at: datetime = Field(description="the fire's time: a slot of the schedule, or a manual trigger's")
    status: Literal["ran", "skipped", "missed", "due", "upcoming", "paused", "before_created", "unaccounted"]
    reason: str | None = Field(description="why it did not run (skipped, missed), from a closed set")
    trigger: str
    execution_id: str | None = Field(description="the execution, when it ran")
    execution_status: str | None
    range: RangeOut | None = Field(description="set when the ledger holds this slot in a run of slots")

    @staticmethod
    def of(fate: SlotFate) -> SlotOut:
        e, entry = fate.execution, fate.entry
        trigger = e.trigger.value if e else entry.trigger.value if entry else "schedule"
        span = RangeOut(first=entry.first_at, last=entry.last_at, count=entry.count) if entry else None
        return SlotOut(
            at=fate.at,
            status=fate.status,  # type: ignore[arg-type]
            reason=fate.reason,
            trigger=trigger,
            execution_id=e.id if e else None,
            execution_status=e.status.value if e else None,
            range=span if entry and entry.count > 1 else None,
        )


class JobFires(BaseModel):
    job_id: str
    start: datetime = Field(alias="from")
    end: datetime = Field(alias="to")
    items: list[SlotOut] = Field(description="every expected slot of the window and every fire in it, newest first")
    model_config = ConfigDict(serialize_by_alias=True)


class LedgerEntryOut(BaseModel):
    job_id: str
    outcome: str = Field(description="ran, skipped or missed")
    reason: str = Field(description="why it did not run; for a run, its execution's status")
    first_at: datetime
    last_at: datetime
    count: int
    capped: bool
    trigger: str
    recorded_at: datetime = Field(description="when it was decided (a run: when it finished)")
    execution_id: str | None = Field(None, description="the execution, for a run")

    @staticmethod
    def ran(e: Execution) -> LedgerEntryOut:
        return LedgerEntryOut(
            job_id=e.job_id,
            outcome="ran",
            reason=e.status.value,
            first_at=e.scheduled_at,
            last_at=e.scheduled_at,
            count=1,
            capped=False,
            trigger=e.trigger.value,
            recorded_at=e.finished_at or e.started_at,
            execution_id=e.id,
        )

    @staticmethod
    def of(e: LedgerEntry) -> LedgerEntryOut:
        return LedgerEntryOut(
            job_id=e.job_id,
            outcome=e.outcome.value,
            reason=e.reason.value,
            first_at=e.first_at,
            last_at=e.last_at,
            count=e.count,
            capped=e.capped,
            trigger=e.trigger.value,
            recorded_at=e.recorded_at,
            execution_id=None,
        )


class LedgerPage(BaseModel):
    items: list[LedgerEntryOut] = Field(description="the fires of the window, latest first")
