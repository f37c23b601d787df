"""Jobs, fires and executions: the core's one representation of each concept."""

from __future__ import annotations

import enum
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ticklock.domain.schedules import Schedule
from ticklock.errors import InvalidJob

LOCK_MARGIN = 5.0  # seconds a job's lock outlives its timeout (the reference's timeout + 5 s)


class Trigger(enum.StrEnum):
    """Why a fire exists: its schedule came due, or someone asked for a run now."""

    SCHEDULE = "schedule"
    MANUAL = "manual"
    BACKFILL = "backfill"  # a past slot of its schedule, asked for again (``POST /jobs/{id}/backfill``)


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


MAX_CATCHUP_WINDOW = 30 * 86400.0
MAX_JITTER = 3600.0
BUFFER_ALL_CAP = 100  # fires buffer_all keeps waiting at most; older ones are skipped


class Overlap(enum.StrEnum):
    """What happens to a job's fire that comes due while its previous run is still going (Temporal's
    names). Runs of one job never overlap, except under ``allow_all``."""

    SKIP = "skip"  # it is skipped (overlap_skip); the job goes on at its next slot after the run
    BUFFER_ONE = "buffer_one"  # the latest such fire runs right after; the others are skipped
    BUFFER_ALL = "buffer_all"  # each runs in turn, oldest first; past BUFFER_ALL_CAP the oldest are skipped
    CANCEL_OTHER = "cancel_other"  # the running attempt is cancelled, and the new fire starts when it ends
    ALLOW_ALL = "allow_all"  # it starts at its time, beside the run that goes on


POLICY_FIELDS = ("catchup_window", "overlap", "max_jitter")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLI = timedelta(milliseconds=1)


@dataclass(frozen=True)
class Policy:
    """How a job's fires are decided, beyond its schedule. The defaults are ticklock's behaviour before
    there were policies.

    ``catchup_window``: seconds a scheduled fire may be late and still run (once, carrying its own time);
    a fire later than that is ``missed`` with ``catchup_window_passed`` and the job moves on. None: any
    lateness is caught up.

    ``overlap``: an ``Overlap``, for the slots that come due while a run goes on.

    ``max_jitter``: each scheduled fire starts up to this many seconds after its slot, by an offset
    drawn from the job and the slot (``jitter``): the same on every replica and every retry."""

    catchup_window: float | None = None
    overlap: Overlap = Overlap.SKIP
    max_jitter: float = 0.0

    def __post_init__(self) -> None:
        window = self.catchup_window
        if window is not None:
            window = _seconds(window, "policy.catchup_window", "or null")
            if not 1.0 <= window <= MAX_CATCHUP_WINDOW:
                raise InvalidJob(
                    f"must be from 1 to {MAX_CATCHUP_WINDOW:g} seconds, got {window:g}", field="policy.catchup_window"
                )
            object.__setattr__(self, "catchup_window", window)  # 300 and 300.0 are one policy
        if not isinstance(self.overlap, Overlap):
            if self.overlap not in tuple(Overlap):
                choices = ", ".join(o.value for o in Overlap)
                raise InvalidJob(f"must be one of {choices}, not {self.overlap!r}", field="policy.overlap")
            object.__setattr__(self, "overlap", Overlap(self.overlap))
        jitter = _seconds(self.max_jitter, "policy.max_jitter", "")
        if not 0.0 <= jitter <= MAX_JITTER:
            raise InvalidJob(f"must be from 0 to {MAX_JITTER:g} seconds, got {jitter:g}", field="policy.max_jitter")
        object.__setattr__(self, "max_jitter", jitter)

    def jitter(self, job_id: str, slot: datetime) -> float:
        """The offset of the fire at ``slot``, in whole milliseconds from 0 to ``max_jitter``: a hash of
        the job and the slot, so every replica and every retry of the fire agrees on it."""
        if not self.max_jitter:
            return 0.0
        # the slot in whole milliseconds: MongoDB keeps times to the millisecond, and an interval job's slot
        # (now + interval) has microseconds, so the stored slot and the computed one hash alike
        millis = (slot - _EPOCH) // _MILLI
        digest = hashlib.blake2b(f"{job_id}:{millis}".encode(), digest_size=8).digest()
        return (int.from_bytes(digest) * (math.floor(self.max_jitter * 1000) + 1) >> 64) / 1000

    def to_dict(self) -> dict[str, Any]:
        """Every field (the API shows them all)."""
        return {"catchup_window": self.catchup_window, "overlap": self.overlap.value, "max_jitter": self.max_jitter}

    def to_record(self) -> dict[str, Any]:
        """The fields as stored and sent: ``catchup_window``, and the others only when they are not their
        default, so that a release from before them (which refuses fields it does not know) still reads
        the records of jobs that do not use them, in a store or an SQS message, during a rolling deploy."""
        record: dict[str, Any] = {"catchup_window": self.catchup_window}
        if self.overlap is not Overlap.SKIP:
            record["overlap"] = self.overlap.value
        if self.max_jitter:
            record["max_jitter"] = self.max_jitter
        return record

    @staticmethod
    def from_dict(data: Mapping[str, Any] | None) -> Policy:
        """A stored or given policy; keys it does not know are refused, missing ones take their default."""
        data = data or {}
        unknown = set(data) - set(POLICY_FIELDS)
        if unknown:
            raise InvalidJob(f"unknown policy field {sorted(unknown)[0]!r}", field="policy")
        defaults = Policy()
        return Policy(**{name: data.get(name, getattr(defaults, name)) for name in POLICY_FIELDS})


def _seconds(value: Any, where: str, alternative: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidJob(f"must be a number of seconds{' ' + alternative if alternative else ''}", field=where)
    return float(value)


MAX_ALERT_SECONDS = 366 * 86400.0
MAX_FAILURES_IN_A_ROW = 1000


class Condition(enum.StrEnum):
    """What an alert says about a job."""

    LATE = "late"  # a fire did not start within ``late_after`` seconds of when it was due
    NO_SUCCESS = "no_success"  # no run succeeded for ``no_success_for`` seconds
    FAILURES = "failures_in_a_row"  # the last ``failures_in_a_row`` runs all failed


ALERT_FIELDS = ("late_after", "no_success_for", "failures_in_a_row", "webhook", "email")


@dataclass(frozen=True)
class AlertRules:
    """When a job's alerts are raised, and where they go beside the event bus (a webhook, an email
    address; either defaults to the deployment's, ``TICKLOCK_ALERTS_WEBHOOK`` / ``TICKLOCK_ALERTS_EMAIL``).
    A rule left out (None) is not checked."""

    late_after: float | None = None
    no_success_for: float | None = None
    failures_in_a_row: int | None = None
    webhook: str | None = None
    email: str | None = None

    def __post_init__(self) -> None:
        for name in ("late_after", "no_success_for"):
            value = getattr(self, name)
            if value is None:
                continue
            seconds = _seconds(value, f"alerts.{name}", "or null")
            if not 1.0 <= seconds <= MAX_ALERT_SECONDS:
                raise InvalidJob(
                    f"must be from 1 to {MAX_ALERT_SECONDS:g} seconds, got {seconds:g}", field=f"alerts.{name}"
                )
            object.__setattr__(self, name, seconds)
        count = self.failures_in_a_row
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_FAILURES_IN_A_ROW
        ):
            raise InvalidJob(
                f"must be a whole number from 1 to {MAX_FAILURES_IN_A_ROW}", field="alerts.failures_in_a_row"
            )
        url = self.webhook
        if url is not None and (not isinstance(url, str) or len(url) > 2000 or not _http_url(url)):
            raise InvalidJob("must be an http(s) URL with a host, of at most 2,000 characters", field="alerts.webhook")
        address = self.email
        if address is not None and (
            not isinstance(address, str)
            or len(address) > 320
            or "@" not in address
            or any(c in address for c in "\r\n")
        ):
            raise InvalidJob("must be an email address", field="alerts.email")

    @property
    def checked(self) -> bool:
        return any(v is not None for v in (self.late_after, self.no_success_for, self.failures_in_a_row))

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ALERT_FIELDS}

    @staticmethod
    def from_dict(data: Mapping[str, Any] | None) -> AlertRules | None:
        """Given or stored rules; None (or {}) is no alerts. Unknown keys are refused."""
        if not data:
            return None
        unknown = set(data) - set(ALERT_FIELDS)
        if unknown:
            raise InvalidJob(f"unknown alerts field {sorted(unknown)[0]!r}", field="alerts")
        return AlertRules(**{name: data.get(name) for name in ALERT_FIELDS})


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
class Lease:
    """A claim on a job: while it holds, no other claimer can take the job."""

    token: str
    owner: str
    until: datetime


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
        return _changed(self, changes)

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
                return _changed(self, {"lease": None, "trigger_at": None})
            return _changed(self, {"lease": None})
        if fire.trigger is Trigger.BACKFILL:
            return _changed(self, {"lease": None, "backfill": self.backfill_after(fire.scheduled_at)})
        if self.version != fire.job.version:
            return _changed(self, {"lease": None})
        enabled = self.enabled and next_run_at is not None
        return _changed(self, {"lease": None, "next_run_at": next_run_at, "enabled": enabled})


def _http_url(url: str) -> bool:
    """An http(s) URL with a host, that parses (``http://[x`` does not: an IPv6 host left open)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not any(c.isspace() for c in url)


_T = TypeVar("_T", "Job", "Execution")


def _changed(record: _T, changes: Mapping[str, Any]) -> _T:
    """``dataclasses.replace`` for Job and Execution, which validate nothing in ``__init__``: a copy of the
    fields with ``changes`` over them. ``replace`` rebuilds every field through ``__init__``, and every fire
    copies a few of these (``bench/records.py`` measures both)."""
    names = _FIELD_NAMES.get(type(record))
    if names is None:  # a subclass: what dataclasses does
        return replace(record, **changes)
    unknown = changes.keys() - names
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {', '.join(sorted(unknown))}")
    copy = object.__new__(type(record))
    values = copy.__dict__
    values.update(record.__dict__)
    values.update(changes)
    return copy


def repeated_name(jobs: Sequence[Job]) -> tuple[int, int] | None:
    """The positions of the first name ``jobs`` holds twice (where it first appears, where it repeats)."""
    seen: dict[str, int] = {}
    for at, job in enumerate(jobs):
        first = seen.setdefault(job.name, at)
        if first != at:
            return first, at
    return None


@dataclass(frozen=True)
class Fire:
    """One scheduled (or triggered) run of a job: its identity is (job id, trigger, time)."""

    job: Job
    scheduled_at: datetime
    trigger: Trigger
    lease_token: str

    @property
    def key(self) -> str:
        return fire_key(self.job.id, self.trigger, self.scheduled_at)

    @property
    def jitter(self) -> float:
        """Seconds after its slot the fire starts (a manual fire has none: it was asked for now)."""
        return self.job.policy.jitter(self.job.id, self.scheduled_at) if self.trigger is Trigger.SCHEDULE else 0.0

    @property
    def due(self) -> datetime:
        """When the fire starts: its slot plus its jitter."""
        if self.trigger is not Trigger.SCHEDULE:
            return self.scheduled_at
        return self.job.jittered(self.scheduled_at) or self.scheduled_at

    @staticmethod
    def of(job: Job, horizon: datetime | None = None) -> Fire:
        """The fire a freshly claimed job stands for: a pending trigger first, else its schedule; a backfill's
        next slot when neither is due by ``horizon`` (the claim's; None: when neither is pending)."""
        if job.lease is None:
            raise ValueError("only a claimed job has a fire")
        scheduled = job.next_run_at if job.enabled else None
        if job.backfill is not None and job.trigger_at is None:
            due = job.jittered(scheduled)
            if due is None or (horizon is not None and due > horizon):
                return Fire(job, job.backfill.next_at, Trigger.BACKFILL, job.lease.token)
        if job.trigger_at is not None and (
            scheduled is None or job.trigger_at <= (job.jittered(scheduled) or scheduled)
        ):
            return Fire(job, job.trigger_at, Trigger.MANUAL, job.lease.token)
        if scheduled is None:
            raise ValueError(f"job {job.id} was claimed with nothing due")
        return Fire(job, scheduled, Trigger.SCHEDULE, job.lease.token)


def fire_key(job_id: str, trigger: Trigger, scheduled_at: datetime) -> str:
    micros = int(scheduled_at.timestamp() * 1_000_000)
    return f"{job_id}:{trigger.value}:{micros}"


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
        return _changed(self, changes)


_FIELD_NAMES: dict[type, frozenset[str]] = {kind: frozenset(f.name for f in fields(kind)) for kind in (Job, Execution)}
# ``_changed`` runs no ``__init__``: neither class may validate or derive anything in one
assert not any(hasattr(kind, "__post_init__") for kind in _FIELD_NAMES), "Job/Execution: _changed skips __post_init__"
