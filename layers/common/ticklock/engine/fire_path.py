"""A fire's life in five steps: lock, record, run, finalise, advance (docs/design.md, "A fire's path").

``TaskRunner.run`` takes one claimed fire through them, top to bottom, on the calling thread (a worker of
the pool, or a Lambda runner's):

0. **check**: its handler is registered; it is not later than its job's catch-up window; its claim lasts
   longer than a run could (else it is released untouched and claimed afresh).
1. **lock** the job (under allow_all, the fire alone), so that its runs do not overlap. A lock held by
   something else than this fire's own run is waited for a little (``LOCK_WAIT``).
2. **record** its execution: one row per fire. A row found already is a second delivery or a run to
   resume (``domain.fire_rules.on_found``).
3. **run** the handler's attempts inside the deadline (``Invoker``, ``run_with_retries``).
4. **finalise** the execution and 5. **advance** the job to its next fire, in one store write retried
   through a store outage. The lock goes just before, so that a fire due at once does not meet it.

What each step tells the world (logs, metrics, events, alerts) is ``reporting``'s; the ledger's entries for
the slots that did not run are ``accounting``'s; the rules it applies are ``domain.fire_rules``'.
"""

from __future__ import annotations

import enum
import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from ticklock.clock import Clock
from ticklock.domain import fire_rules as rules
from ticklock.domain.alerts import Alerts
from ticklock.domain.fire_rules import RunOutcome, SkipReason
from ticklock.domain.ids import new_id, new_token
from ticklock.domain.jobs import LOCK_MARGIN, Execution, ExecutionStatus, Fire
from ticklock.domain.ledger import LedgerEntry, Reason
from ticklock.engine.accounting import Accounting
from ticklock.engine.invoke import AttemptKind, AttemptResult, Invoker
from ticklock.engine.recovery import ORPHANS_PER_SWEEP, finalise_lost, lose_orphans
from ticklock.engine.reporting import FireLog, Reporter, fields_of, safely
from ticklock.engine.retry import run_with_retries
from ticklock.errors import LockUnavailable, StoreUnavailable, TicklockError
from ticklock.handlers.contract import FireLogger, Handler, HandlerContext, Registry
from ticklock.ports import Locker, Metrics, Publisher, Store

log = logging.getLogger("ticklock.lifecycle")
T = TypeVar("T")

MAX_RESUMES = 3
# seconds between tries of a run's final write while the store is out: giving up would leave the row
# RUNNING, and the fire would be run again once its claim lapsed
COMPLETE_BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)
# how long a fire whose job lock is held by something other than its own run waits for it, in growing steps
LOCK_WAIT, LOCK_PAUSE = 2.0, 0.05
# the skips that are a fire's end, as ledger reasons (the others run, or ran, anyway)
_FINAL_SKIPS = {
    SkipReason.UNKNOWN_HANDLER: Reason.UNKNOWN_HANDLER,
    SkipReason.LOCK_UNAVAILABLE: Reason.LOCK_UNAVAILABLE,
    SkipReason.CATCHUP_WINDOW_PASSED: Reason.CATCHUP_WINDOW_PASSED,
}


class LockFailure(enum.StrEnum):
    """What a fire does when the lock backend is out: skip (counted, logged), or run (fail open: the unique
    execution row still stops a second run of the same fire)."""

    SKIP = "skip"
    RUN = "run"


@dataclass(frozen=True)
class Outcome:
    """What ``TaskRunner.run`` did with a fire: the execution it ran, or why it skipped."""

    execution: Execution | None = None
    skipped: SkipReason | None = None


@functools.lru_cache(maxsize=1024)
def _handler_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"ticklock.handler.{name}")


class TaskRunner:
    """Runs fires through the five steps. Thread-safe: one instance serves every worker."""

    def __init__(
        self,
        *,
        store: Store,
        locker: Locker,
        publisher: Publisher,
        metrics: Metrics,
        registry: Registry,
        clock: Clock,
        invoker: Invoker,
        owner: str,
        lock_failure: LockFailure = LockFailure.SKIP,
        max_resumes: int = MAX_RESUMES,
        alerts: Alerts | None = None,
        fire_log: FireLog = FireLog.EACH,
    ) -> None:
        self.store = store
        self.locker = locker
        self.registry = registry
        self.clock = clock
        self.invoker = invoker
        self.owner = owner
        self.lock_failure = lock_failure
        self.max_resumes = max_resumes
        self.alerts = alerts
        self.report = Reporter(metrics=metrics, publisher=publisher, clock=clock, alerts=alerts, fire_log=fire_log)
        self.tally = self.report.tally
        self.accounting = Accounting(store=store, reporter=self.report, clock=clock)
        self.shutdown = threading.Event()  # set when a shutdown cuts runs off: no new attempt starts

    def run(self, fire: Fire) -> Outcome:
        job = fire.job
        self.accounting.hold_ended(fire)
        fields = fields_of(fire)
        # 0. check
        handler = self.registry.get(job.handler)
        if handler is None:
            log.warning("fire.skipped", extra={**fields, "reason": SkipReason.UNKNOWN_HANDLER.value,
                                               "registered": self.registry.names()})  # fmt: skip
            return self._skip(fire, SkipReason.UNKNOWN_HANDLER)
        now = self.clock.now()
        late = rules.past_window(fire, now)
        # a fire that has an execution already (a resume, a second delivery) is not judged late: it goes on
        if late is not None and not self._has_run(fire):
            log.info("fire.skipped", extra={**fields, "reason": SkipReason.CATCHUP_WINDOW_PASSED.value,
                                            "late": round(late, 3)})  # fmt: skip
            return self._skip(fire, SkipReason.CATCHUP_WINDOW_PASSED)
        if rules.lease_short(job, now):
            log.info("fire.skipped", extra={**fields, "reason": SkipReason.LEASE_EXPIRED.value})
            return self._skip(fire, SkipReason.LEASE_EXPIRED)

        # 1. lock
        key = rules.lock_key(fire)
        token = self._lock(fire, key, fields)
        if isinstance(token, SkipReason):
            return self._skip(fire, token)
        handed_on = False  # the lock is ``_conclude``'s to release from here on
        try:
            # 2. record
            together = rules.side_by_side(fire)
            execution = self._record(fire, handler, fields, detached=together)
            if isinstance(execution, SkipReason):
                return Outcome(skipped=execution)
            fields["execution_id"] = execution.id
            advance = True
            if together:
                # 5. first: the job's next fire is claimable while this one runs; if the store fails here,
                # the fire runs all the same and the job is advanced when it ends, as for one at a time
                try:
                    self._advance(fire)
                    advance = False
                except TicklockError as exc:
                    log.warning("fire.advance_failed", extra={**fields, "error": exc.message})

            # 3. run; 4. finalise and 5. advance, here or on the thread that takes an overdue run over
            def conclude(outcome: RunOutcome) -> Execution:
                return self._conclude(fire, execution, outcome, fields, key, token, advance=advance)

            outcome = self._run(fire, handler, execution, fields, conclude)
            handed_on = True
            if outcome.taken_over:  # its attempt outlived the deadline: ``conclude`` ran on another thread
                return Outcome(execution=execution)
            return Outcome(execution=conclude(outcome))
        finally:
            if token and not handed_on:  # the record or the run failed: nothing of this fire holds the job now
                safely("lock.release_failed", fields, self.locker.release, key, token)

    def give_up(self, fire: Fire, error: str) -> None:
        """Record ``fire`` as LOST with ``error`` (unless its execution is already final) and advance its job:
        for a fire that cannot be processed at all (a message about to be dead-lettered)."""
        self.accounting.hold_ended(fire)  # the hold before it ended all the same
        now = self.clock.now()
        placeholder = Execution(id=new_id(), job_id=fire.job.id, fire_key=fire.key, handler=fire.job.handler,
                                trigger=fire.trigger, scheduled_at=fire.scheduled_at, started_at=now, deadline_at=now,
                                run_token=new_token(), owner=self.owner)  # fmt: skip
        started = self.store.start_execution(placeholder)
        execution = started.execution
        live = execution.deadline_at + timedelta(seconds=LOCK_MARGIN) >= now
        if execution.status.final or (not started.created and execution.status is ExecutionStatus.RUNNING and live):
            return  # finished, or running somewhere right now: that run decides
        self._lose(fire, execution, error)

    def lose_orphans(self, *, limit: int = ORPHANS_PER_SWEEP) -> int:
        """Housekeeping: the allow_all runs whose runner vanished, finalised as LOST (``recovery``)."""
        return lose_orphans(self.store, self.report, self.clock, limit=limit)

    # -- 1. lock --------------------------------------------------------------------------------------
    def _lock(self, fire: Fire, key: str, fields: dict[str, Any]) -> str | SkipReason:
        """The lock's token ('' when the lock backend is out and ``lock_failure`` says run), or why not."""
        ttl = fire.job.timeout + LOCK_MARGIN
        try:
            token = self.locker.acquire(key, ttl)
        except LockUnavailable as exc:
            log.error("lock.unavailable", extra={**fields, "error": str(exc), "policy": self.lock_failure.value})
            return SkipReason.LOCK_UNAVAILABLE if self.lock_failure is LockFailure.SKIP else ""
        if token is None:
            token = self._once_the_lock_is_free(fire, key, ttl)
        if token is None:
            log.info("fire.skipped", extra={**fields, "reason": SkipReason.LOCK_HELD.value})
            return SkipReason.LOCK_HELD
        return token

    def _once_the_lock_is_free(self, fire: Fire, key: str, ttl: float) -> str | None:
        """The lock is held. Skipping is right when the holder is this fire's own run (a second delivery: its
        execution is there, or is about to be); anything else holds it briefly (a late copy of an earlier
        fire, which meets its execution and lets go at once), and skipping then would leave this fire unrun
        until its claim lapsed. So: while no execution of this fire appears, try again, up to ``LOCK_WAIT``."""
        waited, pause = 0.0, LOCK_PAUSE
        while waited < LOCK_WAIT and not self._has_run(fire):
            self.clock.sleep(pause)
            waited += pause
            try:
                token = self.locker.acquire(key, ttl)
            except LockUnavailable:
                return None
            if token is not None:
                return token
            pause = min(pause * 2, 0.5)
        return None

    # -- 2. record ------------------------------------------------------------------------------------
    def _record(
        self, fire: Fire, handler: Handler, fields: dict[str, Any], *, detached: bool
    ) -> Execution | SkipReason:
        now = self.clock.now()
        fresh = self._fresh(fire, handler.name, now, detached=detached)
        started = self.store.start_execution(fresh)
        execution = started.execution
        if not started.created:
            found = rules.on_found(execution, fresh, now, owner=self.owner, max_resumes=self.max_resumes)
            if found.lose is not None:
                self._lose(fire, execution, found.lose)
                return SkipReason.GIVEN_UP
            if found.resume is not None and self.store.take_over_execution(
                found.resume, previous_token=execution.run_token
            ):
                log.warning("execution.resumed", extra={**fields, "execution_id": execution.id,
                            "previous_owner": execution.owner, "previous_status": execution.status.value})  # fmt: skip
                execution = found.resume
            else:
                skip = found.skip or SkipReason.RUNNING_ELSEWHERE  # a resume someone else took first
                if skip is SkipReason.DUPLICATE:
                    log.info("fire.skipped", extra={**fields, "reason": skip.value, "execution_id": execution.id})
                self._skip(fire, skip, started=found.started)
                return skip
        self.report.started(fire, execution, fields, now)
        return execution

    def _fresh(self, fire: Fire, handler: str, now: datetime, *, detached: bool) -> Execution:
        job = fire.job
        return Execution(
            id=new_id(),
            job_id=job.id,
            fire_key=fire.key,
            handler=handler,
            trigger=fire.trigger,
            scheduled_at=fire.scheduled_at,
            started_at=now,
            deadline_at=now + timedelta(seconds=job.timeout),
            run_token=new_token(),
            owner=self.owner,
            jitter=fire.jitter,
            detached=detached,
        )

    # -- 3. run ---------------------------------------------------------------------------------------
    def _run(self, fire: Fire, handler: Handler, execution: Execution, fields: dict[str, Any],
             conclude: Callable[[RunOutcome], object]) -> RunOutcome:  # fmt: skip
        job = fire.job
        logger = FireLogger(_handler_logger(handler.name), {"job_id": job.id, "fire_time": fields["fire_time"],
                                                            "execution_id": execution.id})  # fmt: skip
        # cancel_other cuts the run off at the job's next slot; a sync handler then has LOCK_MARGIN seconds
        # to see ``ctx.cancelled`` and return
        cut = rules.cancel_at(fire, execution)
        grace = 0.0 if cut is None else LOCK_MARGIN
        deadline = cut or execution.deadline_at

        def attempt(number: int, seconds_left: float) -> AttemptResult:
            ctx = HandlerContext(job_id=job.id, job_name=job.name, payload=job.payload,
                                 scheduled_at=fire.scheduled_at, execution_id=execution.id,
                                 attempt=execution.attempts + number, deadline=deadline, logger=logger,
                                 now=self.clock.now)  # fmt: skip

            def take_over(result: AttemptResult) -> None:
                # the attempt is given up on the caller's behalf (an inline handler past its deadline): what
                # ``run_with_retries`` and the cut would have made of it, concluded on the invoker's thread
                log.warning("attempt.failed", extra={**fields, "attempt": ctx.attempt, "outcome": result.kind.value,
                                                     "error": result.error})  # fmt: skip
                status = (
                    ExecutionStatus.INTERRUPTED if result.kind is AttemptKind.INTERRUPTED else ExecutionStatus.TIMEOUT
                )
                conclude(rules.cut_off(RunOutcome(status, number, result.error, abandoned=True), cut))

            result = self.invoker.call(handler, ctx, seconds_left, grace=grace, take_over=take_over)
            if result.error and not result.taken_over:
                log.warning("attempt.failed", extra={**fields, "attempt": ctx.attempt, "outcome": result.kind.value,
                                                     "error": result.error})  # fmt: skip
            return result

        outcome = run_with_retries(attempt, clock=self.clock, deadline=deadline, max_retries=job.max_retries,
                                   cancel=self.shutdown)  # fmt: skip
        return outcome if outcome.taken_over else rules.cut_off(outcome, cut)

    # -- 4. finalise, 5. advance ----------------------------------------------------------------------
    def _conclude(self, fire: Fire, execution: Execution, outcome: RunOutcome, fields: dict[str, Any], key: str,
                  token: str, *, advance: bool) -> Execution:  # fmt: skip
        """Steps 4 and 5 once the run is over: on the fire's own thread, or on a take-over's."""
        # a straggler past its deadline keeps the lock until its TTL; a cut-off at shutdown dies with the
        # process. Otherwise the lock goes before the advance makes the job claimable, so that a fire due at
        # once does not meet it (a second delivery of this fire meets its row, RUNNING or final)
        straggler = outcome.abandoned and outcome.status in (ExecutionStatus.TIMEOUT, ExecutionStatus.CANCELLED)
        if token and not straggler:
            safely("lock.release_failed", fields, self.locker.release, key, token)
        now = self.clock.now()
        done = rules.ended(execution, outcome, now)
        stop = None
        if done.status is ExecutionStatus.INTERRUPTED:  # to be resumed: the claim is let go, not advanced
            finished, advanced = self.store.finish_execution(done), True
            if finished and advance:
                self.store.release(fire.job.id, fire.lease_token)
        elif not advance:  # advanced when it started (allow_all)
            finished, advanced = self._through_outage(fire, lambda: self.store.finish_execution(done)), True
        else:
            next_run, stop = self._next_run(fire, now, done.started_at)
            finished, advanced = self._complete(done, fire, next_run, now)
            if finished and advanced:
                self.accounting.passed(fire, next_run, execution.started_at, now)
        if not finished:
            log.warning("execution.finish_lost", extra=fields)
            return done
        self.report.finished(fire, done, outcome.attempts, fields, advanced=advanced)
        if advanced and stop is not None:
            self.accounting.disabled(fire, stop, done)
        return done

    def _complete(self, done: Execution, fire: Fire, next_run: datetime | None, now: datetime) -> tuple[bool, bool]:
        """``Store.complete`` (finished, advanced), retried through a store outage: the writes are guarded, and
        a try after the first checks whether an earlier one finished the row and failed on the advance."""
        tries = 0

        def write() -> tuple[bool, bool]:
            nonlocal tries
            tries += 1
            finished, advanced = self.store.complete(done, fire, next_run_at=next_run, now=now)
            if finished or tries == 1:
                return finished, advanced
            stored = self.store.get_execution(done.id)
            if stored.run_token != done.run_token or stored.status is not done.status:
                return False, False
            return True, self.store.advance(fire, next_run_at=next_run, now=now)

        return self._through_outage(fire, write)

    def _through_outage(self, fire: Fire, write: Callable[[], T]) -> T:
        for wait in (*COMPLETE_BACKOFF, None):
            try:
                return write()
            except StoreUnavailable as exc:
                if wait is None:
                    raise
                log.warning("execution.complete_retry", extra={"job_id": fire.job.id, "error": str(exc), "wait": wait})
                self.clock.sleep(wait)
        raise AssertionError("unreachable")

    def _next_run(self, fire: Fire, now: datetime, started: datetime | None) -> tuple[datetime | None, str | None]:
        next_run, stop = rules.next_run(fire, now, started)
        if stop is not None:
            log.error("fire.no_next_fire", extra={"job_id": fire.job.id, "fire_time": fire.scheduled_at.isoformat(),
                                                  "error": stop})  # fmt: skip
        return next_run, stop

    def _advance(self, fire: Fire, *, expected: bool = True, started: datetime | None = None) -> bool:
        """Step 5 alone: a fire that started under allow_all, or that will not run."""
        now = self.clock.now()
        next_run, stop = self._next_run(fire, now, started)
        advanced = self.store.advance(fire, next_run_at=next_run, now=now)
        if not advanced and expected:
            log.warning("fire.advance_lost", extra={"job_id": fire.job.id, "fire_time": fire.scheduled_at.isoformat()})
        if advanced:
            self.accounting.passed(fire, next_run, started, now)
            if stop is not None:
                self.accounting.disabled(fire, stop, None)
        return advanced

    # -- fires that do not run ------------------------------------------------------------------------
    def _skip(self, fire: Fire, reason: SkipReason, *, started: datetime | None = None) -> Outcome:
        self.report.skipped(fire, reason.value)
        if reason in rules.ADVANCE_AFTER:
            # a duplicate's job was normally advanced by the run it duplicates: only a crash between the final
            # write and the advance leaves it to be done here
            advanced = self._advance(fire, expected=reason is not SkipReason.DUPLICATE, started=started)
            # the ledger says why this fire will not run, once its claim was still this one's (the advance
            # applied) and no delivery of it has run (or runs) already
            final = _FINAL_SKIPS.get(reason)
            if final is not None and advanced and not self._has_run(fire):
                entry = LedgerEntry.one(fire.job.id, final, fire.scheduled_at, self.clock.now(), fire.trigger)
                self.accounting.account(fire, entry)
        elif reason in rules.RELEASE_AFTER:
            self.store.release(fire.job.id, fire.lease_token)
        return Outcome(skipped=reason)

    def _lose(self, fire: Fire, execution: Execution, error: str) -> None:
        finalise_lost(self.store, self.report, self.clock, execution, fire.job, error)
        self._advance(fire)

    def _has_run(self, fire: Fire) -> bool:
        """Whether the fire has an execution (a delivery of it ran, or runs); a store error counts as yes: the
        ledger then says nothing rather than something false."""
        try:
            return self.store.execution_for(fire.job.id, fire.trigger, fire.scheduled_at) is not None
        except TicklockError:
            return True
