"""The reference's retry rule: attempts with exponential backoff, all inside one deadline.

On error a handler is retried after 1 s, then 2, 4, 8, 16, 30, 30 ... seconds, up to ``max_retries``
retries, as long as the deadline allows. If the deadline falls before the next attempt could start, the
outcome is TIMEOUT and the error text keeps the last failure.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from ticklock.clock import Clock
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.fire_rules import RunOutcome
from ticklock.engine.invoke import AttemptKind, AttemptResult

BACKOFF_START = 1.0
BACKOFF_CAP = 30.0


def backoff(retry: int) -> float:
    """Seconds to wait before retry number ``retry`` (1-based)."""
    return min(BACKOFF_START * 2.0 ** (retry - 1), BACKOFF_CAP)


Attempt = Callable[[int, float], AttemptResult]


def run_with_retries(
    attempt: Attempt, *, clock: Clock, deadline: datetime, max_retries: int, cancel: threading.Event | None = None
) -> RunOutcome:
    """Call ``attempt(number, seconds_left)`` until it succeeds, retries run out, or time does."""
    last_error: str | None = None
    number = 0
    while True:
        if cancel is not None and cancel.is_set():  # shutting down: no new attempt starts
            return RunOutcome(ExecutionStatus.INTERRUPTED, number, "cut off by shutdown before the attempt")
        left = (deadline - clock.now()).total_seconds()
        if left <= 0:
            return RunOutcome(ExecutionStatus.TIMEOUT, number, _timeout_text(last_error))
        number += 1
        result = attempt(number, left)
        if result.kind is AttemptKind.OK:
            return RunOutcome(ExecutionStatus.SUCCESS, number)
        if result.kind is AttemptKind.TIMEOUT:
            return RunOutcome(ExecutionStatus.TIMEOUT, number, result.error, result.abandoned, result.taken_over)
        if result.kind is AttemptKind.INTERRUPTED:
            return RunOutcome(ExecutionStatus.INTERRUPTED, number, result.error, result.abandoned, result.taken_over)
        last_error = result.error
        if number > max_retries:
            return RunOutcome(ExecutionStatus.FAILED, number, last_error)
        wait = backoff(number)
        if (deadline - clock.now()).total_seconds() <= wait:
            return RunOutcome(ExecutionStatus.TIMEOUT, number, _timeout_text(last_error))
        if clock.sleep(wait, cancel):
            return RunOutcome(ExecutionStatus.INTERRUPTED, number, "cut off by shutdown while waiting to retry")


def _timeout_text(last_error: str | None) -> str:
    if last_error is None:
        return "deadline passed before the handler could run"
    return f"deadline reached before the next retry; last error: {last_error}"
