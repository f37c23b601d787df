"""A fire's life in five steps: lock, record, run, finalise, advance (docs/design.md, "A fire's path").

``TaskRunner.run`` takes one claimed fire through them, top to bottom, on the calling thread (a worker of
the pool, or a Lambda runner's):

0. **check**: its handler is registered; it is not later than its job's catch-up window; its claim lasts
   longer than a run could (else it is released untouched and claimed afresh).
1. **lock** the job (under allow_all, the fire alone), so that its runs do not overlap. A lock held by
   something else than this fire's own run is waited for a little (``job_lock``).
2. **record** its execution: one row per fire. A row found already is a second delivery or a run to
   resume (``domain.fire_rules.on_found``).
3. **run** the handler's attempts inside the deadline (``Invoker``, ``run_with_retries``).
4. **finalise** the execution and 5. **advance** the job to its next fire, in one store write retried
   through a store outage (``final_write``). The lock goes just before, so that a fire due at once does
   not meet it.

What each step tells the world (logs, metrics, events, alerts) is ``reporting``'s; the ledger's entries for
the slots that did not run are ``accounting``'s; the rules it applies are ``domain.fire_rules``'.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ticklock.clock import Clock
from ticklock.domain import fire_rules as rules
from ticklock.domain.alerts import Alerts
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fire_rules import RunOutcome, SkipReason
from ticklock.domain.fires import Fire
from ticklock.domain.ledger import LedgerEntry
from ticklock.engine.accounting import Accounting
from ticklock.engine.attempts import run_attempts
from ticklock.engine.final_write import complete, through_outage
from ticklock.engine.heartbeat import LEASE, Heartbeat
from ticklock.engine.invoke import Invoker
from ticklock.engine.job_lock import LockFailure, take_lock
from ticklock.engine.recovery import ORPHANS_PER_SWEEP, finalise_lost, lose_orphans, unfinished
from ticklock.engine.reporting import FireLog, Reporter, fields_of, safely
from ticklock.engine.speeds import HandlerSpeeds
from ticklock.errors import TicklockError
from ticklock.handlers.contract import Handler, Registry
from ticklock.ports import Completion, Locker, Metrics, Publisher, Store

log = logging.getLogger("ticklock.lifecycle")

MAX_RESUMES = 3


@dataclass(frozen=True)
class Outcome:
    """What ``TaskRunner.run`` did with a fire: the execution it ran, or why it skipped."""

    execution: Execution | None = None
    skipped: SkipReason | None = None


@dataclass(eq=False)
class _Taken:
    """A fire past its checks, holding its job's lock (``token``; '' once let go): its place in the list,
    its handler and log fields, then its execution (step 2), and whether step 5 is still to come (not when
    its job went on as it started, allow_all)."""

    index: int
    fire: Fire
    handler: Handler
    fields: dict[str, Any]
    key: str
    token: str
    execution: Execution | None = None
    advance: bool = True


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
        lease: float = LEASE,
        lookahead: float = 1.0,
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
        self.speeds = HandlerSpeeds()  # how long each handler's runs take (which fires a worker takes together)
        # keeps the claims and locks of the fires held alive: the runtime runs its beat in a thread
        self.heartbeat = Heartbeat(store=store, locker=locker, clock=clock, lease=lease, lookahead=lookahead)

    def run(self, fire: Fire) -> Outcome:
        return self.run_all([fire])[0]

    def run_all(self, fires: Sequence[Fire]) -> list[Outcome]:
        """The five steps over ``fires``: one, or a worker's run of quick ones (``speeds``). Each is checked
        and locked, their executions are recorded in one write, they run in turn, and those that ended are
        finalised and advanced in one write: fires taken together share their commits."""
        outcomes = [Outcome() for _ in fires]
        taken: list[_Taken] = []
        try:
            for i, fire in enumerate(fires):
                self.heartbeat.hold(fire)
                if (t := self._take(i, fire, outcomes)) is not None:
                    taken.append(t)
            recorded = self._record(taken, outcomes)
        except BaseException:
            for t in taken:  # nothing of these fires holds their jobs any longer
                self._let_go(t)
            for fire in fires:
                self.heartbeat.drop(fire)
            raise
        self._run_in_turn(recorded, outcomes, ended=[])
        return outcomes

    def _decided(self, outcomes: list[Outcome], index: int, fire: Fire, outcome: Outcome) -> None:
        """A fire's outcome: its final write is done (or it goes no further), so its claim is no longer kept."""
        outcomes[index] = outcome
        self.heartbeat.drop(fire)

    # -- 0. check, 1. lock ----------------------------------------------------------------------------
    def _take(self, index: int, fire: Fire, outcomes: list[Outcome]) -> _Taken | None:
        """``fire`` checked and its lock taken; None when it goes no further (its outcome set)."""
        job = fire.job
        self.accounting.hold_ended(fire)
        fields = fields_of(fire)
        handler = self.registry.get(job.handler)
        skip: SkipReason | None = None
        now = self.clock.now()
        late = rules.past_window(fire, now)
        if handler is None:
            log.warning("fire.skipped", extra={**fields, "reason": SkipReason.UNKNOWN_HANDLER.value,
                                               "registered": self.registry.names()})  # fmt: skip
            skip = SkipReason.UNKNOWN_HANDLER
        # a fire that has an execution already (a resume, a second delivery) is not judged late: it goes on
        elif late is not None and not self._has_run(fire):
            log.info("fire.skipped", extra={**fields, "reason": SkipReason.CATCHUP_WINDOW_PASSED.value,
                                            "late": round(late, 3)})  # fmt: skip
            skip = SkipReason.CATCHUP_WINDOW_PASSED
        elif rules.lease_short(self.heartbeat.until(fire), now, self.heartbeat.every) and not self.heartbeat.renew(
            fire
        ):
            log.info("fire.skipped", extra={**fields, "reason": SkipReason.LEASE_EXPIRED.value})
            skip = SkipReason.LEASE_EXPIRED
        if skip is not None or handler is None:
            self._decided(outcomes, index, fire, self._skip(fire, skip or SkipReason.UNKNOWN_HANDLER))
            return None
        key = rules.lock_key(fire)
        # kept while the fire runs (``heartbeat``): a crashed run's lock lapses within seconds
        token = take_lock(self.locker, self.clock, key, self.heartbeat.lease, has_run=lambda: self._has_run(fire),
                          on_failure=self.lock_failure, fields=fields)  # fmt: skip
        if isinstance(token, SkipReason):
            self._decided(outcomes, index, fire, self._skip(fire, token))
            return None
        self.heartbeat.locked(fire, key, token or "")
        return _Taken(index, fire, handler, fields, key, token or "")

    def give_up(self, fire: Fire, error: str) -> None:
        """Record ``fire`` as LOST with ``error`` (unless its execution is already final) and advance its job:
        for a fire that cannot be processed at all (a message about to be dead-lettered)."""
        self.accounting.hold_ended(fire)  # the hold before it ended all the same
        execution = unfinished(self.store, fire, self.owner, self.clock.now())
        if execution is not None:
            self._lose(fire, execution, error)

    def lose_orphans(self, *, limit: int = ORPHANS_PER_SWEEP) -> int:
        """Housekeeping: the allow_all runs whose runner vanished, finalised as LOST (``recovery``)."""
        return lose_orphans(self.store, self.report, self.clock, limit=limit)

    # -- 2. record ------------------------------------------------------------------------------------
    def _record(self, taken: list[_Taken], outcomes: list[Outcome]) -> list[_Taken]:
        """Their executions, recorded in one write; a fire whose row was there already goes on by the rules
        for that (``domain.fire_rules.on_found``). Returns those that will run."""
        if not taken:
            return []
        now = self.clock.now()
        fresh = [rules.fresh_execution(t.fire, t.handler.name, now, owner=self.owner) for t in taken]
        one = len(fresh) == 1
        started = [self.store.start_execution(fresh[0])] if one else self.store.start_executions(fresh)
        recorded = []
        for t, new, got in zip(taken, fresh, started, strict=True):
            execution = got.execution
            if not got.created:
                found = rules.on_found(execution, new, now, owner=self.owner, max_resumes=self.max_resumes)
                if found.lose is not None:
                    self._let_go(t)
                    self._lose(t.fire, execution, found.lose)
                    self._decided(outcomes, t.index, t.fire, Outcome(skipped=SkipReason.GIVEN_UP))
                    continue
                if found.resume is None or not self.store.take_over_execution(
                    found.resume, previous_token=execution.run_token
                ):
                    skip = found.skip or SkipReason.RUNNING_ELSEWHERE  # a resume someone else took first
                    if skip is SkipReason.DUPLICATE:
                        log.info("fire.skipped", extra={**t.fields, "reason": skip.value,
                                                        "execution_id": execution.id})  # fmt: skip
                    self._let_go(t)
                    self._decided(outcomes, t.index, t.fire, self._skip(t.fire, skip, started=found.started))
                    continue
                log.warning("execution.resumed", extra={**t.fields, "execution_id": execution.id,
                            "previous_owner": execution.owner, "previous_status": execution.status.value})  # fmt: skip
                execution = found.resume
            t.execution = execution
            t.fields["execution_id"] = execution.id
            self.report.started(t.fire, execution, t.fields, now)
            if rules.side_by_side(t.fire):
                # 5. first: the job's next fire is claimable while this one runs; if the store fails here,
                # the fire runs all the same and the job is advanced when it ends, as for one at a time
                try:
                    self._advance(t.fire)
                    t.advance = False
                except TicklockError as exc:
                    log.warning("fire.advance_failed", extra={**t.fields, "error": exc.message})
            recorded.append(t)
        return recorded

    # -- 3. run ---------------------------------------------------------------------------------------
    def _run_in_turn(
        self, items: list[_Taken], outcomes: list[Outcome], ended: list[tuple[_Taken, RunOutcome]]
    ) -> None:
        """Run each in turn, then finalise those that ended (``ended``: with those that ended before). A run
        past its deadline is taken over on another thread (``Invoker``), which concludes it and goes on with
        the rest of the list, and this thread, held by the handler, does nothing more."""
        for k, t in enumerate(items):
            assert t.execution is not None

            def conclude(outcome: RunOutcome, t: _Taken = t, rest: list[_Taken] = items[k + 1 :]) -> Execution:
                done = self._conclude(t, outcome)
                self._decided(outcomes, t.index, t.fire, Outcome(execution=done))
                self._run_in_turn(rest, outcomes, ended)  # on the take-over's thread
                return done

            try:
                outcome = self._run(t, conclude)
            except BaseException:  # the fires not run keep nothing of their jobs (their rows are resumed)
                for left in items[k:]:
                    self._let_go(left)
                    self.heartbeat.drop(left.fire)
                raise
            if outcome.taken_over:  # its take-over concluded it and goes on with the rest
                return
            if outcome.status is ExecutionStatus.INTERRUPTED or outcome.abandoned or not t.advance:
                self._decided(outcomes, t.index, t.fire, Outcome(execution=self._conclude(t, outcome)))  # at once
                continue
            self._let_go(t)  # the run is over: a fire of its job due at once does not meet the lock
            ended.append((t, outcome))
        self._finish(ended, outcomes)
        ended.clear()

    def _run(self, t: _Taken, conclude: Callable[[RunOutcome], object]) -> RunOutcome:
        """The handler's attempts inside the deadline (``attempts``); its time noted (``speeds``)."""
        assert t.execution is not None
        began = time.perf_counter()
        outcome = run_attempts(self.invoker, self.clock, t.fire, t.handler, t.execution, t.fields,
                               conclude=conclude, cancel=self.shutdown)  # fmt: skip
        self.speeds.note(t.handler.name, time.perf_counter() - began)
        return outcome

    # -- 4. finalise, 5. advance ----------------------------------------------------------------------
    def _finish(self, ended: list[tuple[_Taken, RunOutcome]], outcomes: list[Outcome]) -> None:
        """Steps 4 and 5 for the runs that ended, in one write (one alone: ``Store.complete`` retried through
        an outage; several: ``Store.complete_many``, each alone if that fails); their outcomes set."""
        for (t, _), done in zip(ended, self._finalised(ended), strict=True):
            self._decided(outcomes, t.index, t.fire, Outcome(execution=done) if done is not None else Outcome())

    def _finalised(self, ended: list[tuple[_Taken, RunOutcome]]) -> list[Execution | None]:
        """``_finish``'s writes: each run's execution as finalised (None: its write failed, logged)."""
        if not ended:
            return []
        for t, _ in ended:
            self.heartbeat.claim_ends(t.fire)
        now = self.clock.now()
        ends = []
        for t, outcome in ended:
            assert t.execution is not None
            done = rules.ended(t.execution, outcome, now)
            ends.append((t, outcome, done, *self._next_run(t.fire, now, done.started_at)))
        results: list[tuple[bool, bool]] | None = None
        if len(ends) > 1:
            try:
                results = self.store.complete_many([Completion(d, t.fire, n) for t, _, d, n, _ in ends], now=now)
            except Exception as exc:  # noqa: BLE001 - each is completed alone below, retried through an outage
                log.warning(
                    "batch.complete_failed", extra={"fires": len(ends), "error": f"{type(exc).__name__}: {exc}"}
                )
        dones: list[Execution | None] = []
        for k, (t, outcome, done, next_run, stop) in enumerate(ends):
            dones.append(None)
            if results is not None:
                finished, advanced = results[k]
            elif len(ends) == 1:
                finished, advanced = complete(self.store, self.clock, done, t.fire, next_run, now)
            else:
                try:  # the write may have applied before it failed: checked on the first try
                    finished, advanced = complete(self.store, self.clock, done, t.fire, next_run, now, retried=True)
                except Exception:  # one fire's failure keeps no other unfinished (its row is resumed)
                    log.exception("fire.finish_failed", extra=t.fields)
                    continue
            if finished and advanced:
                self.accounting.passed(t.fire, next_run, done.started_at, now)
            dones[k] = self._finished(t, done, outcome, finished, advanced, stop)
        return dones

    def _conclude(self, t: _Taken, outcome: RunOutcome) -> Execution:
        """Steps 4 and 5 for one run, at once: one cut off (by a shutdown, or past its deadline: on the
        take-over's thread) or one whose job went on as it started (allow_all)."""
        fire = t.fire
        assert t.execution is not None
        self.heartbeat.claim_ends(fire)
        # a straggler past its deadline keeps the lock until its TTL; a cut-off at shutdown dies with the process
        if not (outcome.abandoned and outcome.status in (ExecutionStatus.TIMEOUT, ExecutionStatus.CANCELLED)):
            self._let_go(t)
        if outcome.status is not ExecutionStatus.INTERRUPTED and t.advance:
            [done] = self._finalised([(t, outcome)])  # one alone raises rather than answer None
            assert done is not None
            return done
        done = rules.ended(t.execution, outcome, self.clock.now())
        if done.status is ExecutionStatus.INTERRUPTED:  # to be resumed: the claim is let go, not advanced
            finished = self.store.finish_execution(done)
            if finished and t.advance:
                self.store.release(fire.job.id, fire.lease_token)
        else:  # advanced when it started (allow_all)
            finished = through_outage(
                self.clock, fire, lambda: self.store.finish_execution(done), "execution.finish_retry"
            )
        return self._finished(t, done, outcome, finished, True, None)

    def _finished(self, t: _Taken, done: Execution, outcome: RunOutcome, finished: bool, advanced: bool,
                  stop: str | None) -> Execution:  # fmt: skip
        """What follows a run's final write: the log, measures, events and alerts; why its job stopped."""
        if not finished:
            log.warning("execution.finish_lost", extra=t.fields)
            return done
        self.report.finished(t.fire, done, outcome.attempts, t.fields, advanced=advanced)
        if advanced and stop is not None:
            self.accounting.disabled(t.fire, stop, done)
        return done

    def _let_go(self, t: _Taken) -> None:
        """Release a fire's lock (its run is over, or it goes no further)."""
        if t.token:
            self.heartbeat.locked(t.fire, t.key, "")
            safely("lock.release_failed", t.fields, self.locker.release, t.key, t.token)
            t.token = ""

    def _next_run(self, fire: Fire, now: datetime, started: datetime | None) -> tuple[datetime | None, str | None]:
        next_run, stop = rules.next_run(fire, now, started)
        if stop is not None:
            log.error("fire.no_next_fire", extra={"job_id": fire.job.id, "fire_time": fire.scheduled_at.isoformat(),
                                                  "error": stop})  # fmt: skip
        return next_run, stop

    def _advance(self, fire: Fire, *, expected: bool = True, started: datetime | None = None) -> bool:
        """Step 5 alone: a fire that started under allow_all, or that will not run."""
        self.heartbeat.claim_ends(fire)
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
            final = rules.FINAL_SKIPS.get(reason)
            if final is not None and advanced and not self._has_run(fire):
                entry = LedgerEntry.one(fire.job.id, final, fire.scheduled_at, self.clock.now(), fire.trigger)
                self.accounting.account(fire, entry)
        return Outcome(skipped=reason)

    def _lose(self, fire: Fire, execution: Execution, error: str) -> None:
        self.heartbeat.claim_ends(fire)
        finalise_lost(self.store, self.report, self.clock, execution, fire.job, error)
        self._advance(fire)

    def _has_run(self, fire: Fire) -> bool:
        """Whether the fire has an execution (a delivery of it ran, or runs); a store error counts as yes: the
        ledger then says nothing rather than something false."""
        try:
            return self.store.execution_for(fire.job.id, fire.trigger, fire.scheduled_at) is not None
        except TicklockError:
            return True
