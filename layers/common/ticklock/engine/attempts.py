"""Step 3 of a fire's path: its handler's attempts, each inside the run's deadline (``Invoker``), retried as
the job says (``run_with_retries``). Under cancel_other the run is cut off at the job's next slot. An
inline handler past its deadline is given up on the worker's behalf: ``conclude`` then finishes the fire
on the invoker's thread, and the worker, held by the handler, does nothing more with it."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from ticklock.clock import Clock
from ticklock.domain import fire_rules as rules
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fire_rules import RunOutcome
from ticklock.domain.fires import LOCK_MARGIN, Fire
from ticklock.engine.invoke import AttemptKind, AttemptResult, Invoker
from ticklock.engine.retry import run_with_retries
from ticklock.handlers.contract import FireLogger, Handler, HandlerContext

log = logging.getLogger("ticklock.lifecycle")  # a fire's life, as its log lines have always been named


@functools.lru_cache(maxsize=1024)
def _handler_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"ticklock.handler.{name}")


def run_attempts(invoker: Invoker, clock: Clock, fire: Fire, handler: Handler, execution: Execution,
                 fields: dict[str, Any], *, conclude: Callable[[RunOutcome], object],
                 cancel: threading.Event) -> RunOutcome:  # fmt: skip
    """How the run ended (``taken_over``: ``conclude`` was called on its behalf). ``cancel``: a shutdown cuts
    runs off, and no new attempt starts."""
    job = fire.job
    logger = FireLogger(_handler_logger(handler.name), {"job_id": job.id, "fire_time": fields["fire_time"],
                                                        "execution_id": execution.id})  # fmt: skip
    # cancel_other cuts the run off at the job's next slot; a sync handler then has LOCK_MARGIN seconds
    # to see ``ctx.cancelled`` and return
    cut = rules.cancel_at(fire, execution)
    grace = 0.0 if cut is None else LOCK_MARGIN
    deadline = cut or execution.deadline_at

    def attempt(number: int, seconds_left: float) -> AttemptResult:
        ctx = HandlerContext(job_id=job.id, job_name=job.name, payload=job.payload, scheduled_at=fire.scheduled_at,
                             execution_id=execution.id, attempt=execution.attempts + number, deadline=deadline,
                             logger=logger, now=clock.now)  # fmt: skip

        def take_over(result: AttemptResult) -> None:
            # what ``run_with_retries`` and the cut would have made of the attempt, on the invoker's thread
            log.warning("attempt.failed", extra={**fields, "attempt": ctx.attempt, "outcome": result.kind.value,
                                                 "error": result.error})  # fmt: skip
            status = ExecutionStatus.INTERRUPTED if result.kind is AttemptKind.INTERRUPTED else ExecutionStatus.TIMEOUT
            conclude(rules.cut_off(RunOutcome(status, number, result.error, abandoned=True), cut))

        result = invoker.call(handler, ctx, seconds_left, grace=grace, take_over=take_over)
        if result.error and not result.taken_over:
            log.warning("attempt.failed", extra={**fields, "attempt": ctx.attempt, "outcome": result.kind.value,
                                                 "error": result.error})  # fmt: skip
        return result

    outcome = run_with_retries(attempt, clock=clock, deadline=deadline, max_retries=job.max_retries, cancel=cancel)
    return outcome if outcome.taken_over else rules.cut_off(outcome, cut)
