"""Recording adapters for the Publisher and Metrics ports, and failing ones.

Used where the test is about what the core sends, not about a backend: the real backends have their own
contract and integration tests.
"""

from __future__ import annotations

import threading

from ticklock.domain.events import ExecutionEvent
from ticklock.errors import LockUnavailable


class RecordingPublisher:
    publishes = True

    def __init__(self) -> None:
        self.events: list[ExecutionEvent] = []
        self._mutex = threading.Lock()

    def publish(self, event: ExecutionEvent) -> None:
        with self._mutex:
            self.events.append(event)

    def flush(self, timeout: float) -> None:
        return None

    def types(self) -> list[str]:
        return [e.detail_type for e in self.events]


class RecordingMetrics:
    def __init__(self) -> None:
        self.started: list[tuple[str, float]] = []
        self.finished: list[tuple[str, str, float, int]] = []
        self.skipped: list[tuple[str, str]] = []
        self.ticks: list[tuple[int, bool]] = []
        self.disabled: list[str] = []
        self.accounted: list[tuple[str, str, int]] = []

    def fire_started(self, handler: str, lag: float) -> None:
        self.started.append((handler, lag))

    def fire_finished(self, handler: str, status: str, duration: float, attempts: int) -> None:
        self.finished.append((handler, status, duration, attempts))

    def fire_skipped(self, handler: str, reason: str) -> None:
        self.skipped.append((handler, reason))

    def fires_accounted(self, outcome: str, reason: str, count: int) -> None:
        self.accounted.append((outcome, reason, count))

    def job_disabled(self, handler: str) -> None:
        self.disabled.append(handler)

    def tick(self, claimed: int, seconds: float, failed: bool) -> None:
        self.ticks.append((claimed, failed))

    def flush(self) -> None:
        return None


class BrokenPublisher:
    publishes = True

    def publish(self, event: ExecutionEvent) -> None:
        raise ConnectionError("event bus is down")

    def flush(self, timeout: float) -> None:
        raise ConnectionError("event bus is down")


class BrokenMetrics(RecordingMetrics):
    def fire_started(self, handler: str, lag: float) -> None:
        raise ConnectionError("metrics backend is down")

    def fire_finished(self, handler: str, status: str, duration: float, attempts: int) -> None:
        raise ConnectionError("metrics backend is down")


class DownLocker:
    """A lock backend that cannot be reached."""

    def acquire(self, key: str, ttl: float) -> str | None:
        raise LockUnavailable("connection refused")

    def release(self, key: str, token: str) -> None:
        raise LockUnavailable("connection refused")

    def extend(self, key: str, token: str, ttl: float) -> bool:
        raise LockUnavailable("connection refused")

    def close(self) -> None:
        pass
