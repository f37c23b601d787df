"""The use cases on jobs, shared by every entry point (the API, the API Gateway function, seeding):
create, change, hold, resume, trigger, backfill and delete a job, and read its fires and executions.

Each change reads the job, applies the rules (``job_rules``, ``hold_rules``, ``backfill_rules``) and is
one guarded store write, retried on a stale version, so nothing half-written stays behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from ticklock.clock import Clock
from ticklock.domain.backfill_rules import backfill_slots, joined
from ticklock.domain.executions import Execution
from ticklock.domain.fires import Trigger
from ticklock.domain.hold_rules import LAST_HOLD, after_hold, check_hold, end_hold, in_flight, resumed
from ticklock.domain.ids import new_id
from ticklock.domain.job_rules import Limits, Searched, check_jitter, check_job, first_fire, unchanged
from ticklock.domain.job_settings import AlertRules, Policy
from ticklock.domain.jobs import Hold, HoldKind, Job
from ticklock.domain.ledger import LedgerEntry, Reason, SlotFate, account, held_entry
from ticklock.domain.schedules import OnceSchedule, Schedule
from ticklock.errors import ConflictError, DuplicateJobName, InvalidJob, InvalidJobs, StaleVersion, TicklockError
from ticklock.handlers.contract import Registry
from ticklock.ports import ExecutionStore, JobStore, LedgerStore, StoreConnection

CONFLICT_RETRIES = 5
MAX_BATCH = 1000  # jobs one create_many takes at most
T = TypeVar("T")


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
        return self.store.add_job(self._new_job(spec, self.clock.now(), Searched()))

    def create_many(self, specs: Sequence[JobSpec]) -> list[Job]:
        """Create every job of ``specs``, or none. Each is validated as ``create`` validates one, and every
        one at fault is reported (``InvalidJobs``, each field prefixed ``jobs.N.``); a name given twice is
        invalid too, and a name the store holds already raises ``DuplicateJobName``."""
        if len(specs) > MAX_BATCH:
            raise InvalidJob(f"a batch holds at most {MAX_BATCH} jobs, got {len(specs)}", field="jobs")
        now = self.clock.now()
        memo = Searched()
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

    def _new_job(self, spec: JobSpec, now: datetime, memo: Searched) -> Job:
        check_job(
            self.registry,
            self.limits,
            spec.handler,
            spec.schedule,
            spec.payload,
            spec.timeout,
            spec.max_retries,
            now,
            new_schedule=True,
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
        if unchanged(merged, job):
            return job  # an empty patch, or one that gives the values the job has: no new version
        schedule_changed = "schedule" in changes and changes["schedule"] != job.schedule
        check_job(
            self.registry,
            self.limits,
            merged.handler,
            merged.schedule,
            merged.payload,
            merged.timeout,
            merged.max_retries,
            now,
            new_schedule=schedule_changed,
        )
        if schedule_changed or merged.policy != job.policy:
            check_jitter(merged.schedule, merged.policy, now)
        if schedule_changed:  # a pending backfill was of the old schedule's slots: it ends
            merged = merged.with_changes(next_run_at=first_fire(merged.schedule, now), backfill=None)
            if isinstance(merged.schedule, OnceSchedule) and "enabled" not in changes:
                merged = merged.with_changes(enabled=True)
        toggled = "enabled" in changes and changes["enabled"] != job.enabled
        resuming = toggled and not job.enabled
        ended = None
        if toggled or schedule_changed:  # a hold ends with a pause, a resume or a new schedule
            held, ended = end_hold(job, now)
            merged = merged.with_changes(hold=None)
            if job.active_hold is not None and not schedule_changed:
                merged = merged.with_changes(next_run_at=held.next_run_at)
        if resuming:
            merged = resumed(merged, now)
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
        check_hold(note, None)
        held, ended = end_hold(job, now)
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
        check_hold(note, count if kind is HoldKind.SKIP else None)
        if isinstance(job.schedule, OnceSchedule):
            raise ConflictError("a one-shot job has one fire: pause it, or delete it")
        if until is not None and until <= now:
            raise InvalidJob(f"must be in the future (now {now.isoformat()})", field="until")
        if until is not None and until >= LAST_HOLD:
            raise InvalidJob(f"must be before {LAST_HOLD.isoformat()}", field="until")
        if kind is HoldKind.SKIP and not job.enabled:
            raise ConflictError("the job is not enabled (paused, or disabled): resume it, or pause it until an instant")
        held, ended = end_hold(job, now)
        paused = None
        if not held.enabled:  # the pause so far ends here: its slots are recorded as the resume would
            paused = held
            try:
                first = first_fire(held.schedule, now)
            except InvalidJob as exc:
                raise ConflictError(f"cannot hold it: {exc}") from None
            held = held.with_changes(enabled=True, next_run_at=first)
        waiting = held.next_run_at
        if waiting is None:
            raise ConflictError("the job has no next fire to hold back")
        if in_flight(held, waiting, now):
            waiting = held.schedule.next_after(waiting) or waiting  # that fire is claimed: it runs
        resumes_at = after_hold(held.schedule, waiting, until=until, count=count)
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
            held, ended = end_hold(job, now)
            if ended is None and job.active_hold is None:
                return job
            stored = self.store.update_job(held.with_changes(hold=None, updated_at=now), expected_version=job.version)
            self._write(ended)
            return stored
        stored = self.store.update_job(
            resumed(job.with_changes(updated_at=now, hold=None), now), expected_version=job.version
        )
        self._account_pause(job, stored, now)
        return stored

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
        elif in_flight(paused, waiting, now):
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
        slots = backfill_slots(job, start, end, overlap, now)
        runs = self.store.executions_between(job.id, start=slots[0], end=slots[-1], limit=MAX_EXECUTIONS)
        backfilled = {e.scheduled_at for e in runs if e.trigger is Trigger.BACKFILL}
        done = [(at, at in backfilled) for at in slots]
        if dry_run or all(ran for _, ran in done):
            return job, done
        backfill = joined(job, slots, overlap, now)
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
