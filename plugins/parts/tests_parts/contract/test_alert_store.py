"""The AlertStore contract, run on every adapter (SQLite; MongoDB on FerretDB, both backends)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from ticklock_parts.alerts.documents import Notification, written_back
from ticklock_parts.alerts.rules import Cursor, Verdict

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def alert(i: int, rules: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "_id": f"a{i:04d}",
        "userId": f"u{i}",
        "partId": f"p{i}",
        "email": f"user{i}@example.com",
        "rules": rules if rules is not None else [{"id": "r1", "type": "risk", "operator": "gt", "threshold": 70}],
        **extra,
    }


def note(i: int, email: bool = True) -> Notification:
    return Notification(
        id=f"a{i:04d}:r1:new",
        alert_id=f"a{i:04d}",
        rule_id="r1",
        user_id=f"u{i}",
        part_id=f"p{i}",
        type="risk",
        message="risk 80 gt 70",
        created_at=NOW + timedelta(seconds=i),
        email_to=f"user{i}@example.com" if email else None,
        email_status="pending" if email else None,
    )


def test_alerts_come_in_id_order_after_a_cursor_and_only_with_rules(alert_store: Any) -> None:
    alert_store.put_alerts(
        [alert(i) for i in range(5)] + [alert(7, rules=[]), alert(8, rules=None) | {"rules": None}, alert(9)]
    )
    first = alert_store.alerts_after(None, 3)
    assert [a.id for a in first] == ["a0000", "a0001", "a0002"]
    rest = alert_store.alerts_after(first[-1].id, 10)
    assert [a.id for a in rest] == ["a0003", "a0004", "a0009"]
    assert alert_store.alerts_after("a0009", 10) == []
    [one] = alert_store.alerts_after("a0003", 1)
    assert one.part_id == "p4" and one.email == "user4@example.com" and one.rules[0].threshold == 70


def test_parts_are_looked_up_by_id(alert_store: Any) -> None:
    alert_store.put_parts([{"_id": f"p{i}", "price": i, "riskLevel": "Low"} for i in range(30)])
    found = alert_store.parts(["p1", "p29", "missing"])
    assert set(found) == {"p1", "p29"}
    assert found["p29"]["price"] == 29
    assert alert_store.parts([]) == {}


def test_write_back_updates_rule_state_and_keeps_everything_else(alert_store: Any) -> None:
    alert_store.put_alert(alert(1, rules=[{"id": "r1", "type": "risk", "operator": "gt", "threshold": 70, "x": 1}]))
    [read] = alert_store.alerts_after(None, 10)
    verdict = Verdict("r1", NOW, Cursor(80.0, 0), triggered=True, message="m")
    assert alert_store.write_back([written_back(read, {"r1": verdict})], NOW) == 1
    doc = alert_store.alert_doc("a0001")
    [rule] = doc["rules"]
    assert rule["x"] == 1 and rule["threshold"] == 70 and rule["cursor"] == {"value": 80.0, "version": 0}
    assert doc["userId"] == "u1"
    [again] = alert_store.alerts_after(None, 10)
    assert again.rules[0].cursor == Cursor(80.0, 0)
    assert again.rules[0].last_checked_at == NOW and again.rules[0].last_triggered_at == NOW


def test_write_back_leaves_an_alert_changed_since_it_was_read(alert_store: Any) -> None:
    alert_store.put_alerts([alert(1), alert(2)])
    one, two = alert_store.alerts_after(None, 10)
    # the product's backend edits alert 1 meanwhile (say, the user raises the threshold)
    alert_store.put_alert(alert(1, rules=[{"id": "r1", "type": "risk", "operator": "gt", "threshold": 90}]))
    verdict = Verdict("r1", NOW, Cursor(80.0, 0))
    applied = alert_store.write_back([written_back(one, {"r1": verdict}), written_back(two, {"r1": verdict})], NOW)
    assert applied == 1
    assert alert_store.alert_doc("a0001")["rules"][0]["threshold"] == 90  # the edit survives
    assert "cursor" not in alert_store.alert_doc("a0001")["rules"][0]
    assert alert_store.alert_doc("a0002")["rules"][0]["cursor"]["version"] == 0


def test_a_notification_id_is_inserted_once(alert_store: Any) -> None:
    assert alert_store.add_notifications([note(1), note(2, email=False)]) == 2
    assert alert_store.add_notifications([note(1), note(3)]) == 1
    assert alert_store.add_notifications([]) == 0
    notes = alert_store.notifications()
    assert [n.id for n in notes] == ["a0001:r1:new", "a0002:r1:new", "a0003:r1:new"]
    assert notes[1].email_to is None and notes[0].email_status == "pending"


def test_an_email_is_claimed_by_one_claimer_at_a_time(alert_store: Any) -> None:
    alert_store.add_notifications([note(i) for i in range(12)] + [note(50, email=False)])
    got: list[list[str]] = []

    def claim() -> None:
        got.append([n.id for n in alert_store.claim_emails(now=NOW, limit=100, lease=timedelta(minutes=5))])

    claimers = [threading.Thread(target=claim) for _ in range(4)]
    for thread in claimers:
        thread.start()
    for thread in claimers:
        thread.join()
    everything = [i for ids in got for i in ids]
    assert sorted(everything) == sorted(f"a{i:04d}:r1:new" for i in range(12))  # each once, none without email
    # a claim that ran out (the sender died) is claimed again
    later = alert_store.claim_emails(now=NOW + timedelta(minutes=6), limit=100, lease=timedelta(minutes=5))
    assert len(later) == 12


def test_finishing_an_email_records_the_outcome(alert_store: Any) -> None:
    alert_store.add_notifications([note(1), note(2), note(3)])
    alert_store.claim_emails(now=NOW, limit=10, lease=timedelta(minutes=5))
    alert_store.finish_email("a0001:r1:new", sent=True, error=None, now=NOW, give_up=False)
    alert_store.finish_email("a0002:r1:new", sent=False, error="smtp down", now=NOW, give_up=False)
    alert_store.finish_email("a0003:r1:new", sent=False, error="no such user", now=NOW, give_up=True)
    by_id = {n.id: n for n in alert_store.notifications()}
    assert by_id["a0001:r1:new"].email_status == "sent"
    assert by_id["a0002:r1:new"].email_status == "pending" and by_id["a0002:r1:new"].email_error == "smtp down"
    assert by_id["a0002:r1:new"].email_attempts == 1
    assert by_id["a0003:r1:new"].email_status == "failed"
    # only the pending one comes back
    assert [n.id for n in alert_store.claim_emails(now=NOW, limit=10, lease=timedelta(minutes=5))] == ["a0002:r1:new"]
