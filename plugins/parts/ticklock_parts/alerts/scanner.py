"""The alert scanner: batches of alerts through lookup, evaluation, notification, write-back and email.

Each batch: at most ``batch`` (200) alert documents with a rule, flattened to the rules that are due
(never checked, or checked a cooldown ago); the parts they watch looked up in chunks with at most
``lookups`` (50) lookups in flight; every due rule evaluated (``rules.evaluate``); the notifications of
the rules that fired inserted under their deterministic ids; all results written back in one bulk write;
then pending emails claimed and sent with at most ``sends`` (10) in flight. Then the next batch, until
the alerts run out or the deadline is ``margin`` away - the reference's one batch per run would check 200
alerts a day at the default schedule.

Notifications are inserted before the write-back: a run cut off between the two leaves the cursor where
it was, so the next run fires the same notification again and its id makes it a no-op. The other order
would lose it. A failed send leaves the notification pending, to be retried by the next run (up to
``email_attempts`` times).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ticklock_parts.alerts.documents import Alert, Notification, notification_id, written_back
from ticklock_parts.alerts.ports import AlertStore, EmailSender
from ticklock_parts.alerts.rules import Verdict, evaluate, rule_type


@dataclass(frozen=True)
class ScanLimits:
    batch: int = 200
    lookups: int = 50  # lookups in flight
    chunk: int = 20  # parts per lookup
    sends: int = 10  # emails in flight
    email_attempts: int = 5
    email_lease: timedelta = timedelta(minutes=5)
    margin: timedelta = timedelta(seconds=15)  # stop starting batches this long before the deadline


@dataclass
class ScanReport:
    batches: int = 0
    alerts: int = 0
    rules_due: int = 0
    rules_evaluated: int = 0
    rule_errors: int = 0
    triggered: int = 0
    notifications: int = 0
    written: int = 0
    stale: int = 0
    emails_sent: int = 0
    emails_failed: int = 0
    stopped_early: bool = False
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "errors"} | {"errors": self.errors[:20]}


class Scanner:
    def __init__(
        self,
        store: AlertStore,
        *,
        email: EmailSender | None,
        now: Callable[[], datetime],
        limits: ScanLimits | None = None,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
    ) -> None:
        self.store = store
        self.email = email
        self.now = now
        self.limits = limits or ScanLimits()
        self.log = log or logging.getLogger("ticklock.handler.alerts.scan")

    async def scan(self, deadline: datetime) -> ScanReport:
        report = ScanReport()
        # the lookups in flight are this pool's threads: asyncio's default pool (cpus + 4) would cap them
        lookups = ThreadPoolExecutor(self.limits.lookups, thread_name_prefix="ticklock-alerts")
        try:
            await self._scan(deadline, lookups, report)
        finally:
            lookups.shutdown(wait=False)
        self.log.info("alerts.scanned", extra=report.as_dict())
        return report

    async def _scan(self, deadline: datetime, lookups: ThreadPoolExecutor, report: ScanReport) -> None:
        after: str | None = None
        while True:
            if self.now() >= deadline - self.limits.margin:
                report.stopped_early = True
                break
            alerts = await asyncio.to_thread(self.store.alerts_after, after, self.limits.batch)
            if not alerts:
                break
            after = alerts[-1].id
            report.batches += 1
            report.alerts += len(alerts)
            await self._batch(alerts, lookups, report)
            await self.send_emails(deadline, report)

    async def _batch(self, alerts: Sequence[Alert], lookups: ThreadPoolExecutor, report: ScanReport) -> None:
        now = self.now()
        due = [(alert, rule) for alert in alerts for rule in alert.rules if rule.due(now)]
        report.rules_due += len(due)
        if not due:
            return
        part_ids = sorted({alert.part_id for alert, _ in due})
        chunks = [part_ids[i : i + self.limits.chunk] for i in range(0, len(part_ids), self.limits.chunk)]

        loop = asyncio.get_running_loop()
        parts: dict[str, Mapping[str, Any]] = {}
        for found in await asyncio.gather(*(loop.run_in_executor(lookups, self.store.parts, c) for c in chunks)):
            parts.update(found)
        verdicts: dict[str, dict[str, Verdict]] = {}
        notes: list[Notification] = []
        for alert, rule in due:
            verdict = evaluate(rule, parts.get(alert.part_id), now)
            verdicts.setdefault(alert.id, {})[rule.id] = verdict
            report.rules_evaluated += 1
            if verdict.error:
                report.rule_errors += 1
                if len(report.errors) < 100:
                    report.errors.append(f"{alert.id}/{rule.id}: {verdict.error}")
            if verdict.triggered:
                report.triggered += 1
                wants_email = rule.email and alert.email is not None
                notes.append(
                    Notification(
                        id=notification_id(alert.id, rule.id, verdict),
                        alert_id=alert.id,
                        rule_id=rule.id,
                        user_id=alert.user_id,
                        part_id=alert.part_id,
                        type=rule_type(rule.type).value,
                        message=verdict.message,
                        created_at=now,
                        email_to=alert.email if wants_email else None,
                        email_status="pending" if wants_email else None,
                    )
                )
        # notifications first: a run cut off here fires them again next time, as no-ops (see the docstring)
        report.notifications += await asyncio.to_thread(self.store.add_notifications, notes)
        updates = [written_back(alert, verdicts[alert.id]) for alert in alerts if alert.id in verdicts]
        written = await asyncio.to_thread(self.store.write_back, updates, now)
        report.written += written
        report.stale += len(updates) - written

    async def send_emails(self, deadline: datetime, report: ScanReport) -> None:
        """Claim pending emails and send them, at most ``sends`` at once, until none is left."""
        if self.email is None:
            return
        sender = self.email
        sends = asyncio.Semaphore(self.limits.sends)

        async def send(note: Notification) -> None:
            async with sends:
                error: str | None = None
                try:
                    assert note.email_to is not None
                    await sender.send(note.email_to, f"ticklock alert: {note.type} on {note.part_id}", note.message)
                except Exception as exc:  # noqa: BLE001 - recorded on the notification, retried next run
                    error = f"{type(exc).__name__}: {exc}"
                give_up = error is not None and note.email_attempts + 1 >= self.limits.email_attempts
                await asyncio.to_thread(
                    self.store.finish_email, note.id, sent=error is None, error=error, now=self.now(), give_up=give_up
                )
                if error is None:
                    report.emails_sent += 1
                else:
                    failed.append(note.id)
                    report.emails_failed += 1
                    self.log.warning("alerts.email_failed", extra={"notification": note.id, "error": error})

        while self.now() < deadline - self.limits.margin:
            claimed = await asyncio.to_thread(
                self.store.claim_emails, now=self.now(), limit=100, lease=self.limits.email_lease
            )
            if not claimed:
                return
            failed: list[str] = []
            await asyncio.gather(*(send(n) for n in claimed if n.email_to))
            if len(claimed) < 100 or failed:  # a failed send waits for the next run
                return
