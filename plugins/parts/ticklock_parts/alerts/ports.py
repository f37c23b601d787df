"""The scanner's ports: where alerts, parts and notifications live, and how email goes out.

Adapters: ``ticklock_parts.adapters.alerts`` (MongoDB, SQLite); the sender is the engine's notifier;
every store adapter passes ``tests_parts/contract/test_alert_store.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from ticklock.ports import EmailSender
from ticklock_parts.alerts.documents import Alert, AlertUpdate, Notification

__all__ = ["AlertStore", "EmailSender"]  # the sender is the engine's port, named here for the scanner


class AlertStore(Protocol):
    def alerts_after(self, after: str | None, limit: int) -> list[Alert]:
        """Up to ``limit`` alert documents with at least one rule, in id order, with ids after ``after``."""
        ...

    def parts(self, part_ids: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        """The part documents with these ids (missing ones are absent)."""
        ...

    def write_back(self, updates: Sequence[AlertUpdate], now: datetime) -> int:
        """Apply the updates in one bulk write, each only if its alert is unchanged since it was read
        (by another scanner, or by the product's backend); returns how many were applied."""
        ...

    def add_notifications(self, notes: Sequence[Notification]) -> int:
        """Insert the notifications whose id is new; an existing id is left as it is. Returns how many
        were inserted."""
        ...

    def claim_emails(self, *, now: datetime, limit: int, lease: timedelta) -> list[Notification]:
        """Up to ``limit`` notifications whose email is pending (or was claimed and its claim ran out),
        marked ``sending`` until ``now + lease``: a concurrent scanner does not claim them too."""
        ...

    def finish_email(self, note_id: str, *, sent: bool, error: str | None, now: datetime, give_up: bool) -> None:
        """Record a send: ``sent``, or back to ``pending`` with the error (``failed`` when ``give_up``)."""
        ...
