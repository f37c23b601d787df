"""The ledger's side of a fire: every slot that came due and did not run is written once, with why
(docs/design.md, "Every fire accounted for"). The fire path calls it after an advance (the slots the job
passed over), when a hold's end comes (the slots it kept back), and for a fire skipped for good; and it
records why a job was disabled. Each write is guarded so that a replica or a retry that wrote the entry
already leaves it be, and fails soft: the run goes on, the failure is logged."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from ticklock.clock import Clock
from ticklock.domain.executions import Execution
from ticklock.domain.fires import Fire, Trigger
from ticklock.domain.ledger import LedgerEntry, Reason, held_entry, hold_reason, slots_between
from ticklock.domain.schedules import CronSchedule
from ticklock.engine.reporting import Reporter
from ticklock.errors import StaleVersion, TicklockError
from ticklock.ports import Store

log = logging.getLogger("ticklock.lifecycle")
DISABLE_TRIES = 5
_JUST = timedelta(microseconds=1)


class Accounting:
    def __init__(self, *, store: Store, reporter: Reporter, clock: Clock) -> None:
        self.store = store
        self.reporter = reporter
        self.clock = clock

    def passed(self, fire: Fire, next_run: datetime | None, started: datetime | None, now: datetime) -> None:
        """The job was advanced from ``fire`` to ``next_run``: the slots of its schedule in between passed
        without a run. Those that passed before the fire's run started were ``collapsed`` (it was late);
        those that passed while it ran, ``overlap_skip`` (one run of a job at a time)."""
        if fire.trigger is not Trigger.SCHEDULE:
            return  # a manual fire does not move the schedule
        until = next_run or now
        schedule = fire.job.schedule
        if not isinstance(schedule, CronSchedule):
            return  # an interval has no slots of its own; a once schedule none after its one
        after = schedule.next_after(fire.scheduled_at)
        if after is None or after >= until:
            return  # the usual case, one computation: the slot after this fire is the one the job moves to
        split = until if started is None else min(max(started, fire.scheduled_at) + _JUST, until)
        ranges = [
            (reason, passed)
            for reason, after, before in (
                (Reason.COLLAPSED, fire.scheduled_at, split),  # slots strictly between: (scheduled, started]
                (Reason.OVERLAP_SKIP, split - _JUST, until),  # (started, next)
            )
            if (passed := slots_between(fire.job.schedule, after, before)) is not None
        ]
        if not ranges or not self._moved_to(fire, next_run):
            return
        for reason, (first, last, count, capped) in ranges:
            self.account(fire, LedgerEntry(fire.job.id, reason, first, last, count, now, Trigger.SCHEDULE, capped))

    def hold_ended(self, fire: Fire) -> None:
        """If ``fire`` is the one a user's hold moved the job to, the slots the hold kept back are one entry
        (``paused`` or ``skip_next``), written once whichever delivery of the fire gets here first."""
        hold = fire.job.hold
        if hold is None or hold.resumes_at != fire.scheduled_at or fire.trigger is not Trigger.SCHEDULE:
            return
        if hold.skipped_from is None:
            return
        after, now = hold.skipped_from - _JUST, self.clock.now()
        entry = held_entry(fire.job.id, fire.job.schedule, hold_reason(hold), after, fire.scheduled_at, now)
        if entry is not None:
            self.account(fire, entry)

    def _moved_to(self, fire: Fire, next_run: datetime | None) -> bool:
        """Whether the advance moved the job's schedule to ``next_run``: it keeps the schedule of a job
        edited (paused, changed, triggered) since the claim, whose slots are then not this fire's to
        account for. One read, only when there are slots to account for."""
        try:
            stored = self.store.get_job(fire.job.id)
        except TicklockError:
            return False
        # this advance's own write (its version the claim's plus one), not a hold or an edit that happened
        # to land on the same next fire
        return stored.version == fire.job.version + 1 and stored.next_run_at == next_run

    def account(self, fire: Fire, entry: LedgerEntry) -> None:
        """Write a ledger entry once (a replica or a retry that wrote it already leaves it), then count and
        publish it."""
        try:
            if not self.store.record_fire(entry):
                return
        except TicklockError as exc:
            fields = {"job_id": fire.job.id, "fire_time": entry.first_at.isoformat(), "reason": entry.reason.value}
            log.warning("ledger.record_failed", extra={**fields, "error": exc.message})
            return
        self.reporter.accounted(fire, entry)

    def disabled(self, fire: Fire, reason: str, execution: Execution | None) -> None:
        """The job was just disabled for ``reason`` (its schedule found no next fire): record it on the job
        (the API shows it), count it, and say so on the bus. The fire is finalised and the job stopped
        already; this only explains it."""
        self.reporter.disabled(fire, reason, execution)
        fields = {"job_id": fire.job.id, "fire_time": fire.scheduled_at.isoformat()}
        for _ in range(DISABLE_TRIES):
            try:
                job = self.store.get_job(fire.job.id)
                if job.enabled:
                    return  # enabled again meanwhile: the reason no longer holds
                self.store.update_job(
                    job.with_changes(disabled_reason=reason, updated_at=self.clock.now()), expected_version=job.version
                )
                return
            except StaleVersion:
                continue
            except TicklockError as exc:
                log.warning("job.disabled_reason_lost", extra={**fields, "error": exc.message})
                return
