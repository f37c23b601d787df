"""Publishers that need no broker: nothing at all, or one structured log line per event."""

from __future__ import annotations

import logging

from ticklock.domain.events import ExecutionEvent

_log = logging.getLogger("ticklock.events")


class NoPublisher:
    """Drops every event (the reference's no-op publisher)."""

    publishes = False

    def publish(self, event: ExecutionEvent) -> None:
        return None

    def flush(self, timeout: float) -> None:
        return None


class LogPublisher:
    """Writes each event as a log line named by its detail-type."""

    publishes = True

    def publish(self, event: ExecutionEvent) -> None:
        _log.info(event.detail_type, extra=event.detail())

    def flush(self, timeout: float) -> None:
        return None
