"""The retry rule: exponential backoff 1, 2, 4 ... 30 s, all inside one deadline, on a FakeClock."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from ticklock.clock import FakeClock
from ticklock.domain.executions import ExecutionStatus
from ticklock.engine.invoke import AttemptKind, AttemptResult
from ticklock.engine.retry import backoff, run_with_retries

START = datetime(2026, 1, 1, tzinfo=UTC)


class Script:
    """An attempt function playing a list of results (the last one repeats), recording its calls."""

    def __init__(self, clock: FakeClock, results: Sequence[AttemptResult]) -> None:
        self.clock = clock
        self.results = list(results)
        self.calls: list[tuple[int, float, datetime]] = []

    def __call__(self, number: int, left: float) -> AttemptResult:
        self.calls.append((number, left, self.clock.now()))
        index = min(len(self.calls), len(self.results)) - 1
        return self.results[index]


def failing(count: int) -> list[AttemptResult]:
    return [AttemptResult(AttemptKind.ERROR, f"boom {n}") for n in range(1, count + 1)]


class AlwaysFailing(Script):
    """Fails every attempt with ``boom <number>``."""

    def __call__(self, number: int, left: float) -> AttemptResult:
        self.calls.append((number, left, self.clock.now()))
        return AttemptResult(AttemptKind.ERROR, f"boom {number}")


def always_failing(clock: FakeClock) -> AlwaysFailing:
    return AlwaysFailing(clock, [])


def test_backoff_values() -> None:
    assert [backoff(n) for n in range(1, 10)] == [1, 2, 4, 8, 16, 30, 30, 30, 30]


def test_backoff_sequence_until_retries_run_out() -> None:
    clock = FakeClock(START)
    attempt = always_failing(clock)
    outcome = run_with_retries(attempt, clock=clock, deadline=START + timedelta(hours=1), max_retries=7)
    assert clock.sleeps == [1, 2, 4, 8, 16, 30, 30]
    assert outcome.status is ExecutionStatus.FAILED
    assert outcome.attempts == 8
    assert outcome.error == "boom 8"
    assert [n for n, _, _ in attempt.calls] == [1, 2, 3, 4, 5, 6, 7, 8]
    # each attempt starts after the backoff, and is told how much time is left
    offsets = [(at - START).total_seconds() for _, _, at in attempt.calls]
    assert offsets == [0, 1, 3, 7, 15, 31, 61, 91]
    assert [left for _, left, _ in attempt.calls] == [3600 - o for o in offsets]


def test_success_first_time_does_not_sleep() -> None:
    clock = FakeClock(START)
    attempt = Script(clock, [AttemptResult(AttemptKind.OK)])
    outcome = run_with_retries(attempt, clock=clock, deadline=START + timedelta(seconds=60), max_retries=3)
    assert outcome.status is ExecutionStatus.SUCCESS
    assert outcome.attempts == 1
    assert outcome.error is None
    assert clock.sleeps == []


@pytest.mark.parametrize("failures", [1, 2, 3, 5])
def test_success_after_n_failures(failures: int) -> None:
    clock = FakeClock(START)
    attempt = Script(clock, [*failing(failures), AttemptResult(AttemptKind.OK)])
    outcome = run_with_retries(attempt, clock=clock, deadline=START + timedelta(minutes=10), max_retries=failures)
    assert outcome.status is ExecutionStatus.SUCCESS
    assert outcome.attempts == failures + 1
    assert outcome.error is None
    assert clock.sleeps == [backoff(n) for n in range(1, failures + 1)]


@pytest.mark.parametrize("max_retries", [0, 1, 3])
def test_failed_after_max_retries_keeps_last_error(max_retries: int) -> None:
    clock = FakeClock(START)
    attempt = always_failing(clock)
    outcome = run_with_retries(attempt, clock=clock, deadline=START + timedelta(hours=1), max_retries=max_retries)
    assert outcome.status is ExecutionStatus.FAILED
    assert outcome.attempts == max_retries + 1
    assert outcome.error == f"boom {max_retries + 1}"
    assert len(attempt.calls) == max_retries + 1
    assert clock.sleeps == [backoff(n) for n in range(1, max_retries + 1)]


def test_timeout_when_next_backoff_would_cross_the_deadline() -> None:
    clock = FakeClock(START)
    attempt = always_failing(clock)
    # attempts at t=0, 1, 3, 7; the next would wait 8 s to t=15, past the 10 s deadline
    outcome = run_with_retries(attempt, clock=clock, deadline=START + timedelta(seconds=10), max_retries=10)
    assert outcome.status is ExecutionStatus.TIMEOUT
    assert outcome.attempts == 4
    assert clock.sleeps == [1, 2, 4]
    assert outcome.error is not None
    assert "boom 4" in outcome.error
    assert clock.now() < START + timedelta(seconds=10)  # did not sleep past the deadline


def test_timeout_when_backoff_would_end_exactly_at_the_deadline() -> None:
    clock = FakeClock(START)
    attempt = always_failing(clock)
    # attempts at t=0, 1, 3; waiting 4 s would start the next attempt at 7 s = the deadline, with no time left
    outcome = run_with_retries(attempt, clock=clock, deadline=START + timedelta(seconds=7), max_retries=10)
    assert outcome.status is ExecutionStatus.TIMEOUT
    assert outcome.attempts == 3
    assert clock.sleeps == [1, 2]
    assert outcome.error is not None
    assert "boom 3" in outcome.error


def test_timeout_when_the_deadline_has_already_passed() -> None:
    clock = FakeClock(START)
    attempt = Script(clock, [AttemptResult(AttemptKind.OK)])
    outcome = run_with_retries(attempt, clock=clock, deadline=START, max_retries=3)
    assert outcome.status is ExecutionStatus.TIMEOUT
    assert outcome.attempts == 0
    assert attempt.calls == []
    assert outcome.error


def test_timeout_when_an_attempt_times_out_stops_retrying() -> None:
    clock = FakeClock(START)
    attempt = Script(
        clock,
        [AttemptResult(AttemptKind.ERROR, "first"), AttemptResult(AttemptKind.TIMEOUT, "did not return within 5s")],
    )
    outcome = run_with_retries(attempt, clock=clock, deadline=START + timedelta(minutes=5), max_retries=10)
    assert outcome.status is ExecutionStatus.TIMEOUT
    assert outcome.attempts == 2
    assert outcome.error == "did not return within 5s"
    assert len(attempt.calls) == 2
    assert clock.sleeps == [1]


def test_interrupted_when_cancel_is_set_during_backoff() -> None:
    clock = FakeClock(START)
    cancel = threading.Event()

    def attempt(number: int, left: float) -> AttemptResult:
        if number == 2:
            cancel.set()
        return AttemptResult(AttemptKind.ERROR, f"boom {number}")

    outcome = run_with_retries(
        attempt, clock=clock, deadline=START + timedelta(minutes=5), max_retries=10, cancel=cancel
    )
    assert outcome.status is ExecutionStatus.INTERRUPTED
    assert outcome.attempts == 2
    assert clock.sleeps == [1]


def test_interrupted_when_cancel_is_set_before_the_first_retry() -> None:
    clock = FakeClock(START)
    cancel = threading.Event()
    failing = always_failing(clock)

    def attempt(number: int, left: float) -> AttemptResult:
        result = failing(number, left)
        cancel.set()  # the shutdown arrives while the first attempt runs
        return result

    outcome = run_with_retries(
        attempt, clock=clock, deadline=START + timedelta(minutes=5), max_retries=3, cancel=cancel
    )
    assert outcome.status is ExecutionStatus.INTERRUPTED
    assert outcome.attempts == 1
    assert clock.sleeps == []


def test_interrupted_attempt_is_reported_as_interrupted() -> None:
    clock = FakeClock(START)
    attempt = Script(clock, [AttemptResult(AttemptKind.INTERRUPTED, "cut off by shutdown")])
    outcome = run_with_retries(attempt, clock=clock, deadline=START + timedelta(minutes=5), max_retries=3)
    assert outcome.status is ExecutionStatus.INTERRUPTED
    assert outcome.attempts == 1
    assert outcome.error == "cut off by shutdown"
    assert clock.sleeps == []


def test_no_attempt_starts_once_the_service_is_shutting_down() -> None:
    clock = FakeClock()
    cancel = threading.Event()
    cancel.set()
    calls: list[int] = []

    def attempt(number: int, left: float) -> AttemptResult:
        calls.append(number)
        return AttemptResult(AttemptKind.OK)

    outcome = run_with_retries(
        attempt, clock=clock, deadline=clock.now() + timedelta(seconds=60), max_retries=3, cancel=cancel
    )
    assert outcome.status is ExecutionStatus.INTERRUPTED
    assert outcome.attempts == 0
    assert calls == []
