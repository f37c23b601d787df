"""A job: its definition, its scheduling state, and the user's holds and backfills it carries."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ticklock.domain.copies import copied
from ticklock.domain.executions import RunSummary
from ticklock.domain.fires import Lease, Trigger
from ticklock.domain.job_settings import AlertRules, Policy
from ticklock.domain.schedules import Schedule

if TYPE_CHECKING:
    from ticklock.domain.fires import Fire


MAX_BACKFILL = 1000  # slots one backfill runs at most


@dataclass(frozen=True)
class Backfill:
    """A job's pending backfill: the past slots of its schedule from ``next_at`` to ``until`` run again, one
    after another (``overlap`` ``buffer_all``) or side by side (``allow_all``), each once: its execution is
    the fire ``<job>:backfill:<slot>``, so a slot asked for twice runs once."""

    next_at: datetime  # the next slot to run
    until: datetime  # the last one may be this, not after
    requested_at: datetime
    overlap: str = "buffer_all"

    def to_dict(self) -> dict[str, Any]:
        return {
            "next_at": self.next_at.isoformat(),
            "until": self.until.isoformat(),
            "requested_at": self.requested_at.isoformat(),
            "overlap": self.overlap,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any] | None) -> Backfill | None:
        if not data:
            return None
        return Backfill(
            next_at=datetime.fromisoformat(data["next_at"]),
            until=datetime.fromisoformat(data["until"]),
            requested_at=datetime.fromisoformat(data["requested_at"]),
            overlap=data.get("overlap", "buffer_all"),
        )


MAX_NOTE = 500  # characters of a pause's or a skip's note
MAX_SKIP = 1000  # fires one skip holds back at most


class HoldKind(enum.StrEnum):
    PAUSE = "pause"  # paused: until resumed, or until an instant
    SKIP = "skip"  # the next ``count`` fires skipped


@dataclass(frozen=True)
class Hold:
    """A user's hold on a job, shown on it: a pause (with a note; until resumed, or until an instant) or
    the next ``count`` fires skipped. A timed hold moves the job's next fire to ``resumes_at``; the slots
    from ``skipped_from`` up to it are the hold's (in the ledger as ``paused`` or ``skip_next``, written
    when the job reaches ``resumes_at``, or when it is resumed early)."""

    kind: HoldKind
    since: datetime  # when it was asked for
    note: str | None = None
    until: datetime | None = None  # a pause's end, as asked; None: until resumed
    skipped_from: datetime | None = None  # the first slot it holds back (the one the job waited for)
    resumes_at: datetime | None = None  # the job's next fire after it; None: until resumed
    count: int | None = None  # fires skipped (a skip)

    def to_dict(self) -> dict[str, Any]:
        def text(moment: datetime | None) -> str | None:
            return None if moment is None else moment.isoformat()

        return {
            "kind": self.kind.value,
            "since": text(self.since),
            "note": self.note,
            "until": text(self.until),
            "skipped_from": text(self.skipped_from),
            "resumes_at": text(self.resumes_at),
            "count": self.count,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any] | None) -> Hold | None:
        if not data:
            return None

        def moment(key: str) -> datetime | None:
            value = data.get(key)
            return None if value is None else datetime.fromisoformat(value)

        since = moment("since")
        if since is None:
            raise ValueError(f"a stored hold has no since: {dict(data)!r}")
        return Hold(
            kind=HoldKind(data["kind"]),
            since=since,
            note=data.get("note"),
            until=moment("until"),
            skipped_from=moment("skipped_from"),
            resumes_at=moment("resumes_at"),
            count=data.get("count"),
        )


@dataclass(frozen=True)
class Job:
    """A job definition and its scheduling state."""

    id: str
    name: str
    handler: str
    schedule: Schedule
    payload: Mapping[str, Any]
    timeout: float
    max_retries: int
    enabled: bool
    next_run_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int = 1
    trigger_at: datetime | None = None
    lease: Lease | None = None
    disabled_reason: str | None = None  # why ticklock (not a user) disabled it; cleared when it is enabled again
    policy: Policy = field(default_factory=Policy)
    hold: Hold | None = None  # kept after it ends (``active_hold`` says whether it still holds)
    alerts: AlertRules | None = None
    # the alerts raised and not cleared: condition -> {"raised_at", "detail"}; written only by
    # ``Store.set_open_alerts`` (a compare-and-set of its own, which leaves the version alone)
    open_alerts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    backfill: Backfill | None = None
    last_run: RunSummary | None = None  # written only by ``Store.finish_execution`` (and ``complete``)

    @property
    def active_hold(self) -> Hold | None:
        """The hold that still holds: a pause of a paused job, or a timed hold the job has not got past."""
        hold = self.hold
        if hold is None:
            return None
        if hold.resumes_at is None:
            return None if self.enabled else hold
        if not self.enabled or self.next_run_at is None or self.next_run_at > hold.resumes_at:
            return None
        return hold

    def due_at(self, now: datetime) -> datetime | None:
        """When the job is next claimable: its earliest pending fire, but never inside a live lease."""
        scheduled = self.next_run_at if self.enabled else None
        backfill = self.backfill.next_at if self.backfill is not None else None
        candidates = [t for t in (self.jittered(scheduled), self.trigger_at, backfill) if t]
        if not candidates:
            return None
        due = min(candidates)
        if self.lease is not None and self.lease.until > now:
            return max(due, self.lease.until)
        return due

    def jittered(self, slot: datetime | None) -> datetime | None:
        """When the scheduled fire at ``slot`` starts: the slot plus its jitter (``Policy.jitter``)."""
        if slot is None or not self.policy.max_jitter:
            return slot
        return slot + timedelta(seconds=self.policy.jitter(self.id, slot))

    def backfill_after(self, slot: datetime) -> Backfill | None:
        """The backfill once its fire at ``slot`` is done: on to the next slot, or none after ``until``
        (a backfill that has moved on since, or been replaced, is kept as it is)."""
        backfill = self.backfill
        if backfill is None or backfill.next_at != slot:
            return backfill
        following = self.schedule.next_after(slot)
        if following is None or following > backfill.until:
            return None
        return replace(backfill, next_at=following)

    def with_changes(self, **changes: Any) -> Job:
        return copied(self, changes)

    def pending_at(self) -> datetime:
        """The time of its earliest pending fire, whatever its state (the order claims are handed out in)."""
        times = [t for t in (self.trigger_at, self.next_run_at) if t is not None]
        return min(times) if times else self.created_at

    def advanced(self, fire: Fire, next_run_at: datetime | None) -> Job:
        """This job (as stored now) once ``fire`` is done: the lease dropped; a scheduled fire moves the
        schedule to ``next_run_at`` (None disables) unless the job was edited since the claim; a manual
        fire clears the pending trigger if it is this fire's."""
        if fire.trigger is Trigger.MANUAL:
            if self.trigger_at == fire.scheduled_at:
                return copied(self, {"lease": None, "trigger_at": None})
            return copied(self, {"lease": None})
        if fire.trigger is Trigger.BACKFILL:
            return copied(self, {"lease": None, "backfill": self.backfill_after(fire.scheduled_at)})
        if self.version != fire.job.version:
            return copied(self, {"lease": None})
        enabled = self.enabled and next_run_at is not None
        return copied(self, {"lease": None, "next_run_at": next_run_at, "enabled": enabled})


def repeated_name(jobs: Sequence[Job]) -> tuple[int, int] | None:
    """The positions of the first name ``jobs`` holds twice (where it first appears, where it repeats)."""
    seen: dict[str, int] = {}
    for at, job in enumerate(jobs):
        first = seen.setdefault(job.name, at)
        if first != at:
            return first, at
    return None
