"""The rules a fire's path applies, as functions of what it knows: whether a fire may start, what to do
when its execution is found already recorded, and what its run's end makes of the execution. Pure: the
engine's fire path (``engine/fire_path.py``) reads the store and the clock and acts on the answers."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fires import LOCK_MARGIN, Fire, Trigger
from ticklock.domain.ids import new_id, new_token
from ticklock.domain.job_settings import Overlap
from ticklock.domain.ledger import Reason
from ticklock.domain.overlap import following
from ticklock.domain.schedules import CronSchedule


class SkipReason(enum.StrEnum):
    UNKNOWN_HANDLER = "unknown_handler"
    LOCK_HELD = "lock_held"
    LOCK_UNAVAILABLE = "lock_unavailable"
    DUPLICATE = "duplicate"
    RUNNING_ELSEWHERE = "running_elsewhere"
    LEASE_EXPIRED = "lease_expired"
    GIVEN_UP = "given_up"  # the fire's execution was finalised as LOST instead of being resumed again
    CATCHUP_WINDOW_PASSED = "catchup_window_passed"  # later than the job's policy lets a fire run


# The skips that advance the claim. The rest leave it alone: LOCK_HELD and RUNNING_ELSEWHERE, because
# somebody else runs the job and will advance it (a duplicate delivery shares that holder's claim);
# LEASE_EXPIRED, because the claim may be kept alive by a run elsewhere, and else lapses by itself.
ADVANCE_AFTER = frozenset(
    {SkipReason.UNKNOWN_HANDLER, SkipReason.LOCK_UNAVAILABLE, SkipReason.DUPLICATE, SkipReason.CATCHUP_WINDOW_PASSED}
)
# the skips that are a fire's end, as ledger reasons (the others run, or ran, anyway)
FINAL_SKIPS = {
    SkipReason.UNKNOWN_HANDLER: Reason.UNKNOWN_HANDLER,
    SkipReason.LOCK_UNAVAILABLE: Reason.LOCK_UNAVAILABLE,
    SkipReason.CATCHUP_WINDOW_PASSED: Reason.CATCHUP_WINDOW_PASSED,
}


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: its status, the attempts it made, the last error."""

    status: ExecutionStatus
    attempts: int
    error: str | None = None
    abandoned: bool = False  # the last attempt's sync thread still runs: keep the job's lock until its TTL
    taken_over: bool = False  # the last attempt was given up inline, and its take-over finished the fire


def past_window(fire: Fire, now: datetime) -> float | None:
    """How late a scheduled fire is, if later than its job's catch-up window lets it run; else None."""
    window = fire.job.policy.catchup_window
    if fire.trigger is not Trigger.SCHEDULE or window is None:
        return None
    late = (now - fire.due).total_seconds()
    return late if late > window else None


def lease_short(until: datetime | None, now: datetime, left: float) -> bool:
    """Whether a fire's claim (ending at ``until``) may end before the heartbeat next keeps it, ``left`` seconds
    from ``now``: then another claimer may take the job while it runs, and it does not start."""
    return until is None or until < now + timedelta(seconds=left)


def run_token(claim: str) -> str:
    """A run's token, which names the claim it runs under (``claim.random``): see ``on_found``."""
    return f"{claim}.{new_token()}"


def fresh_execution(fire: Fire, handler: str, now: datetime, *, owner: str) -> Execution:
    """The row step 2 records for ``fire``, its run starting ``now`` (allow_all's is ``detached``)."""
    job = fire.job
    return Execution(id=new_id(), job_id=job.id, fire_key=fire.key, handler=handler, trigger=fire.trigger,
                     scheduled_at=fire.scheduled_at, started_at=now, deadline_at=now + timedelta(seconds=job.timeout),
                     run_token=run_token(fire.lease_token), owner=owner, jitter=fire.jitter,
                     detached=side_by_side(fire))  # fmt: skip


def claim_of(execution: Execution) -> str | None:
    """The claim an execution's run was started under (None: a row from before claims were named)."""
    claim, dot, _ = execution.run_token.partition(".")
    return claim if dot else None


def side_by_side(fire: Fire) -> bool:
    """Whether ``fire`` runs beside the job's other fires (allow_all, or a backfill's own allow_all): then
    it locks the fire alone, and the job goes on as it starts."""
    job = fire.job
    if fire.trigger is Trigger.BACKFILL:
        return job.backfill is not None and job.backfill.overlap == Overlap.ALLOW_ALL.value
    return job.policy.overlap is Overlap.ALLOW_ALL and isinstance(job.schedule, CronSchedule)


def may_share(fire: Fire) -> bool:
    """Whether ``fire`` may run in turn with others, sharing their store writes: nothing of it needs it alone
    (retries, whose backoff would hold the others up; a hold that ends at it; a backfill; allow_all)."""
    job = fire.job
    return job.max_retries == 0 and job.hold is None and fire.trigger is not Trigger.BACKFILL and not side_by_side(fire)


def lock_key(fire: Fire) -> str:
    return f"fire:{fire.key}" if side_by_side(fire) else f"job:{fire.job.id}"


def cause(execution: Execution) -> str:
    """What became of an execution left open: cut off by a shutdown, or its runner gone."""
    return "cut off" if execution.status is ExecutionStatus.INTERRUPTED else f"left running by {execution.owner}"


@dataclass(frozen=True)
class Found:
    """What to do with a fire whose execution was recorded already (a second delivery, or a resume): skip it
    (``skip``, with ``started``: the run it duplicates began then), give it up (``lose``: the error), or run
    it on the same row (``resume``)."""

    skip: SkipReason | None = None
    started: datetime | None = None
    lose: str | None = None
    resume: Execution | None = None


def on_found(existing: Execution, fresh: Execution, now: datetime, *, owner: str, max_resumes: int) -> Found:
    """The rule for a fire's execution found recorded by ``fresh``'s run: final means a duplicate delivery
    (nothing runs; the job is advanced from the run's own start, as that run does). RUNNING under the same
    claim means a second delivery while it runs elsewhere. RUNNING under an earlier claim means that claim
    lapsed: its process stopped keeping it (``engine/heartbeat.py``), so it died or stalled. That run, or
    one INTERRUPTED (a shutdown cut it off), is resumed on the same row, at most ``max_resumes`` times,
    then given up as LOST. A row whose claim is not named is judged by its deadline."""
    if existing.status.final:
        return Found(
            SkipReason.DUPLICATE, started=existing.started_at if existing.status is not ExecutionStatus.LOST else None
        )
    if existing.status is ExecutionStatus.RUNNING and _alive(existing, fresh, now):
        return Found(SkipReason.RUNNING_ELSEWHERE)
    if existing.resumes >= max_resumes:
        return Found(lose=f"{cause(existing)} and not run again: {existing.resumes} resume(s) of {max_resumes}")
    return Found(
        resume=existing.with_changes(
            status=ExecutionStatus.RUNNING,
            started_at=now,
            deadline_at=fresh.deadline_at,
            run_token=fresh.run_token,
            owner=owner,
            resumes=existing.resumes + 1,
            finished_at=None,
            duration=None,
        )
    )


def _alive(existing: Execution, fresh: Execution, now: datetime) -> bool:
    claim = claim_of(existing)
    if claim is None:
        return existing.deadline_at + timedelta(seconds=LOCK_MARGIN) >= now
    return claim == claim_of(fresh)


def ended(execution: Execution, outcome: RunOutcome, now: datetime) -> Execution:
    """``execution`` as its run ended at ``now``."""
    return execution.with_changes(
        status=outcome.status,
        attempts=execution.attempts + outcome.attempts,
        error=outcome.error,
        finished_at=now,
        duration=(now - execution.started_at).total_seconds(),
    )


def cancel_at(fire: Fire, execution: Execution) -> datetime | None:
    """cancel_other: when the run is cut off, the job's next slot after it started (its jitter included),
    if that comes before its deadline. A manual run is not cut: no fire of the schedule waits on it."""
    job = fire.job
    if job.policy.overlap is not Overlap.CANCEL_OTHER or fire.trigger is not Trigger.SCHEDULE:
        return None
    if not isinstance(job.schedule, CronSchedule):
        return None
    cut = job.jittered(job.schedule.next_after(max(execution.started_at, fire.scheduled_at)))
    return None if cut is None or cut >= execution.deadline_at else cut


def cut_off(outcome: RunOutcome, cut: datetime | None) -> RunOutcome:
    """A run that timed out at ``cut`` (cancel_other: its job's next slot) was cancelled, not late."""
    if cut is None or outcome.status is not ExecutionStatus.TIMEOUT:
        return outcome
    why = f"cancelled: the next fire, {cut.isoformat()}, came due (overlap policy cancel_other)"
    return replace(outcome, status=ExecutionStatus.CANCELLED, error=f"{why}; {outcome.error}")


def next_run(fire: Fire, now: datetime, started: datetime | None) -> tuple[datetime | None, str | None]:
    """The job's next fire after ``fire`` (whose run started at ``started``; None: it did not run), by its
    overlap policy, and, when its schedule cannot compute one, why (the job is then disabled)."""
    if fire.trigger is not Trigger.SCHEDULE:  # a manual or backfill fire does not move the schedule
        return fire.job.next_run_at, None
    try:
        return following(fire.job, fire.scheduled_at, started, now), None
    except Exception as exc:  # noqa: BLE001 - a schedule that cannot go on must not crash the fire
        # Raising here would leave the execution RUNNING, so the fire would be resumed (run again) and the job
        # never advanced. The fire is finalised as it ran, and the job is disabled with the reason.
        return None, f"its schedule found no next fire after {fire.scheduled_at.isoformat()}: {exc}"
