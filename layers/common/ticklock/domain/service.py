"""Use cases on jobs, shared by every entry point (local API, API Gateway function, seeding).

Validation that needs more than one field, or the registry, or the clock, lives here; the API's
pydantic models check shapes and ranges. Each change is one guarded store write, so nothing
half-written stays behind.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from ticklock.clock import Clock
from ticklock.domain.executions import Execution
from ticklock.domain.fires import Trigger
from ticklock.domain.ids import new_id
from ticklock.domain.job_settings import AlertRules, Policy
from ticklock.domain.jobs import MAX_BACKFILL, MAX_NOTE, MAX_SKIP, Backfill, Hold, HoldKind, Job
from ticklock.domain.ledger import LedgerEntry, Reason, SlotFate, account, held_entry, hold_reason, newest_slots
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule
from ticklock.errors import ConflictError, DuplicateJobName, InvalidJob, InvalidJobs, StaleVersion, TicklockError
from ticklock.handlers.contract import Registry
from ticklock.ports import ExecutionStore, JobStore, LedgerStore, StoreConnection

MAX_RETRIES = 25
MIN_TIMEOUT = 0.01  # seconds: below this a deadline is finer than the clock that checks it
MAX_PAYLOAD_DEPTH = 32
INT64_RANGE = (-(2**63), 2**63 - 1)


def _check_payload(value: Any, where: str, depth: int) -> None:
    """The one payload rule, what every store holds and gives back unchanged (JSON's limits and BSON's
    together): nesting at most 32 deep; integers within 64 bits; finite floats; text that is valid
    Unicode (no lone surrogates); keys that are not empty, do not start with ``$`` and hold no ``.`` or
    NUL. Raises ``InvalidJob`` naming the first value at fault (``payload.a.b[2]``)."""
    if depth > MAX_PAYLOAD_DEPTH:
        raise InvalidJob(f"is nested more than {MAX_PAYLOAD_DEPTH} levels deep", field=where)
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        _check_text(value, where, "text")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidJob("is not a finite number (JSON has no NaN or Infinity)", field=where)
        return
    if isinstance(value, int):
        if not INT64_RANGE[0] <= value <= INT64_RANGE[1]:
            raise InvalidJob("is an integer beyond 64 bits", field=where)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidJob("has a key that is not text", field=where)
            _check_text(key, where, "key")
            if not key or key.startswith("$") or "." in key or "\x00" in key:
                raise InvalidJob(
                    "is not a usable key: keys must not be empty, start with '$', or hold '.' or NUL",
                    field=f"{where}.{key[:100]}",
                )
            _check_payload(item, f"{where}.{key}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_payload(item, f"{where}[{index}]", depth + 1)
        return
    raise InvalidJob("is not a JSON value", field=where)


def _check_text(text: str, where: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidJob(
            f"has a {what} with a lone surrogate (U+{ord(text[exc.start]):04X}): not valid Unicode", field=where
        ) from None


def _unchanged(merged: Job, job: Job) -> bool:
    # Payloads compare as JSON: 1, 1.0 and true are equal in Python but not to the client that sent them.
    same_rest = merged.with_changes(updated_at=job.updated_at, payload=job.payload) == job
    return same_rest and json.dumps(merged.payload) == json.dumps(job.payload)


CONFLICT_RETRIES = 5
MAX_BATCH = 1000  # jobs one create_many takes at most
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # one encoder, not one a call
T = TypeVar("T")
BACKFILL_OVERLAPS = ("buffer_all", "allow_all")  # a backfill's fires in turn, or side by side


@dataclass(frozen=True)
class Limits:
    """Bounds a job must respect, from configuration."""

    max_timeout: float = 86400.0
    max_payload_bytes: int = 65536
    max_timeout_reason: str = "TICKLOCK_MAX_TIMEOUT"


@dataclass(frozen=True)
class JobSpec:
    """What a caller asks for when creating a job; None fields of a patch mean 'leave as is'."""

    name: str
    handler: str
    schedule: Schedule
    payload: Mapping[str, Any]
    timeout: float = 60.0
    max_retries: int = 0
    enabled: bool = True
    policy: Policy = field(default_factory=Policy)
    alerts: AlertRules | None = None


log = logging.getLogger("ticklock.service")
MAX_ENTRIES = 10_000  # ledger entries one window's answer reads at most
MAX_EXECUTIONS = 10_000  # executions one window's answer reads at most


class ServiceStore(StoreConnection, JobStore, ExecutionStore, LedgerStore, Protocol):
    """The roles the service (and the API on it) uses: every one but ``FireStore``, a fire's own writes."""


class JobService:
    """Create, change, pause, resume, trigger and delete jobs."""

    def __init__(self, store: ServiceStore, registry: Registry, clock: Clock, limits: Limits | None = None) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.limits = limits or Limits()

    def create(self, spec: JobSpec) -> Job:
        return self.store.add_job(self._new_job(spec, self.clock.now(), _Searched()))

    def create_many(self, specs: Sequence[JobSpec]) -> list[Job]:
        """Create every job of ``specs``, or none. Each is validated as ``create`` validates one, and every
        one at fault is reported (``InvalidJobs``, each field prefixed ``jobs.N.``); a name given twice is
        invalid too, and a name the store holds already raises ``DuplicateJobName``."""
        if len(specs) > MAX_BATCH:
            raise InvalidJob(f"a batch holds at most {MAX_BATCH} jobs, got {len(specs)}", field="jobs")
        now = self.clock.now()
        memo = _Searched()
        jobs: list[Job] = []
        problems: list[InvalidJob] = []
        first_at: dict[str, int] = {}
        for at, spec in enumerate(specs):
            earlier = first_at.setdefault(spec.name, at)
            if earlier != at:
                problems.append(InvalidJob(f"{spec.name!r} is jobs.{earlier}'s name too", field=f"jobs.{at}.name"))
            try:
                jobs.append(self._new_job(spec, now, memo))
            except InvalidJob as exc:
                problems.append(InvalidJob(exc.message, field=f"jobs.{at}.{exc.field}"))
        if problems:
            raise InvalidJobs(problems)
        self.store.add_jobs(jobs)
        return jobs

    def _new_job(self, spec: JobSpec, now: datetime, memo: _Searched) -> Job:
        self._validate(
            spec.handler, spec.schedule, spec.payload, spec.timeout, spec.max_retries, now, new_schedule=True
        )
        memo.check_jitter(spec.schedule, spec.policy, now)
        return Job(
            id=new_id(),
            name=spec.name,
            handler=spec.handler,
            schedule=spec.schedule,
            payload=dict(spec.payload),
            timeout=spec.timeout,
            max_retries=spec.max_retries,
            enabled=spec.enabled,
            next_run_at=memo.first_fire(spec.schedule, now),
            created_at=now,
            updated_at=now,
            policy=spec.policy,
            alerts=spec.alerts,
        )

    def seed(self, spec: JobSpec) -> tuple[Job, bool]:
        """Create ``spec`` unless a job of that name exists; returns (the job, created).

        Idempotent by name, and safe when several processes seed at once (the name is unique in the
        store: one insert wins, the others find it). An existing job is returned as it is, so an
        operator's later changes to a system job (its schedule, a pause) survive every restart."""
        existing = self.store.find_job_by_name(spec.name)
        if existing is not None:
            return existing, False
        try:
            return self.create(spec), True
        except DuplicateJobName:
            found = self.store.find_job_by_name(spec.name)
            if found is None:  # deleted in between: the next start seeds it again
                raise
            return found, False

    def update(self, job_id: str, changes: Mapping[str, Any]) -> Job:
        """Apply a partial change; a new schedule restarts from now."""
        return self._retrying(lambda: self._update(job_id, changes))

    def _update(self, job_id: str, changes: Mapping[str, Any]) -> Job:
        job = self.store.get_job(job_id)
        now = self.clock.now()
        merged = job.with_changes(**changes, updated_at=now)
        if _unchanged(merged, job):
            return job  # an empty patch, or one that gives the values the job has: no new version
        schedule_changed = "schedule" in changes and changes["schedule"] != job.schedule
        self._validate(
            merged.handler,
            merged.schedule,
            merged.payload,
            merged.timeout,
            merged.max_retries,
            now,
            new_schedule=schedule_changed,
        )
        if schedule_changed or merged.policy != job.policy:
            _check_jitter(merged.schedule, merged.policy, now)
        if schedule_changed:  # a pending backfill was of the old schedule's slots: it ends
            merged = merged.with_changes(next_run_at=_first_fire(merged.schedule, now), backfill=None)
            if isinstance(merged.schedule, OnceSchedule) and "enabled" not in changes:
                merged = merged.with_changes(enabled=True)
        toggled = "enabled" in changes and changes["enabled"] != job.enabled
        resuming = toggled and not job.enabled
        ended = None
        if toggled or schedule_changed:  # a hold ends with a pause, a resume or a new schedule
            held, ended = _end_hold(job, now)
            merged = merged.with_changes(hold=None)
            if job.active_hold is not None and not schedule_changed:
                merged = merged.with_changes(next_run_at=held.next_run_at)
        if resuming:
            merged = self._resumed(merged, now)
        stored = self.store.update_job(merged, expected_version=job.version)
        self._write(ended)
        if resuming and not schedule_changed:
            self._account_pause(job, stored, now)
        return stored

    def pause(self, job_id: str, *, note: str | None = None, until: datetime | None = None) -> Job:
        """Stop scheduling the job, with an optional note: until it is resumed, or, with ``until``, until
        its first fire at or after that instant (the fires in between are the hold's, ``paused``)."""
        return self._retrying(lambda: self._pause(job_id, note, until))

    def _pause(self, job_id: str, note: str | None, until: datetime | None) -> Job:
        job = self.store.get_job(job_id)
        now = self.clock.now()
        if until is not None:
            return self._hold(job, now, HoldKind.PAUSE, note, until=until)
        pause = job.active_hold if not job.enabled else None
        if not job.enabled and (note is None or (pause is not None and pause.note == note)):
            return job
        _check_hold(note, None)
        held, ended = _end_hold(job, now)
        since = pause.since if pause is not None else now
        hold = Hold(HoldKind.PAUSE, since, note, skipped_from=held.next_run_at)
        stored = self.store.update_job(
            held.with_changes(enabled=False, hold=hold, updated_at=now), expected_version=job.version
        )
        self._write(ended)
        return stored

    def skip(self, job_id: str, count: int, *, note: str | None = None) -> Job:
        """Skip the job's next ``count`` fires (recorded ``skip_next``), with an optional note."""
        return self._retrying(lambda: self._skip(job_id, count, note))

    def _skip(self, job_id: str, count: int, note: str | None) -> Job:
        return self._hold(self.store.get_job(job_id), self.clock.now(), HoldKind.SKIP, note, count=count)

    def _hold(
        self,
        job: Job,
        now: datetime,
        kind: HoldKind,
        note: str | None,
        *,
        until: datetime | None = None,
        count: int = 0,
    ) -> Job:
        """Hold a job back until ``until`` (a pause) or for ``count`` fires (a skip): its next fire moves to
        the first after the hold. A timed hold in force ends first (its slots so far are recorded); a
        paused job is resumed into the hold (its paused slots so far are recorded)."""
        _check_hold(note, count if kind is HoldKind.SKIP else None)
        if isinstance(job.schedule, OnceSchedule):
            raise ConflictError("a one-shot job has one fire: pause it, or delete it")
        if until is not None and until <= now:
            raise InvalidJob(f"must be in the future (now {now.isoformat()})", field="until")
        if until is not None and until >= LAST_HOLD:
            raise InvalidJob(f"must be before {LAST_HOLD.isoformat()}", field="until")
        if kind is HoldKind.SKIP and not job.enabled:
            raise ConflictError("the job is not enabled (paused, or disabled): resume it, or pause it until an instant")
        held, ended = _end_hold(job, now)
        paused = None
        if not held.enabled:  # the pause so far ends here: its slots are recorded as the resume would
            paused = held
            try:
                first = _first_fire(held.schedule, now)
            except InvalidJob as exc:
                raise ConflictError(f"cannot hold it: {exc}") from None
            held = held.with_changes(enabled=True, next_run_at=first)
        waiting = held.next_run_at
        if waiting is None:
            raise ConflictError("the job has no next fire to hold back")
        if _in_flight(held, waiting, now):
            waiting = held.schedule.next_after(waiting) or waiting  # that fire is claimed: it runs
        resumes_at = _after_hold(held.schedule, waiting, until=until, count=count)
        if resumes_at is None or resumes_at >= LAST_HOLD:
            raise ConflictError("its schedule has no fire after the hold: pause it, or delete it")
        if resumes_at <= waiting and paused is None and ended is None:
            return job  # nothing to hold back: the next fire is after ``until`` already
        hold = Hold(kind, now, note, until=until, skipped_from=waiting, resumes_at=resumes_at, count=count or None)
        stored = self.store.update_job(
            held.with_changes(next_run_at=resumes_at, hold=hold, disabled_reason=None, updated_at=now),
            expected_version=job.version,
        )
        self._write(ended)
        if paused is not None:
            self._account_pause(paused, held, now)
        return stored

    def _write(self, entry: LedgerEntry | None) -> None:
        """Write a ledger entry once the change that decided it is stored. Fails soft: the change stands,
        and the slots show as unaccounted. (Written here, it is neither counted in the metrics nor
        published: the service has neither; the lifecycle's entries are.)"""
        if entry is None:
            return
        try:
            self.store.record_fire(entry)
        except TicklockError as exc:
            log.warning(
                "ledger.record_failed",
                extra={"job_id": entry.job_id, "reason": entry.reason.value, "error": exc.message},
            )

    def resume(self, job_id: str) -> Job:
        """Schedule a paused or held job again, from now."""
        return self._retrying(lambda: self._resume(job_id))

    def _resume(self, job_id: str) -> Job:
        job = self.store.get_job(job_id)
        now = self.clock.now()
        if job.enabled:
            held, ended = _end_hold(job, now)
            if ended is None and job.active_hold is None:
                return job
            stored = self.store.update_job(held.with_changes(hold=None, updated_at=now), expected_version=job.version)
            self._write(ended)
            return stored
        resumed = self.store.update_job(
            self._resumed(job.with_changes(updated_at=now, hold=None), now), expected_version=job.version
        )
        self._account_pause(job, resumed, now)
        return resumed

    def _account_pause(self, paused: Job, resumed: Job, now: datetime) -> None:
        """The slots that passed while ``paused`` was paused, as one ``missed`` / ``paused`` entry: from the
        slot it waited for (or after it, if it ran or its claim is running it) to the first it resumes at.
        Fails soft: the resume stands, and the slots show as unaccounted."""
        waiting = paused.next_run_at
        if waiting is None or waiting > now or resumed.next_run_at == waiting:
            return
        try:
            latest = self.store.list_executions(paused.id, limit=1)
        except TicklockError as exc:
            log.warning("ledger.record_failed", extra={"job_id": paused.id, "reason": "paused", "error": exc.message})
            return
        after = waiting - timedelta(microseconds=1)
        if latest and latest[0].scheduled_at >= waiting:
            after = latest[0].scheduled_at
        elif _in_flight(paused, waiting, now):
            after = waiting  # it was claimed before the pause: it runs
        self._write(held_entry(paused.id, paused.schedule, Reason.PAUSED, after, resumed.next_run_at or now, now))

    def trigger(self, job_id: str) -> Job:
        """Ask for a run now, without moving the schedule. Triggers pending at once merge into one."""
        return self._retrying(lambda: self._trigger(job_id))

    def _trigger(self, job_id: str) -> Job:
        job = self.store.get_job(job_id)
        now = self.clock.now()
        return self.store.update_job(job.with_changes(trigger_at=now, updated_at=now), expected_version=job.version)

    def backfill(
        self, job_id: str, *, start: datetime, end: datetime, overlap: str = "buffer_all", dry_run: bool = False
    ) -> tuple[Job, list[tuple[datetime, bool]]]:
        """Run again the slots of the job's schedule in [start, end], a past window: each once, however
        often it is asked (its execution is the fire ``<job>:backfill:<slot>``), at most MAX_BACKFILL.
        Returns the job and each slot with whether it has already been backfilled (it will not run
        again); ``dry_run`` writes nothing."""
        return self._retrying(lambda: self._backfill(job_id, start, end, overlap, dry_run))

    def _backfill(
        self, job_id: str, start: datetime, end: datetime, overlap: str, dry_run: bool
    ) -> tuple[Job, list[tuple[datetime, bool]]]:
        job = self.store.get_job(job_id)
        now = self.clock.now()
        if overlap not in BACKFILL_OVERLAPS:
            raise InvalidJob(f"must be one of {', '.join(BACKFILL_OVERLAPS)}, not {overlap!r}", field="overlap")
        if end > now:
            raise InvalidJob(
                f"must not be in the future (now {now.isoformat()}): a backfill runs past fires", field="to"
            )
        if start > end:
            raise InvalidJob("the window's start is after its end", field="from")
        if isinstance(job.schedule, IntervalSchedule):
            raise ConflictError("an interval job has no slots of its own to backfill: trigger it")
        try:
            slots = newest_slots(job.schedule, start - timedelta(microseconds=1), end, MAX_BACKFILL + 1)
        except OverflowError:
            raise InvalidJob("is too far in the past for the calendar", field="from") from None
        if len(slots) > MAX_BACKFILL:
            raise InvalidJob(
                f"the window holds more than {MAX_BACKFILL} fires of the schedule: backfill a shorter one", field="from"
            )
        waiting = job.next_run_at if job.enabled else None
        slots = [at for at in slots if waiting is None or at < waiting]  # the slot the job waits for runs anyway
        if not slots:
            raise InvalidJob("the window holds no past fire of the schedule", field="from")
        runs = self.store.executions_between(job.id, start=slots[0], end=slots[-1], limit=MAX_EXECUTIONS)
        backfilled = {e.scheduled_at for e in runs if e.trigger is Trigger.BACKFILL}
        done = [(at, at in backfilled) for at in slots]
        if dry_run or all(ran for _, ran in done):
            return job, done
        pending = job.backfill
        first, last = slots[0], slots[-1]
        if pending is not None:  # one queue per job: a window that meets the pending one extends it
            after_pending = job.schedule.next_after(pending.until) or pending.until
            after_window = job.schedule.next_after(last) or last
            if first > after_pending or after_window < pending.next_at:  # neither meets nor overlaps it
                raise ConflictError(
                    f"a backfill is pending ({pending.next_at.isoformat()} to {pending.until.isoformat()}): "
                    "post a window that meets it, or wait for it to end"
                )
            first, last = min(first, pending.next_at), max(last, pending.until)
            if (
                len(newest_slots(job.schedule, first - timedelta(microseconds=1), last, MAX_BACKFILL + 1))
                > MAX_BACKFILL
            ):
                raise InvalidJob(f"with the pending backfill, more than {MAX_BACKFILL} fires", field="from")
            overlap = pending.overlap if overlap == "buffer_all" else overlap
        backfill = Backfill(next_at=first, until=last, requested_at=now, overlap=overlap)
        stored = self.store.update_job(
            job.with_changes(backfill=backfill, updated_at=now), expected_version=job.version
        )
        return stored, done

    def delete(self, job_id: str) -> None:
        self.store.delete_job(job_id)

    def fires(self, job_id: str, *, start: datetime, end: datetime, limit: int) -> list[SlotFate]:
        """What became of every fire of the job in [start, end] (``ledger.account``), newest first."""
        job = self.store.get_job(job_id)
        entries = self.store.list_fires(job_id, start=start, end=end, limit=MAX_ENTRIES)
        executions = self.store.executions_between(job_id, start=start, end=end, limit=MAX_EXECUTIONS)
        return account(
            job, start=start, end=end, now=self.clock.now(), executions=executions, entries=entries, limit=limit
        )

    def executions(self, job_id: str, *, limit: int, before: str | None) -> list[Execution]:
        self.store.get_job(job_id)
        return self.store.list_executions(job_id, limit=limit, before=before)

    @staticmethod
    def _retrying(change: Callable[[], T]) -> T:
        # A running job's advance moves its version; an edit read before it is re-read and re-applied.
        for _ in range(CONFLICT_RETRIES - 1):
            try:
                return change()
            except StaleVersion:
                pass
        return change()

    # -- rules --------------------------------------------------------------------------------------
    def _resumed(self, job: Job, now: datetime) -> Job:
        if isinstance(job.schedule, OnceSchedule):
            if job.next_run_at is None:
                raise ConflictError("this one-shot job has already run: trigger it, or give it a new schedule")
            return job.with_changes(enabled=True, disabled_reason=None, hold=None)
        # A resumed job starts from now: fires missed while paused are not run (the downtime policy).
        try:
            first = _first_fire(job.schedule, now)
        except InvalidJob as exc:
            raise ConflictError(f"cannot resume: {exc}") from None
        return job.with_changes(enabled=True, disabled_reason=None, next_run_at=first, hold=None)

    def _validate(
        self,
        handler: str,
        schedule: Schedule,
        payload: Mapping[str, Any],
        timeout: float,
        max_retries: int,
        now: datetime,
        *,
        new_schedule: bool,
    ) -> None:
        if handler not in self.registry:
            known = ", ".join(self.registry.names()) or "none"
            raise InvalidJob(f"unknown handler {handler!r}; registered handlers: {known}", field="handler")
        if not MIN_TIMEOUT <= timeout <= self.limits.max_timeout:
            raise InvalidJob(
                f"timeout must be at least {MIN_TIMEOUT:g} and at most {self.limits.max_timeout:g} seconds "
                f"({self.limits.max_timeout_reason}), got {timeout:g}",
                field="timeout",
            )
        if not 0 <= max_retries <= MAX_RETRIES:
            raise InvalidJob(f"max_retries must be between 0 and {MAX_RETRIES}", field="max_retries")
        _check_payload(payload, "payload", 0)
        size = len(_COMPACT.encode(payload).encode())  # as UTF-8
        if size > self.limits.max_payload_bytes:
            raise InvalidJob(f"is {size} bytes as JSON; the limit is {self.limits.max_payload_bytes}", field="payload")
        if new_schedule and isinstance(schedule, OnceSchedule) and schedule.at <= now:
            raise InvalidJob(
                f"once.at {schedule.at.isoformat()} is in the past (now {now.isoformat()})", field="schedule.at"
            )


JITTER_SPACING_FIRES = 100  # the fires whose spacing bounds a job's jitter


def _check_jitter(schedule: Schedule, policy: Policy, now: datetime) -> None:
    """A fire's jitter must leave it before the next slot: ``max_jitter`` below the schedule's shortest gap
    between two fires (an interval's length; for cron, over its next JITTER_SPACING_FIRES fires)."""
    if not policy.max_jitter:
        return
    if isinstance(schedule, IntervalSchedule):
        gap: float = schedule.seconds
    elif isinstance(schedule, CronSchedule):
        fires = [f.at for f in schedule.upcoming(now, JITTER_SPACING_FIRES)]
        gap = min(((b - a).total_seconds() for a, b in itertools.pairwise(fires)), default=math.inf)
    else:
        return  # one fire: any offset keeps it apart from the next
    if policy.max_jitter >= gap:
        raise InvalidJob(
            f"must be less than the shortest gap between the schedule's fires ({gap:g} s), got {policy.max_jitter:g}",
            field="policy.max_jitter",
        )


LAST_HOLD = datetime(9999, 12, 30, tzinfo=UTC)  # a pause ends before this (schedules end there)


def _in_flight(job: Job, slot: datetime, now: datetime) -> bool:
    """Whether the scheduled fire at ``slot`` is claimed right now: it will run, whatever a hold says."""
    if job.lease is None or job.lease.until <= now:
        return False
    return job.trigger_at is None or job.trigger_at > (job.jittered(slot) or slot)  # the claim is not a trigger's


def _check_hold(note: str | None, count: int | None) -> None:
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE):
        raise InvalidJob(f"must be text of at most {MAX_NOTE} characters", field="note")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SKIP):
        raise InvalidJob(f"must be a whole number from 1 to {MAX_SKIP}", field="count")


def _after_hold(schedule: Schedule, waiting: datetime, *, until: datetime | None, count: int) -> datetime | None:
    """The fire a hold resumes at: the first at or after ``until``, or the one after ``count`` fires from
    ``waiting`` (the fire the job waits for, the first held back)."""
    if until is not None:
        if isinstance(schedule, IntervalSchedule):
            return max(until, waiting)
        return schedule.next_after(max(until, waiting) - timedelta(microseconds=1))
    at: datetime | None = waiting
    try:
        for _ in range(count):
            if at is None:
                return None
            at = schedule.next_after(at)
    except OverflowError:  # an interval's fires past the year 9999
        return None
    return at


def _end_hold(job: Job, now: datetime) -> tuple[Job, LedgerEntry | None]:
    """End ``job``'s timed hold now, if one is in force: the job as it goes on (its next fire the first
    after now, no hold) and the entry for the hold's slots that came by (None if none did)."""
    hold = job.active_hold
    if hold is None or hold.resumes_at is None or hold.skipped_from is None:
        return job, None
    ended = job.with_changes(hold=None)
    if hold.resumes_at > now:
        ended = ended.with_changes(next_run_at=_first_fire(job.schedule, now))
    until = min(hold.resumes_at, now + timedelta(microseconds=1))
    after = hold.skipped_from - timedelta(microseconds=1)
    return ended, held_entry(job.id, job.schedule, hold_reason(hold), after, until, now)


@dataclass
class _Searched:
    """What the new jobs of one create (one job, or a batch) have searched their schedules for: each
    schedule's first fire, and the (schedule, policy) pairs whose jitter was found to fit (a cron's next
    100 fires each). Many jobs of a batch share a schedule; each search is made once."""

    firsts: dict[Schedule, datetime | None] = field(default_factory=dict)
    jitter_ok: set[tuple[Schedule, Policy]] = field(default_factory=set)

    def first_fire(self, schedule: Schedule, now: datetime) -> datetime | None:
        if schedule not in self.firsts:
            self.firsts[schedule] = _first_fire(schedule, now)
        return self.firsts[schedule]

    def check_jitter(self, schedule: Schedule, policy: Policy, now: datetime) -> None:
        if (schedule, policy) not in self.jitter_ok:
            _check_jitter(schedule, policy, now)
            self.jitter_ok.add((schedule, policy))


def _first_fire(schedule: Schedule, now: datetime) -> datetime | None:
    """A new, changed or resumed schedule's first fire; a cron schedule without one is refused."""
    first = schedule.first_after(now)
    if first is None and isinstance(schedule, CronSchedule):
        if schedule.gap == "skip":
            message = (
                f"cron {schedule.expr!r} never fires in {schedule.timezone} with gap=skip: its next matches all "
                "fall in spring-forward gaps (use gap=jump to run them as the clocks jump)"
            )
        else:
            message = f"cron {schedule.expr!r} has no fire left before the year 10000"
        raise InvalidJob(message, field="schedule.expr")
    return first
