"""The alert scanner on every AlertStore adapter: batches, bounded lookups, errors kept on their rule, and
idempotency - two scanners at once, then a third run, notify once per change."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from ticklock.clock import FakeClock
from ticklock_parts.alerts.ports import AlertStore
from ticklock_parts.alerts.scanner import ScanLimits, Scanner

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)

# FerretDB's SQLite backend (~220 updates/s here) runs the AlertStore contract suite; the scanner's
# hundreds of guarded updates per batch run on its PostgreSQL backend
pytestmark = pytest.mark.parametrize("store_kind", ["sqlite", "ferretdb-postgresql"], indirect=True)


class RecordingEmail:
    def __init__(self, fail: set[str] | None = None) -> None:
        self.sent: list[tuple[str, str, str]] = []
        self.fail = fail or set()
        self.mutex = threading.Lock()

    async def send(self, to: str, subject: str, body: str) -> None:
        await asyncio.sleep(0)
        if to in self.fail:
            raise ConnectionError(f"mailbox {to} unavailable")
        with self.mutex:
            self.sent.append((to, subject, body))


def watch(i: int, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"_id": f"a{i:05d}", "userId": f"u{i}", "partId": f"p{i % 50}", "email": f"u{i}@example.com", "rules": rules}


def scan(store: Any, clock: FakeClock, email: Any = None, **limits: Any) -> Any:
    scanner = Scanner(store, email=email, now=clock.now, limits=ScanLimits(**limits))
    return asyncio.run(scanner.scan(clock.now() + timedelta(minutes=10)))


def test_every_due_rule_is_evaluated_across_batches_and_errors_stay_on_their_rule(alert_store: Any) -> None:
    clock = FakeClock(T0)
    alert_store.put_parts([{"_id": f"p{i}", "riskScore": i, "price": 10} for i in range(50)])
    rules: list[dict[str, Any]] = [
        {"id": "score", "type": "riskScore", "operator": ">", "threshold": "40"},
        {"id": "bad", "type": "price_jump", "operator": "gt", "threshold": 1},
        {"id": "off", "type": "risk", "operator": "gt", "threshold": 1, "active": "no"},
    ]
    alert_store.put_alerts([watch(i, rules) for i in range(450)])
    report = scan(alert_store, clock, batch=200)
    assert report.batches == 3 and report.alerts == 450
    assert report.rules_evaluated == 900  # two active rules each
    assert report.rule_errors == 450 and "unknown rule type 'price_jump'" in report.errors[0]
    assert report.triggered == 9 * 9  # parts 41..49 (score > 40), watched by 9 alerts each
    assert report.written == 450 and report.stale == 0
    doc = alert_store.alert_doc("a00049")
    by_id = {r["id"]: r for r in doc["rules"]}
    assert "unknown rule type" in by_id["bad"]["lastError"]
    assert by_id["score"]["lastTriggeredAt"] is not None and "lastCheckedAt" not in by_id["off"]
    # within the cooldown nothing is due; after it, every rule is checked again and nothing fires twice
    assert scan(alert_store, clock).rules_due == 0
    clock.advance(3600)
    again = scan(alert_store, clock)
    assert again.rules_evaluated == 900 and again.triggered == 0
    assert len(alert_store.notifications()) == 81


def test_two_scanners_at_once_then_a_third_notify_once_per_change(alert_store: Any) -> None:
    clock = FakeClock(T0)
    alert_store.put_parts([{"_id": f"p{i}", "riskScore": 10, "lifecycle": "Active", "price": 100} for i in range(50)])
    rules: list[dict[str, Any]] = [
        {"id": "risk", "type": "risk", "operator": "gte", "threshold": 50, "notify": ["email"]},
        {"id": "eol", "type": "lifecycle", "operator": "changed", "cooldownMinutes": 0},
        {"id": "price", "type": "price_change", "operator": "gt", "threshold": "5%", "cooldownMinutes": "0"},
    ]
    alert_store.put_alerts([watch(i, rules) for i in range(300)])
    email = RecordingEmail()
    assert scan(alert_store, clock, email).triggered == 0  # first look: cursors and baselines set
    # the pipelines change every part
    clock.advance(3600)
    alert_store.put_parts([{"_id": f"p{i}", "riskScore": 75, "lifecycle": "EOL", "price": 120} for i in range(50)])
    reports: list[Any] = []
    both = [threading.Thread(target=lambda: reports.append(scan(alert_store, clock, email))) for _ in range(2)]
    for thread in both:
        thread.start()
    for thread in both:
        thread.join()
    third = scan(alert_store, clock, email)
    notes = alert_store.notifications()
    assert len(notes) == 900  # 300 alerts x 3 rules, each once
    assert len({n.id for n in notes}) == 900
    assert sum(r.notifications for r in reports) + third.notifications == 900
    assert third.triggered == 0 or third.notifications == 0
    assert len(email.sent) == 300 and len({to for to, *_ in email.sent}) == 300  # one email per risk crossing
    # and later runs keep quiet until something changes again
    clock.advance(7200)
    later = scan(alert_store, clock, email)
    assert later.triggered == 0 and len(alert_store.notifications()) == 900


def test_a_failed_send_keeps_its_notification_and_is_retried_next_run(alert_store: Any) -> None:
    clock = FakeClock(T0)
    alert_store.put_parts([{"_id": "p1", "riskScore": 90}])
    rules = [{"id": "r", "type": "risk", "operator": "gt", "threshold": 50, "notifyEmail": "yes"}]
    alert_store.put_alerts([watch(1, rules)])
    down = RecordingEmail(fail={"u1@example.com"})
    first = scan(alert_store, clock, down)
    assert first.notifications == 1 and first.emails_failed == 1 and down.sent == []
    [pending] = alert_store.notifications()
    assert pending.email_status == "pending" and "unavailable" in (pending.email_error or "")
    clock.advance(60)
    up = RecordingEmail()
    second = scan(alert_store, clock, up)
    assert second.emails_sent == 1 and second.notifications == 0
    [sent] = alert_store.notifications()
    assert sent.email_status == "sent" and len(up.sent) == 1


def test_a_run_stops_starting_batches_near_its_deadline(alert_store: Any) -> None:
    clock = FakeClock(T0)
    alert_store.put_parts([{"_id": f"p{i}", "riskScore": 1} for i in range(50)])
    alert_store.put_alerts(
        [watch(i, [{"id": "r", "type": "risk", "operator": "gt", "threshold": 5}]) for i in range(30)]
    )

    class Slow:
        """Each lookup takes a (fake) minute."""

        def __getattr__(self, name: str) -> Any:
            return getattr(alert_store, name)

        def parts(self, ids: list[str]) -> Any:
            clock.advance(60)
            return alert_store.parts(ids)

    scanner = Scanner(cast(AlertStore, Slow()), email=None, now=clock.now, limits=ScanLimits(batch=10, chunk=100))
    report = asyncio.run(scanner.scan(clock.now() + timedelta(minutes=2)))
    assert report.stopped_early and report.batches == 2  # the third would start inside the margin
    # the rest are checked by the next run
    clock.advance(60)
    rest = asyncio.run(scanner.scan(clock.now() + timedelta(hours=1)))
    assert rest.rules_evaluated == 10


@pytest.mark.parametrize("in_flight", [1, 7])
def test_lookups_in_flight_are_bounded(alert_store: Any, in_flight: int) -> None:
    clock = FakeClock(T0)
    alert_store.put_parts([{"_id": f"p{i}", "riskScore": 1} for i in range(50)])
    alert_store.put_alerts(
        [watch(i, [{"id": "r", "type": "risk", "operator": "gt", "threshold": 5}]) for i in range(50)]
    )
    active, most = 0, 0
    mutex = threading.Lock()

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(alert_store, name)

        def parts(self, ids: list[str]) -> Any:
            nonlocal active, most
            with mutex:
                active += 1
                most = max(most, active)
            try:
                threading.Event().wait(0.02)
                return alert_store.parts(ids)
            finally:
                with mutex:
                    active -= 1

    scanner = Scanner(
        cast(AlertStore, Counting()), email=None, now=clock.now, limits=ScanLimits(lookups=in_flight, chunk=2)
    )
    report = asyncio.run(scanner.scan(clock.now() + timedelta(hours=1)))
    assert report.rules_evaluated == 50
    assert most == in_flight
