"""The CatalogueStore contract, run on every adapter (SQLite; MongoDB on FerretDB, both backends)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from ticklock_parts.catalogue.ports import PartRef, SpotPrice

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def test_parts_come_in_id_order_after_the_cursor_and_only_with_an_mpn(catalogue_store: Any) -> None:
    catalogue_store.put_parts(
        [{"_id": f"p{i:03d}", "mpn": f"MPN-{i}"} for i in range(7)] + [{"_id": "p003x", "price": 1}, {"_id": "p009"}]
    )
    first = catalogue_store.parts_after(None, 3)
    assert first == [PartRef("p000", "MPN-0"), PartRef("p001", "MPN-1"), PartRef("p002", "MPN-2")]
    assert [p.id for p in catalogue_store.parts_after("p002", 10)] == ["p003", "p004", "p005", "p006"]
    assert catalogue_store.parts_after("p006", 10) == []


def test_the_cursor_is_kept(catalogue_store: Any) -> None:
    assert catalogue_store.load_cursor() is None
    catalogue_store.save_cursor("p042", NOW)
    assert catalogue_store.load_cursor() == "p042"
    catalogue_store.save_cursor(None, NOW)
    assert catalogue_store.load_cursor() is None


def test_prices_are_current_on_the_part_and_kept_in_its_history(catalogue_store: Any) -> None:
    catalogue_store.put_parts([{"_id": "p1", "mpn": "A", "riskScore": 5}, {"_id": "p2", "mpn": "B"}])
    part = PartRef("p1", "A")
    catalogue_store.record_prices([(part, SpotPrice("A", 1.5))], NOW)
    catalogue_store.record_prices([(part, SpotPrice("A", 1.75, "EUR"))], NOW.replace(hour=13))
    current = catalogue_store.parts(["p1"])["p1"]
    assert current["price"] == 1.75 and current["currency"] == "EUR" and current["riskScore"] == 5
    assert [(p, c) for p, c, _ in catalogue_store.history("p1")] == [(1.5, "USD"), (1.75, "EUR")]
    assert catalogue_store.history("p2") == []


def test_the_daily_quota_is_never_exceeded_by_concurrent_takers(catalogue_store: Any) -> None:
    taken: list[bool] = []
    mutex = threading.Lock()

    def take() -> None:
        for _ in range(5):
            ok = catalogue_store.take_request("2026-11-30", 7)
            with mutex:
                taken.append(ok)

    takers = [threading.Thread(target=take) for _ in range(4)]
    for thread in takers:
        thread.start()
    for thread in takers:
        thread.join()
    assert taken.count(True) == 7 and catalogue_store.requests_used("2026-11-30") == 7
    assert catalogue_store.take_request("2026-12-01", 7)  # a new UTC day, a new quota
