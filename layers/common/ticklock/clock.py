"""Time, injectable: the engine reads the clock and sleeps only through a ``Clock``."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """A source of aware UTC time and of interruptible sleeps."""

    def now(self) -> datetime:
        """The current instant, timezone-aware, in UTC."""
        ...

    def sleep(self, seconds: float, cancel: threading.Event | None = None) -> bool:
        """Wait ``seconds``; return early if ``cancel`` is set. Return True when cancelled."""
        ...


_from_timestamp = datetime.fromtimestamp


def to_ms(moment: datetime) -> datetime:
    """ticklock keeps time in whole milliseconds, the precision every store (BSON dates) can hold."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


class SystemClock:
    """The wall clock, in milliseconds."""

    def now(self) -> datetime:
        # whole milliseconds from the integer nanoseconds, not ``to_ms(datetime.now(UTC))``, whose keyword
        # ``replace`` is the slow part of a clock every fire reads several times. Exact: ms / 1000 as a float
        # is within half a microsecond until 2106, and ``fromtimestamp`` rounds to the nearest microsecond
        return _from_timestamp(time.time_ns() // 1_000_000 / 1000, UTC)

    def sleep(self, seconds: float, cancel: threading.Event | None = None) -> bool:
        if seconds <= 0:
            return bool(cancel and cancel.is_set())
        if cancel is None:
            time.sleep(seconds)
            return False
        return cancel.wait(seconds)


class FakeClock:
    """A clock that moves only when told to, or when something sleeps on it.

    ``sleep`` advances the clock by the requested time at once, so code that backs off
    for thirty seconds runs in microseconds under test while seeing the time it expects.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs an aware start time")
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        with self._lock:
            return to_ms(self._now)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += timedelta(seconds=seconds)

    def sleep(self, seconds: float, cancel: threading.Event | None = None) -> bool:
        if cancel is not None and cancel.is_set():
            return True
        self.sleeps.append(seconds)
        self.advance(max(seconds, 0.0))
        return False
