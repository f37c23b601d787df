"""A fire's life in five steps: lock, record, run, finalise, advance.

Rules beyond the reference, each tested in tests/integration/test_lifecycle.py:

* A fire starts only inside its claim: if the lease would end before the run's deadline plus the lock
  margin, the fire is released untouched (``lease_expired``) and claimed afresh.
* The execution row is unique per fire. Finding it final means a duplicate delivery: nothing runs, the
  job is advanced. Finding it RUNNING past its deadline (its owner died) or INTERRUPTED (a shutdown cut
  it off) means the fire is resumed on the same row, at most ``max_resumes`` times (3 by default; 0 on
  Lambda, where a runner that died mid-run is not trusted to be rerun), then given up as LOST.
* A publisher or metrics failure is logged and never fails the run. A lock-backend outage follows
  ``lock_failure``: ``skip`` (default; the fire is skipped, counted and logged) or ``run`` (fail open:
  the unique execution row still stops a second run of the same fire).
* The lock goes when the run ends, before the final write and the advance (a fire due at once must not
  meet it); a duplicate delivery in between meets the row, and if it finds it final it advances the job
  from the run's own start, as the run does. A sync handler still running past its deadline keeps it.
* Under a backlog (serve's workers see fires queued behind a batch) a batch's final writes may wait for
  the batches after it, up to ``DEFER_SECONDS``, written as of its runs' end: a burst's fires start first.
* How a job goes on after a fire is its overlap policy's (``overlap.following``); the slots it passes are
  recorded in the ledger only when this fire's own advance moved the schedule.
"""

from __future__ import annotations

import enum
import functools
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from ticklock.clock import Clock
from ticklock.domain.alerts import Alerts
from ticklock.domain.events import ExecutionEvent
from ticklock.domain.ids import new_id, new_token
from ticklock.domain.invoke import AttemptKind, AttemptResult, Invoker
from ticklock.domain.jobs import LOCK_MARGIN, Execution, ExecutionStatus, Fire, Hold, Job, Overlap, Trigger
from ticklock.domain.ledger import LedgerEntry, Reason, held_entry, hold_reason, slots_between
from ticklock.domain.overlap import following
from ticklock.domain.retry import RunOutcome, run_with_retries
from ticklock.domain.schedules import CronSchedule
from ticklock.errors import JobNotFound, LockUnavailable, StaleVersion, StoreUnavailable, TicklockError
from ticklock.handlers.contract import FireLogger, Handler, HandlerContext, Registry
from ticklock.ports import Completion, Locker, Metrics, Publisher, Started, Store

log = logging.getLogger("ticklock.lifecycle")
DISABLE_TRIES = 5

MAX_RESUMES = 3
ORPHANS_PER_SWEEP = 100


# A handler is quick once QUICK_RUNS runs of it averaged (moving) under QUICK_SECONDS, the last under ten
# times that: only its fires are run in batches (``run_many``), where each waits for the ones before it.
QUICK_RUNS, QUICK_SECONDS = 20, 0.002

# seconds between tries of a run's final write while the store is out
COMPLETE_BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)


class SkipReason(enum.StrEnum):
    UNKNOWN_HANDLER = "unknown_handler"
    LOCK_HELD = "lock_held"
    LOCK_UNAVAILABLE = "lock_unavailable"
    DUPLICATE = "duplicate"
    RUNNING_ELSEWHERE = "running_elsewhere"
    LEASE_EXPIRED = "lease_expired"
    GIVEN_UP = "given_up"  # the fire's execution was finalised as LOST instead of being resumed again
    CATCHUP_WINDOW_PASSED = "catchup_window_passed"  # later than the job's policy lets a fire run


# What a skip does to the claim. The rest (LOCK_HELD, RUNNING_ELSEWHERE) leave it alone: somebody else
# is running the job and will advance it; a duplicate delivery shares that holder's lease token.
_ADVANCE_AFTER = frozenset(
    {SkipReason.UNKNOWN_HANDLER, SkipReason.LOCK_UNAVAILABLE, SkipReason.DUPLICATE, SkipReason.CATCHUP_WINDOW_PASSED}
)
_RELEASE_AFTER = frozenset({SkipReason.LEASE_EXPIRED})
# how long a fire whose job lock is held by something other than its own run waits for it, in growing steps
LOCK_WAIT, LOCK_PAUSE = 2.0, 0.05
# how many runs' final writes may wait for the batches queued behind them (``run_many(defer=True)``), and
# for how long at most: a burst's fires all start (their records written) before its runs are finished,
# so that the last of 1,000 does not wait for 990 finishes too. A quarter second covers a burst of 1,000
# twice over on the 2-core machine; a run's row then reads 'running' up to that much after its end, and a
# process killed meanwhile leaves those rows to be resumed (run again, as any run cut off before its final
# write is: DESIGN.md, invariant 1's crash clause)
DEFER_RUNS, DEFER_SECONDS = 1024, 0.25
_JUST = timedelta(microseconds=1)
# The skips that are a fire's end, as ledger reasons. The others are not: the fire runs, or ran, anyway
# (LOCK_HELD and RUNNING_ELSEWHERE: its own run holds the job; DUPLICATE: it ran; LEASE_EXPIRED: it is
# released to be claimed again; GIVEN_UP: its execution is the record, LOST).
_FINAL_SKIPS = {
    SkipReason.UNKNOWN_HANDLER: Reason.UNKNOWN_HANDLER,
    SkipReason.LOCK_UNAVAILABLE: Reason.LOCK_UNAVAILABLE,
    SkipReason.CATCHUP_WINDOW_PASSED: Reason.CATCHUP_WINDOW_PASSED,
}


@functools.lru_cache(maxsize=1024)
def _handler_logger(name: str) -> logging.Logger:
    """Handler ``name``'s logger (``logging.getLogger`` takes the logging module's lock at every call)."""
    return logging.getLogger(f"ticklock.handler.{name}")


def _cause(execution: Execution) -> str:
    """What became of an execution left open: cut off by a shutdown, or its runner gone."""
    return "cut off" if execution.status is ExecutionStatus.INTERRUPTED else f"left running by {execution.owner}"


def _past_window(fire: Fire, now: datetime) -> float | None:
    """How late a scheduled fire is, if later than its job's catch-up window lets it run; else None."""
    window = fire.job.policy.catchup_window
    if fire.trigger is not Trigger.SCHEDULE or window is None:
        return None
    late = (now - fire.due).total_seconds()
    return late if late > window else None


def _lease_short(job: Job, now: datetime) -> bool:
    """Whether the job's claim ends before a run starting now would (its deadline plus the lock margin)."""
    return job.lease is None or now + timedelta(seconds=job.timeout + LOCK_MARGIN) > job.lease.until


def _fields(fire: Fire) -> dict[str, Any]:
    """The log fields of a fire."""
    job = fire.job
    return {
        "job_id": job.id,
        "job_name": job.name,
        "fire_time": fire.scheduled_at.isoformat(),
        "trigger": fire.trigger.value,
        "handler": job.handler,
    }


@dataclass(slots=True)
class _Ready:
    """A fire of a batch past its checks, holding its job's lock, its execution about to be recorded."""

    fire: Fire
    handler: Handler
    fields: dict[str, Any]
    key: str
    token: str
    execution: Execution
    done: Execution | None = None  # as finalised


@dataclass(eq=False)
class _Batch:
    """The recorded fires of a batch: the ones from ``next`` on are still to run, ``ran`` wait for their
    final write, ``alone`` (with their places in ``outcomes``) run through ``run`` after them; ``since``
    (monotonic) is when the run going on began (``inf`` between runs: a store write or a lock's release
    is not a hang), ``current`` its fire. One thread drives it at a time (the worker, or the take-over
    of a run past its deadline), taking each fire under ``lock``; ``take_stalled`` takes the rest away
    under it (``handed``) while a run holds that thread up. Only the thread driving it sets ``since``
    (a float's store: atomic under the GIL)."""

    items: list[_Ready]
    next: int = 0
    ran: list[tuple[_Ready, RunOutcome]] = field(default_factory=list)
    alone: list[tuple[int, Fire]] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    since: float = math.inf
    current: _Ready | Fire | None = None
    handed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def _done(execution: Execution, outcome: RunOutcome, now: datetime) -> Execution:
    """``execution`` as its run ended at ``now``."""
    return execution.with_changes(
        status=outcome.status,
        attempts=execution.attempts + outcome.attempts,
        error=outcome.error,
        finished_at=now,
        duration=(now - execution.started_at).total_seconds(),
    )


def _cut_off(outcome: RunOutcome, cut: datetime | None) -> RunOutcome:
    """A run that timed out at ``cut`` (cancel_other: its job's next slot) was cancelled, not late."""
    if cut is None or outcome.status is not ExecutionStatus.TIMEOUT:
        return outcome
    why = f"cancelled: the next fire, {cut.isoformat()}, came due (overlap policy cancel_other)"
    return replace(outcome, status=ExecutionStatus.CANCELLED, error=f"{why}; {outcome.error}")


class LockFailure(enum.StrEnum):
    SKIP = "skip"
    RUN = "run"


class FireLog(enum.StrEnum):
    """What the log says of a fire that runs without trouble (trouble is logged per fire either way)."""

    SUMMARY = "summary"  # one ``fires.summary`` line per interval, counting the fires started and finished
    EACH = "each"  # an ``execution.started`` and an ``execution.finished`` line per fire


class FireTally:
    """The fires since the last summary line. Thread-safe; ``flush`` writes the line (if any fire ran) and
    starts counting afresh. A line per fire cost ~190 us of CPU a fire at INFO (two lifecycle lines,
    formatted as JSON and written), three times what the store costs for it."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._mutex = threading.Lock()
        self._since = clock.now()
        self._started = 0
        self._lag_total = 0.0
        self._lag_max = -math.inf
        self._finished: dict[str, int] = {}
        self._handlers: dict[str, int] = {}

    def started(self, handler: str, lag: float) -> None:
        with self._mutex:
            self._started += 1
            self._lag_total += lag
            self._lag_max = max(self._lag_max, lag)
            self._handlers[handler] = self._handlers.get(handler, 0) + 1

    def finished(self, status: ExecutionStatus) -> None:
        with self._mutex:
            self._finished[status.value] = self._finished.get(status.value, 0) + 1

    def flush(self) -> None:
        now = self._clock.now()
        with self._mutex:
            started, lag_total, lag_max = self._started, self._lag_total, self._lag_max
            finished, handlers, since = self._finished, self._handlers, self._since
            self._started, self._lag_total, self._lag_max, self._finished, self._handlers = 0, 0.0, -math.inf, {}, {}
            self._since = now
        if not started and not finished:
            return
        log.info(
            "fires.summary",
            extra={
                "since": since.isoformat(),
                "seconds": round((now - since).total_seconds(), 3),
                "started": started,
                "finished": finished,
                "handlers": handlers,
                "lag_mean": round(lag_total / started, 6) if started else None,
                "lag_max": round(lag_max, 6) if started else None,
            },
        )


@dataclass(frozen=True)
class Outcome:
    """What ``TaskRunner.run`` did with a fire: the execution it ran, or why it skipped."""

    execution: Execution | None = None
    skipped: SkipReason | None = None


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
        self.publisher = publisher
        self.metrics = metrics
        self.registry = registry
        self.clock = clock
        self.invoker = invoker
        self.owner = owner
        self.lock_failure = lock_failure
        self.max_resumes = max_resumes
        self.alerts = alerts
        self.fire_log = fire_log
        self.tally = FireTally(clock)
        self.shutdown = threading.Event()
        self._speed: dict[str, tuple[int, float]] = {}  # handler: (runs timed, moving average of seconds)
        self._deferred: list[tuple[list[tuple[_Ready, RunOutcome]], datetime]] = []  # runs ended, not yet finished
        self._deferred_runs = 0
        self._deferred_mutex = threading.Lock()
        self._quick: dict[str, bool] = {}
        self._driving: dict[int, _Batch] = {}  # thread ident: the batch it drives (``take_stalled``)

    def run(self, fire: Fire) -> Outcome:
        job = fire.job
        self._held_if_reached(fire)
        fields = _fields(fire)
        handler = self.registry.get(job.handler)
        if handler is None:
            log.warning(
                "fire.skipped",
                extra={**fields, "reason": SkipReason.UNKNOWN_HANDLER.value, "registered": self.registry.names()},
            )
            return self._skip(fire, SkipReason.UNKNOWN_HANDLER)
        now = self.clock.now()
        late = _past_window(fire, now)
        # a fire that has an execution already (a resume, a second delivery) is not judged late: it goes on
        if late is not None and not self._has_run(fire):
            reason = SkipReason.CATCHUP_WINDOW_PASSED.value
            log.info("fire.skipped", extra={**fields, "reason": reason, "late": round(late, 3)})
            return self._skip(fire, SkipReason.CATCHUP_WINDOW_PASSED)
        if _lease_short(job, now):
            log.info("fire.skipped", extra={**fields, "reason": SkipReason.LEASE_EXPIRED.value})
            return self._skip(fire, SkipReason.LEASE_EXPIRED)

        # 1. lock: the job's, so that its runs do not overlap; under allow_all the fire's alone
        if fire.trigger is Trigger.BACKFILL:  # the backfill's own overlap: in turn, or side by side
            together = job.backfill is not None and job.backfill.overlap == Overlap.ALLOW_ALL.value
        else:
            together = job.policy.overlap is Overlap.ALLOW_ALL and isinstance(job.schedule, CronSchedule)
        key = f"fire:{fire.key}" if together else f"job:{job.id}"
        try:
            lock_token = self.locker.acquire(key, job.timeout + LOCK_MARGIN)
        except LockUnavailable as exc:
            log.error("lock.unavailable", extra={**fields, "error": str(exc), "policy": self.lock_failure.value})
            if self.lock_failure is LockFailure.SKIP:
                return self._skip(fire, SkipReason.LOCK_UNAVAILABLE)
            lock_token = ""
        if lock_token is None:
            lock_token = self._once_the_lock_is_free(fire, key, job.timeout + LOCK_MARGIN)
        if lock_token is None:
            log.info("fire.skipped", extra={**fields, "reason": SkipReason.LOCK_HELD.value})
            return self._skip(fire, SkipReason.LOCK_HELD)
        keep_lock = False
        try:
            # 2. record
            execution = self._record(fire, handler, fields, detached=together)
            if isinstance(execution, SkipReason):
                return Outcome(skipped=execution)
            fields["execution_id"] = execution.id
            if together:
                # 5. advance first: the job's next fire is claimable while this one runs; if the store fails
                # here, the fire runs all the same and the job is advanced when it ends, as for one-at-a-time
                try:
                    self._advance(fire)
                except TicklockError as exc:
                    log.warning("fire.advance_failed", extra={**fields, "error": exc.message})
                    together = False
            # 3. run
            advance = not together

            def conclude(outcome: RunOutcome) -> Execution:
                return self._conclude(fire, execution, outcome, fields, key, lock_token, advance=advance)

            outcome = self._run(fire, handler, execution, fields, conclude)
            if outcome.taken_over:  # its attempt outlived the deadline: ``conclude`` ran on another thread
                keep_lock = True
                return Outcome(execution=execution)
            keep_lock = True  # ``conclude`` has it now
            return Outcome(execution=conclude(outcome))
        finally:
            if lock_token and not keep_lock:
                # the record or the run failed: nothing of this fire holds the job any longer
                self._safely("lock.release_failed", fields, self.locker.release, key, lock_token)

    def _conclude(
        self,
        fire: Fire,
        execution: Execution,
        outcome: RunOutcome,
        fields: dict[str, Any],
        key: str,
        lock_token: str,
        *,
        advance: bool,
    ) -> Execution:
        """Steps 4 and 5 once the run is over: on the fire's own thread, or on a take-over's (an inline
        handler past its deadline, ``Invoker``)."""
        # a straggler past its deadline keeps the lock until its TTL; a cut-off at shutdown dies with the
        # process
        keep_lock = outcome.abandoned and outcome.status in (ExecutionStatus.TIMEOUT, ExecutionStatus.CANCELLED)
        if lock_token and not keep_lock:
            # the run is over: the lock goes before the advance makes the job claimable, so that a fire due
            # at once (a buffered one, the one that cancelled this) does not meet it and wait out its lease.
            # Safe: a second delivery of this fire meets its row, RUNNING or final
            self._safely("lock.release_failed", fields, self.locker.release, key, lock_token)
        # 4. finalise, 5. advance
        return self._finish(fire, execution, outcome, fields, advance=advance)

    # -- several fires at once ------------------------------------------------------------------------
    def batchable(self, fire: Fire) -> bool:
        """Whether ``fire`` may be taken with others (``run_many``): its handler is quick, and it needs
        nothing of the single path's (no retries, whose backoff would hold up the batch; no hold reached;
        no backfill; not allow_all)."""
        job = fire.job
        return (
            self._quick.get(job.handler, False)
            and job.max_retries == 0
            and job.hold is None
            and fire.trigger is not Trigger.BACKFILL
            and job.policy.overlap is not Overlap.ALLOW_ALL
        )

    def expected_seconds(self, fire: Fire) -> float:
        """How long ``fire``'s run is expected to take: its handler's moving average (one not timed yet: a
        quick handler's bound, QUICK_SECONDS)."""
        return self._speed.get(fire.job.handler, (0, QUICK_SECONDS))[1]

    def run_many(self, fires: Sequence[Fire], *, defer: bool = False) -> list[Outcome]:
        """Fires taken together (each ``batchable``), each through the five steps as ``run`` takes it, with
        their records written in one store write and their final states in one: under a burst each fire
        then shares its two commits with the batch. A fire off the common path (its lock held, its lease
        short, late, an execution of it there already) goes through ``run`` after the batch. A run that
        outlives its deadline is concluded by its take-over, which goes on with the rest of the batch, and a
        run that lasts a while may see the rest taken to another thread (``take_stalled``); the outcomes
        returned are then the ones known (the rest are empty, or filled in later by the thread that runs
        them: nothing in ``serve`` reads them). The batch's executions are recorded
        with one ``started_at``: a fire's handler starts after those before it in the batch (quick ones, a
        few milliseconds in all), and one held up longer is stamped afresh (``_on_time``).

        ``defer``: more fires wait behind these (the worker pool says so). The runs' final writes (steps 4
        and 5) then wait, as written at the runs' end, for those of the batches after, up to ``DEFER_RUNS``
        runs or ``DEFER_SECONDS``, so that a burst's fires all start before its runs are finished; whoever
        sees no fire left calls ``finish_deferred``. Their outcomes are then the executions as started."""
        if len(fires) == 1:
            self.finish_deferred()
            return [self.run(fires[0])]
        outcomes = [Outcome() for _ in fires]
        now = self.clock.now()
        self._finish_deferred_if_old(now)
        ready: list[tuple[int, _Ready]] = []
        alone: list[int] = []
        for i, fire in enumerate(fires):
            item = self._ready(fire, now)
            if item is None:
                alone.append(i)
            else:
                ready.append((i, item))
        started: list[Started] = []
        if ready:
            try:
                started = self.store.start_executions([item.execution for _, item in ready])
            except Exception as exc:  # noqa: BLE001 - each fire then goes the single path, and meets it there
                log.warning("batch.record_failed", extra={"fires": len(ready), "error": f"{type(exc).__name__}: {exc}"})
        batch, places = _Batch([], outcomes=outcomes), []
        for k, (i, item) in enumerate(ready):
            if k >= len(started) or not started[k].created:  # not recorded, or recorded before: on its own
                self._let_go(item)
                alone.append(i)
                continue
            item.fields["execution_id"] = item.execution.id
            self._recorded(item.fire, item.handler, item.execution, item.fields, now)
            batch.items.append(item)
            places.append(i)
        batch.alone = [(i, fires[i]) for i in sorted(alone)]
        if self._drive(batch, defer=defer):
            for i, item in zip(places, batch.items, strict=True):
                outcomes[i] = Outcome(execution=item.done or item.execution)
        return outcomes

    def _ready(self, fire: Fire, now: datetime) -> _Ready | None:
        """``fire`` with its lock taken and its execution made, if it is on the common path; else None."""
        job = fire.job
        handler = self.registry.get(job.handler)
        if handler is None or not self.batchable(fire) or _past_window(fire, now) is not None or _lease_short(job, now):
            return None
        key = f"job:{job.id}"
        try:
            token = self.locker.acquire(key, job.timeout + LOCK_MARGIN)
        except LockUnavailable:
            return None
        if not token:
            return None
        return _Ready(fire, handler, _fields(fire), key, token, self._fresh(fire, handler, now, detached=False))

    def _drive(self, batch: _Batch, *, defer: bool = False) -> bool:
        """Run what is left of ``batch``, then write the final states of its runs together (or, with
        ``defer``, leave them to ``finish_deferred``). False if a run outlived its deadline (its take-over
        concluded it and went on with the rest, and wrote them) or held this thread up until the rest was
        handed to another (``take_stalled``)."""
        me = threading.get_ident()
        outer = self._driving.get(me)
        self._driving[me] = batch
        try:
            return self._drive_here(batch, defer=defer)
        finally:
            if outer is None:
                del self._driving[me]
            else:
                self._driving[me] = outer

    def _drive_here(self, batch: _Batch, *, defer: bool) -> bool:
        ended: tuple[_Ready, RunOutcome] | None = None  # the last run, put in ``ran`` as the next is taken
        while True:
            with batch.lock:
                if ended is not None:
                    batch.ran.append(ended)
                    ended = None
                if batch.next >= len(batch.items):
                    break
                item = batch.items[batch.next]
                batch.next += 1
            if not self._on_time(item):
                continue
            batch.current, batch.since = item, time.monotonic()

            def conclude(outcome: RunOutcome, item: _Ready = item) -> None:
                # the take-over's thread: this run on its own, then the rest of the batch
                item.done = self._conclude(
                    item.fire, item.execution, outcome, item.fields, item.key, item.token, advance=True
                )
                self._drive(batch)

            try:
                outcome = self._run(item.fire, item.handler, item.execution, item.fields, conclude)
                if outcome.taken_over:
                    return False  # the take-over drives the batch now (``since`` is its to set)
                batch.since = math.inf
                if outcome.status is ExecutionStatus.INTERRUPTED or outcome.abandoned:
                    item.done = self._conclude(
                        item.fire, item.execution, outcome, item.fields, item.key, item.token, advance=True
                    )
                    continue
            except Exception:  # as a worker's crash in ``run``: the others of the batch go on
                batch.since = math.inf
                log.exception("fire.crashed", extra=item.fields)
                self._let_go(item)
                continue
            # the run is over: the lock goes now, as in ``_conclude``
            self._let_go(item)
            ended = (item, outcome)
        with batch.lock:
            ran, batch.ran = batch.ran, []
        if defer:
            self._defer(ran)
        else:
            self.finish_deferred()  # the runs ended before these are written first
            self._finish_many(ran)
        self._run_alone(batch)
        with batch.lock:
            return not batch.handed

    def _run_alone(self, batch: _Batch) -> None:
        """The fires of ``batch`` off the common path, each through ``run``, after the batch's own."""
        first = True
        while True:
            with batch.lock:
                batch.since = math.inf
                if not batch.alone:
                    return
                i, fire = batch.alone.pop(0)
                # the whole of ``run``: a fire that waits there (for a lock held elsewhere, up to LOCK_WAIT)
                # holds up the ones after it as a run that hangs does
                batch.current, batch.since = fire, time.monotonic()
            if first:
                # a fire on its own may wait (a held lock, a slow run, a take-over that retires this
                # thread): what waits is written first, not left behind it
                self.finish_deferred()
                first = False
            try:
                batch.outcomes[i] = self.run(fire)
            except Exception:
                log.exception("fire.crashed", extra=_fields(fire))

    def take_stalled(self, after: float, most: int) -> list[Callable[[], object]]:
        """The rest of each batch (up to ``most``) whose current run has lasted ``after`` seconds (a quick
        handler that hangs), taken from the thread it holds up: the fires not begun (the batch's and those
        to run alone after it), and the runs ended before (their final writes, on which their jobs' next
        fires wait), each as a callable that drives them on the thread that calls it. The held-up thread
        finishes its own run alone, when it ends. So a fire does not wait for the run of another job's
        handler until that one's deadline (its take-over)."""
        now = time.monotonic()
        rests: list[Callable[[], object]] = []
        batches = {id(batch): batch for batch in self._driving.copy().values()}
        for batch in batches.values():
            if len(rests) >= most:
                break
            with batch.lock:
                seconds = now - batch.since  # read once: its driver sets it without the lock
                if seconds < after or (batch.next >= len(batch.items) and not (batch.ran or batch.alone)):
                    continue
                rest = _Batch(batch.items[batch.next :], ran=batch.ran, alone=batch.alone, outcomes=batch.outcomes)
                del batch.items[batch.next :]
                batch.ran, batch.alone, batch.handed = [], [], True
                current = batch.current
            held = current.fields if isinstance(current, _Ready) else _fields(current) if current else {}
            log.warning(
                "batch.handed_off",
                extra={
                    **held,
                    "seconds": round(seconds, 3),
                    "fires": len(rest.items),
                    "ran": len(rest.ran),
                    "alone": len(rest.alone),
                },
            )
            rests.append(functools.partial(self._drive_rest, rest))
        return rests

    def _drive_rest(self, rest: _Batch) -> None:
        """The rest of a batch, taken from a thread held up (``take_stalled``), on the caller's thread."""
        try:
            self._drive(rest)
        except Exception:  # a thread of its own: nothing above it to catch
            log.exception("batch.rest_crashed", extra={"fires": len(rest.items)})

    def _defer(self, ran: list[tuple[_Ready, RunOutcome]]) -> None:
        """Keep ``ran`` to be finished with the batches after it, as of now (its runs' end). The first runs
        deferred start a timer: whatever the workers do next (a batch whose run hangs till its deadline),
        what waits is written once the oldest is ``DEFER_SECONDS`` old."""
        now = self.clock.now()
        with self._deferred_mutex:
            first = not self._deferred
            if ran:
                self._deferred.append((ran, now))
                self._deferred_runs += len(ran)
            full = self._deferred_runs >= DEFER_RUNS
        if full:
            self.finish_deferred()
            return
        self._finish_deferred_if_old(now)
        if first and ran:
            timer = threading.Timer(DEFER_SECONDS, self._finish_deferred_on_time)
            timer.daemon = True
            timer.start()

    def _finish_deferred_on_time(self) -> None:
        """The timer's end: what waits since ``DEFER_SECONDS`` or more is written; runs deferred later (the
        first written meanwhile) are left to their own timer."""
        try:
            self._finish_deferred_if_old(self.clock.now())
        except Exception:  # a thread of its own: nothing above it to catch
            log.exception("fire.finish_deferred_failed")

    def _finish_deferred_if_old(self, now: datetime) -> None:
        """``finish_deferred`` if the oldest deferred runs ended ``DEFER_SECONDS`` ago (checked as each batch
        starts and as one is deferred: a batch's own runs are quick ones, milliseconds)."""
        with self._deferred_mutex:
            old = bool(self._deferred) and (now - self._deferred[0][1]).total_seconds() >= DEFER_SECONDS
        if old:
            self.finish_deferred()

    def finish_deferred(self) -> None:
        """Write the final states of the runs ``run_many(defer=True)`` left, oldest first, each batch as of
        its runs' end (its ``finished_at``, its next run), as they would have been written then."""
        with self._deferred_mutex:
            if not self._deferred:
                return
            deferred, self._deferred, self._deferred_runs = self._deferred, [], 0
        for ran, ended in deferred:
            self._finish_many(ran, now=ended)  # each fire guarded inside: a failure keeps no other unwritten

    def _on_time(self, item: _Ready) -> bool:
        """A fire of a batch about to run: if the runs before it took a while (a tenth of its timeout, or a
        second: one hung till its deadline), its record is stamped afresh, so that its own time starts now,
        not when the batch was recorded. False if the record could not be (the store down: the fire is
        released; or the row taken over: someone else has it)."""
        now = self.clock.now()
        timeout = item.fire.job.timeout
        if (now - item.execution.started_at).total_seconds() <= min(1.0, timeout / 10):
            return True
        fresh = item.execution.with_changes(started_at=now, deadline_at=now + timedelta(seconds=timeout))
        try:
            taken = self.store.take_over_execution(fresh, previous_token=item.execution.run_token)
        except TicklockError as exc:
            log.warning("batch.restamp_failed", extra={**item.fields, "error": exc.message})
            self._let_go(item)
            return False  # RUNNING with an early deadline: resumed by the next claim, once its lease ends
        if not taken:
            self._let_go(item)
            return False
        item.execution = fresh
        return True

    def _let_go(self, item: _Ready) -> None:
        """Release a batch item's job lock (its run is over, or it leaves the batch)."""
        self._safely("lock.release_failed", item.fields, self.locker.release, item.key, item.token)

    def _finish_many(self, ran: list[tuple[_Ready, RunOutcome]], *, now: datetime | None = None) -> None:
        """Steps 4 and 5 for the runs of a batch, as of ``now`` (their end; the clock's now if None): one
        ``complete_many``; if that fails, each alone (retried through an outage, as ``_complete``)."""
        if not ran:
            return
        now = now or self.clock.now()
        ends = []
        for item, outcome in ran:
            try:
                done = _done(item.execution, outcome, now)
                next_run, stop = self._next_run(item.fire, now, done.started_at)
            except Exception:  # one fire's failure must not keep the others unfinished (it is resumed)
                log.exception("fire.finish_failed", extra=item.fields)
                continue
            ends.append((item, outcome, done, next_run, stop))
        results: list[tuple[bool, bool]] | None = None
        try:
            results = self.store.complete_many([Completion(d, i.fire, n) for i, _, d, n, _ in ends], now=now)
        except Exception as exc:  # noqa: BLE001 - each is completed alone below, retried through an outage
            log.warning("batch.complete_failed", extra={"fires": len(ends), "error": f"{type(exc).__name__}: {exc}"})
        for k, (item, outcome, done, next_run, stop) in enumerate(ends):
            try:
                if results is None:
                    finished, advanced, stop, next_run = self._complete(done, item.fire, now, retried=True)
                else:
                    finished, advanced = results[k]
                if finished and advanced:
                    self._passed(item.fire, next_run, item.execution.started_at, now)
                item.done = self._finished(
                    item.fire, done, outcome, item.fields, finished=finished, advanced=advanced, stop=stop
                )
            except Exception:  # one fire's failure must not keep the others unfinished
                log.exception("fire.finish_failed", extra=item.fields)

    def _once_the_lock_is_free(self, fire: Fire, key: str, ttl: float) -> str | None:
        """The lock is held. A LOCK_HELD skip leaves the fire to the run holding it, and that is right
        when the holder is this fire's own run (a second delivery: its execution is there, or is about to
        be). Anything else holds it briefly: a late copy of an earlier fire, which meets its execution and
        lets go within milliseconds. Skipping then would leave this fire unrun until its claim ran out
        (the Lambda shape's emulation saw one job in fifty stall a minute so). So: while no execution of
        this fire appears, try again, for up to ``LOCK_WAIT`` seconds; None if it is still held then."""
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

    # -- step 2 -----------------------------------------------------------------------------------
    def _record(
        self, fire: Fire, handler: Handler, fields: dict[str, Any], *, detached: bool
    ) -> Execution | SkipReason:
        now = self.clock.now()
        fresh = self._fresh(fire, handler, now, detached=detached)
        started = self.store.start_execution(fresh)
        execution = started.execution
        if not started.created:
            resumed = self._resume(fire, execution, fresh, fields)
            if isinstance(resumed, SkipReason):
                return resumed
            execution = resumed
        self._recorded(fire, handler, execution, fields, now)
        return execution

    def _fresh(self, fire: Fire, handler: Handler, now: datetime, *, detached: bool) -> Execution:
        job = fire.job
        return Execution(
            id=new_id(),
            job_id=job.id,
            fire_key=fire.key,
            handler=handler.name,
            trigger=fire.trigger,
            scheduled_at=fire.scheduled_at,
            started_at=now,
            deadline_at=now + timedelta(seconds=job.timeout),
            run_token=new_token(),  # unique (96 random bits) and cheap: uuid4 makes a system call each
            owner=self.owner,
            jitter=fire.jitter,
            detached=detached,
        )

    def _recorded(
        self, fire: Fire, handler: Handler, execution: Execution, fields: dict[str, Any], now: datetime
    ) -> None:
        """What follows a fire's record: the log (or the tally), the measure, the event, the alerts."""
        if self.fire_log is FireLog.EACH:
            log.info(
                "execution.started",
                extra={
                    **fields,
                    "execution_id": execution.id,
                    "lag": round(execution.lag, 6),
                    "resumes": execution.resumes,
                },
            )
        else:
            self.tally.started(handler.name, execution.lag)
        self._safely("metrics.failed", fields, self.metrics.fire_started, handler.name, execution.lag)
        job = fire.job
        if self.publisher.publishes:
            event = ExecutionEvent.started(execution, job.name, now)
            self._safely("publish.failed", fields, self.publisher.publish, event)
        if self.alerts is not None and job.open_alerts:
            self._safely("alert.failed", fields, self.alerts.started, job)

    def _resume(
        self, fire: Fire, existing: Execution, fresh: Execution, fields: dict[str, Any]
    ) -> Execution | SkipReason:
        now = self.clock.now()
        if existing.status.final:
            log.info("fire.skipped", extra={**fields, "reason": "duplicate", "execution_id": existing.id})
            # advanced as the run it duplicates advances (from the same start), should that advance not
            # have landed yet: both then compute one next fire and the same ledger entries
            ran = existing.started_at if existing.status is not ExecutionStatus.LOST else None
            self._skip(fire, SkipReason.DUPLICATE, started=ran)
            return SkipReason.DUPLICATE
        orphaned = existing.deadline_at + timedelta(seconds=LOCK_MARGIN) < now
        if existing.status is ExecutionStatus.RUNNING and not orphaned:
            self._skip(fire, SkipReason.RUNNING_ELSEWHERE)
            return SkipReason.RUNNING_ELSEWHERE
        if existing.resumes >= self.max_resumes:
            reason = f"{_cause(existing)} and not run again: {existing.resumes} resume(s) of {self.max_resumes}"
            self._lose(fire, existing, reason)
            return SkipReason.GIVEN_UP
        resumed = existing.with_changes(
            status=ExecutionStatus.RUNNING,
            started_at=now,
            deadline_at=fresh.deadline_at,
            run_token=fresh.run_token,
            owner=self.owner,
            resumes=existing.resumes + 1,
            finished_at=None,
            duration=None,
        )
        if not self.store.take_over_execution(resumed, previous_token=existing.run_token):
            self._skip(fire, SkipReason.RUNNING_ELSEWHERE)
            return SkipReason.RUNNING_ELSEWHERE
        log.warning(
            "execution.resumed",
            extra={
                **fields,
                "execution_id": existing.id,
                "previous_owner": existing.owner,
                "previous_status": existing.status.value,
            },
        )
        return resumed

    def give_up(self, fire: Fire, error: str) -> None:
        """Record ``fire`` as LOST with ``error`` (unless its execution is already final) and advance its job:
        for a fire that cannot be processed at all (a message about to be dead-lettered)."""
        self._held_if_reached(fire)  # the hold before it ended all the same
        now = self.clock.now()
        placeholder = Execution(
            id=new_id(),
            job_id=fire.job.id,
            fire_key=fire.key,
            handler=fire.job.handler,
            trigger=fire.trigger,
            scheduled_at=fire.scheduled_at,
            started_at=now,
            deadline_at=now,
            run_token=uuid.uuid4().hex,
            owner=self.owner,
        )
        started = self.store.start_execution(placeholder)
        execution = started.execution
        live = execution.deadline_at + timedelta(seconds=LOCK_MARGIN) >= now
        if execution.status.final or (not started.created and execution.status is ExecutionStatus.RUNNING and live):
            return  # finished, or running somewhere right now: that run decides
        self._lose(fire, execution, error)

    def lose_orphans(self, *, limit: int = ORPHANS_PER_SWEEP) -> int:
        """Finalise as LOST the allow_all fires whose run was cut off or whose runner vanished (past the
        deadline and the lock margin): their job went on when they started, so no claim brings them back
        to be resumed. Other jobs' such fires are resumed by their next claim, and left alone here.
        Returns how many were lost."""
        now = self.clock.now()
        found = self.store.open_executions(deadline_before=now - timedelta(seconds=LOCK_MARGIN), limit=limit)
        lost = 0
        for execution in found:
            try:
                job: Job | None = self.store.get_job(execution.job_id)
            except JobNotFound:
                job = None
            error = f"{_cause(execution)}; not run again: under allow_all its job went on when it started"
            lost += self._finalise_lost(execution, job, error)
        return lost

    def _lose(self, fire: Fire, execution: Execution, error: str) -> None:
        self._finalise_lost(execution, fire.job, error)
        self._advance(fire)

    def _finalise_lost(self, execution: Execution, job: Job | None, error: str) -> bool:
        """Finish ``execution`` as LOST with ``error`` (unless someone else took it over), and say so."""
        lost = execution.with_changes(status=ExecutionStatus.LOST, finished_at=self.clock.now(), error=error)
        if not self.store.finish_execution(lost):
            return False
        fields = {"job_id": lost.job_id, "fire_time": lost.scheduled_at.isoformat(), "execution_id": lost.id}
        log.error("execution.lost", extra={**fields, "error": error})
        self._safely("metrics.failed", fields, self.metrics.fire_finished, lost.handler, lost.status.value, 0.0, 0)
        self._safely("metrics.failed", fields, self.metrics.fires_accounted, "ran", lost.status.value, 1)
        self._safely(
            "publish.failed", fields, self.publisher.publish, ExecutionEvent.finished(lost, job.name if job else "")
        )
        if self.alerts is not None and job is not None and job.alerts is not None:
            self._safely("alert.failed", fields, self.alerts.finished, job, lost)  # lost is a failure too
        return True

    # -- step 3 -----------------------------------------------------------------------------------
    def _run(
        self,
        fire: Fire,
        handler: Handler,
        execution: Execution,
        fields: dict[str, Any],
        conclude: Callable[[RunOutcome], object],
    ) -> RunOutcome:
        job = fire.job
        adapter = FireLogger(
            _handler_logger(handler.name),
            {"job_id": job.id, "fire_time": fields["fire_time"], "execution_id": execution.id},
        )
        # cancel_other: the run is cut off when the job's next slot comes due (the first after it started,
        # its jitter included); a sync handler then has LOCK_MARGIN seconds to see ``ctx.cancelled`` and
        # return. A manual run is not cut: no fire of the schedule waits on it.
        cut = None
        cancellable = fire.trigger is Trigger.SCHEDULE and isinstance(job.schedule, CronSchedule)
        if job.policy.overlap is Overlap.CANCEL_OTHER and cancellable:
            cut = job.jittered(job.schedule.next_after(max(execution.started_at, fire.scheduled_at)))
            cut = None if cut is None or cut >= execution.deadline_at else cut
        grace = 0.0 if cut is None else LOCK_MARGIN
        deadline = cut or execution.deadline_at

        def attempt(number: int, seconds_left: float) -> AttemptResult:
            ctx = HandlerContext(
                job_id=job.id,
                job_name=job.name,
                payload=job.payload,
                scheduled_at=fire.scheduled_at,
                execution_id=execution.id,
                attempt=execution.attempts + number,
                deadline=deadline,  # a handler pacing itself by ``remaining()`` stops before it is cut off
                logger=adapter,
                now=self.clock.now,
            )

            def take_over(result: AttemptResult) -> None:
                # the attempt is given up on the caller's behalf: what ``run_with_retries`` and the cut below
                # would have made of it, concluded here
                failed = {"attempt": ctx.attempt, "outcome": result.kind.value, "error": result.error}
                log.warning("attempt.failed", extra={**fields, **failed})
                cut_off = result.kind is AttemptKind.INTERRUPTED
                status = ExecutionStatus.INTERRUPTED if cut_off else ExecutionStatus.TIMEOUT
                conclude(_cut_off(RunOutcome(status, number, result.error, abandoned=True), cut))

            result = self.invoker.call(handler, ctx, seconds_left, grace=grace, take_over=take_over)
            if result.taken_over:
                return result
            if result.error:
                log.warning(
                    "attempt.failed",
                    extra={**fields, "attempt": ctx.attempt, "outcome": result.kind.value, "error": result.error},
                )
            return result

        begun = time.perf_counter()
        outcome = run_with_retries(
            attempt, clock=self.clock, deadline=deadline, max_retries=job.max_retries, cancel=self.shutdown
        )
        self._timed(handler.name, time.perf_counter() - begun)
        return outcome if outcome.taken_over else _cut_off(outcome, cut)

    def _timed(self, name: str, seconds: float) -> None:
        """A run of handler ``name`` took ``seconds``: is it (still) quick? (Unlocked: a lost update between
        two workers costs one reading.)"""
        runs, average = self._speed.get(name, (0, 0.0))
        average = seconds if not runs else average + (seconds - average) / 8
        self._speed[name] = (runs + 1, average)
        self._quick[name] = runs + 1 >= QUICK_RUNS and average < QUICK_SECONDS and seconds < 10 * QUICK_SECONDS

    # -- steps 4 and 5 ----------------------------------------------------------------------------
    def _finish(
        self, fire: Fire, execution: Execution, outcome: RunOutcome, fields: dict[str, Any], *, advance: bool
    ) -> Execution:
        now = self.clock.now()
        done = _done(execution, outcome, now)
        if done.status is ExecutionStatus.INTERRUPTED:
            finished = self.store.finish_execution(done)
            if finished and advance:
                self.store.release(fire.job.id, fire.lease_token)
            advanced, stop = True, None
        elif not advance:  # advanced when it started (allow_all)
            finished, advanced, stop = self._finish_only(done), True, None
        else:
            finished, advanced, stop, next_run = self._complete(done, fire, now)
            if finished and advanced:
                self._passed(fire, next_run, execution.started_at, now)
        return self._finished(fire, done, outcome, fields, finished=finished, advanced=advanced, stop=stop)

    def _finished(
        self,
        fire: Fire,
        done: Execution,
        outcome: RunOutcome,
        fields: dict[str, Any],
        *,
        finished: bool,
        advanced: bool,
        stop: str | None,
    ) -> Execution:
        """What follows a run's final write: the log, the measures, the event, the alerts."""
        if not finished:
            log.warning("execution.finish_lost", extra=fields)
            return done
        if not advanced:
            log.warning("fire.advance_lost", extra=fields)
        if done.status is not ExecutionStatus.INTERRUPTED:
            self._safely("metrics.failed", fields, self.metrics.fires_accounted, "ran", done.status.value, 1)
        succeeded = done.status is ExecutionStatus.SUCCESS
        if self.fire_log is FireLog.SUMMARY:
            self.tally.finished(done.status)
        if not succeeded or self.fire_log is FireLog.EACH:
            log.log(
                logging.INFO if succeeded else logging.WARNING,
                "execution.finished",
                extra={
                    **fields,
                    "status": done.status.value,
                    "attempts": done.attempts,
                    "duration": done.duration,
                    "error": done.error,
                },
            )
        self._safely(
            "metrics.failed",
            fields,
            self.metrics.fire_finished,
            done.handler,
            done.status.value,
            done.duration or 0.0,
            outcome.attempts,
        )
        if self.publisher.publishes:
            self._safely("publish.failed", fields, self.publisher.publish, ExecutionEvent.finished(done, fire.job.name))
        if self.alerts is not None and (fire.job.alerts is not None or fire.job.open_alerts):
            self._safely("alert.failed", fields, self.alerts.finished, fire.job, done)
        if advanced and stop is not None:
            self._disabled(fire, stop, done)
        return done

    def _complete(
        self, done: Execution, fire: Fire, now: datetime, *, retried: bool = False
    ) -> tuple[bool, bool, str | None, datetime | None]:
        """``Store.complete``, retried through a store outage: giving up would leave the row RUNNING and the
        fire would be resumed - run again - once its lease ran out. Safe to retry: the writes are guarded.
        ``retried``: a write of this completion failed before (``complete_many``), and may have applied.
        Returns (finished, advanced, why the job was disabled if its schedule found no next fire, the next
        fire it was advanced to)."""
        next_run, stop = self._next_run(fire, now, done.started_at)
        for attempt, wait in enumerate((*COMPLETE_BACKOFF, None)):
            try:
                finished, advanced = self.store.complete(done, fire, next_run_at=next_run, now=now)
                if not finished and (attempt > 0 or retried):
                    # an earlier try may have finished the row and failed on the advance
                    stored = self.store.get_execution(done.id)
                    if stored.run_token != done.run_token or stored.status is not done.status:
                        return False, False, None, next_run
                    finished, advanced = True, self.store.advance(fire, next_run_at=next_run, now=now)
                return finished, advanced, stop, next_run
            except StoreUnavailable as exc:
                if wait is None:
                    raise
                log.warning("execution.complete_retry", extra={"job_id": fire.job.id, "error": str(exc), "wait": wait})
                self.clock.sleep(wait)
        raise AssertionError("unreachable")

    def _finish_only(self, done: Execution) -> bool:
        """``Store.finish_execution``, retried through a store outage as ``_complete`` is."""
        for wait in (*COMPLETE_BACKOFF, None):
            try:
                return self.store.finish_execution(done)
            except StoreUnavailable as exc:
                if wait is None:
                    raise
                log.warning("execution.finish_retry", extra={"job_id": done.job_id, "error": str(exc), "wait": wait})
                self.clock.sleep(wait)
        raise AssertionError("unreachable")

    @staticmethod
    def _next_run(fire: Fire, now: datetime, started: datetime | None) -> tuple[datetime | None, str | None]:
        """The job's next fire after ``fire`` (whose run started at ``started``; None: it did not run), by
        its overlap policy, and, when its schedule cannot compute one, why (the job is then disabled:
        next_run_at None)."""
        if fire.trigger is not Trigger.SCHEDULE:  # a manual or backfill fire does not move the schedule
            return fire.job.next_run_at, None
        try:
            return following(fire.job, fire.scheduled_at, started, now), None
        except Exception as exc:  # noqa: BLE001 - a schedule that cannot go on must not crash the fire
            # Raising here would leave the execution RUNNING, so the fire would be resumed (run again) and the
            # job never advanced. The fire is finalised as it ran, and the job is disabled with the reason.
            reason = f"its schedule found no next fire after {fire.scheduled_at.isoformat()}: {exc}"
            log.error(
                "fire.no_next_fire",
                extra={"job_id": fire.job.id, "fire_time": fire.scheduled_at.isoformat(), "error": reason},
            )
            return None, reason

    def _advance(self, fire: Fire, *, expected: bool = True, started: datetime | None = None) -> bool:
        now = self.clock.now()
        next_run, stop = self._next_run(fire, now, started)
        advanced = self.store.advance(fire, next_run_at=next_run, now=now)
        if not advanced and expected:
            log.warning("fire.advance_lost", extra={"job_id": fire.job.id, "fire_time": fire.scheduled_at.isoformat()})
        if advanced:
            self._passed(fire, next_run, started, now)
        if advanced and stop is not None:
            self._disabled(fire, stop, None)
        return advanced

    def _has_run(self, fire: Fire) -> bool:
        """Whether the fire has an execution (a delivery of it ran, or runs); a store error counts as yes:
        the ledger then says nothing rather than something false."""
        try:
            return self.store.execution_for(fire.job.id, fire.trigger, fire.scheduled_at) is not None
        except TicklockError:
            return True

    def _passed(self, fire: Fire, next_run: datetime | None, started: datetime | None, now: datetime) -> None:
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
            self._account(fire, LedgerEntry(fire.job.id, reason, first, last, count, now, Trigger.SCHEDULE, capped))

    def _held_if_reached(self, fire: Fire) -> None:
        hold = fire.job.hold
        if hold is not None and hold.resumes_at == fire.scheduled_at and fire.trigger is Trigger.SCHEDULE:
            self._held(fire, hold)

    def _held(self, fire: Fire, hold: Hold) -> None:
        """The fire a user's hold moved the job to has come: the slots the hold kept back are one entry
        (``paused`` or ``skip_next``), written once whichever delivery of the fire gets here first."""
        if hold.skipped_from is None:
            return
        after, now = hold.skipped_from - _JUST, self.clock.now()
        entry = held_entry(fire.job.id, fire.job.schedule, hold_reason(hold), after, fire.scheduled_at, now)
        if entry is not None:
            self._account(fire, entry)

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

    def _account(self, fire: Fire, entry: LedgerEntry) -> None:
        """Write a ledger entry once (a replica or a retry that wrote it already leaves it), then count and
        publish it. Fails soft: the run goes on, the failure is logged."""
        fields = {"job_id": fire.job.id, "fire_time": entry.first_at.isoformat(), "reason": entry.reason.value}
        try:
            if not self.store.record_fire(entry):
                return
        except TicklockError as exc:
            log.warning("ledger.record_failed", extra={**fields, "error": exc.message})
            return
        log.info(
            f"fire.{entry.outcome.value}", extra={**fields, "count": entry.count, "last": entry.last_at.isoformat()}
        )
        self._safely(
            "metrics.failed", fields, self.metrics.fires_accounted, entry.outcome.value, entry.reason.value, entry.count
        )
        event = ExecutionEvent.not_run(entry, fire.job.name, fire.job.handler)
        self._safely("publish.failed", fields, self.publisher.publish, event)

    def _disabled(self, fire: Fire, reason: str, execution: Execution | None) -> None:
        """The job was just disabled for ``reason``: record it on the job (the API shows it), count it, and
        say so on the bus. Fails soft: the fire is already finalised and the job already stopped."""
        fields = {"job_id": fire.job.id, "fire_time": fire.scheduled_at.isoformat()}
        self._safely("metrics.failed", fields, self.metrics.job_disabled, fire.job.handler)
        if execution is not None:
            event = ExecutionEvent.disabled(execution, fire.job.name, reason, self.clock.now())
            self._safely("publish.failed", fields, self.publisher.publish, event)
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

    def _skip(self, fire: Fire, reason: SkipReason, *, started: datetime | None = None) -> Outcome:
        fields = {"job_id": fire.job.id, "fire_time": fire.scheduled_at.isoformat()}
        self._safely("metrics.failed", fields, self.metrics.fire_skipped, fire.job.handler, reason.value)
        final = _FINAL_SKIPS.get(reason)
        if reason in _ADVANCE_AFTER:
            # a duplicate's job was normally advanced by the run it duplicates: only a crash between the
            # final write and the advance leaves it to be done here
            advanced = self._advance(fire, expected=reason is not SkipReason.DUPLICATE, started=started)
            # this fire will not run: the ledger says why - once its claim was still this one's (the
            # advance, guarded by the lease, applied) and no delivery of it has run (or runs) already
            if final is not None and advanced and not self._has_run(fire):
                now = self.clock.now()
                self._account(fire, LedgerEntry.one(fire.job.id, final, fire.scheduled_at, now, fire.trigger))
        elif reason in _RELEASE_AFTER:
            self.store.release(fire.job.id, fire.lease_token)
        return Outcome(skipped=reason)

    @staticmethod
    def _safely(event: str, fields: dict[str, Any], func: Callable[..., Any], *args: Any) -> None:
        try:
            func(*args)
        except Exception as exc:  # noqa: BLE001 - events and metrics fail soft
            log.warning(event, extra={**fields, "error": f"{type(exc).__name__}: {exc}"})
