"""The alert scanner's email through the engine's notifier (a real SMTP server, the engine's fixture)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.integration.test_email import FROM, SMTPServer
from ticklock.adapters.email.smtp import SMTPSender


def test_the_scanner_emails_through_a_real_smtp_server_and_keeps_what_failed(
    smtp_server: SMTPServer, tmp_path: Path
) -> None:
    from ticklock.clock import FakeClock
    from ticklock_parts.adapters.alerts.sqlite import SQLiteAlertStore
    from ticklock_parts.alerts.scanner import Scanner

    port, recorder = smtp_server()
    store = SQLiteAlertStore(tmp_path / "alerts.db")
    store.put_parts([{"_id": "p1", "riskLevel": "Critical"}])
    rule = {"id": "r", "type": "risk", "operator": "gte", "threshold": "high", "notify": ["email"]}
    store.put_alerts(
        [
            {"_id": "a1", "userId": "u1", "partId": "p1", "email": "buyer@example.com", "rules": [rule]},
            {"_id": "a2", "userId": "u2", "partId": "p1", "email": "gone@refused.test", "rules": [rule]},
        ]
    )
    clock = FakeClock(datetime(2026, 11, 30, 12, tzinfo=UTC))
    scanner = Scanner(store, email=SMTPSender.from_url(f"smtp://127.0.0.1:{port}?starttls=off", FROM), now=clock.now)

    async def scan_and_settle() -> Any:
        report = await scanner.scan(clock.now() + timedelta(minutes=10))
        await asyncio.sleep(0.1)
        return report

    report = asyncio.run(scan_and_settle())
    assert report.notifications == 2 and report.emails_sent == 1 and report.emails_failed == 1
    [received] = recorder.received
    assert received.rcpt_tos == ["buyer@example.com"] and "risk Critical gte High" in received.message.get_content()
    by_id = {n.id: n for n in store.notifications()}
    assert by_id["a1:r:new"].email_status == "sent"
    failed = by_id["a2:r:new"]
    assert failed.email_status == "pending" and "550" in (failed.email_error or "")
    clock.advance(3600)
    again = asyncio.run(scan_and_settle())  # the failed send is tried again; the record stays
    assert again.emails_failed == 1 and again.notifications == 0
    assert {n.id: n.email_attempts for n in store.notifications()}["a2:r:new"] == 2
    store.close()
