"""The catalogue walk against a vendor on loopback that counts requests and answers 429 / 500 / slowly,
on the embedded store and on FerretDB (PostgreSQL)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests_parts.support.vendor import VendorServer, vendor_server
from ticklock.clock import FakeClock
from ticklock_parts.adapters.catalogue.vendor import HttpVendor
from ticklock_parts.catalogue.ports import VendorUnavailable
from ticklock_parts.catalogue.walk import Walk, WalkLimits

pytestmark = pytest.mark.parametrize("store_kind", ["sqlite", "ferretdb-postgresql"], indirect=True)
T0 = datetime(2026, 11, 30, 22, tzinfo=UTC)


@pytest.fixture
def vendor() -> Iterator[VendorServer]:
    with vendor_server() as server:
        yield server


def fill(store: Any, count: int) -> None:
    store.put_parts([{"_id": f"p{i:04d}", "mpn": f"MPN-{i}"} for i in range(count)])


def walk(store: Any, vendor: VendorServer, clock: FakeClock, *, quota: int = 100, batch: int = 10, **kw: Any) -> Any:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)

    runner = Walk(
        store,
        HttpVendor(vendor.url, "test-key", timeout=kw.pop("timeout", 5.0)),
        now=clock.now,
        limits=WalkLimits(batch=batch, quota=quota),
        sleep=sleep,
    )
    report = asyncio.run(runner.run(clock.now() + kw.pop("budget", timedelta(minutes=10))))
    report.notes.append(f"sleeps={sleeps}")
    return report


def test_the_walk_prices_every_part_page_by_page_and_starts_again_at_the_end(
    catalogue_store: Any, vendor: VendorServer
) -> None:
    clock = FakeClock(T0)
    fill(catalogue_store, 25)
    catalogue_store.put_parts([{"_id": "p0007", "mpn": "GONE-X"}])  # the vendor does not price it
    report = walk(catalogue_store, vendor, clock, batch=10)
    assert report.pages == 3 and report.requests == 3 and report.wrapped
    assert report.stopped == "end of the catalogue" and catalogue_store.load_cursor() is None
    assert report.priced == 24 and report.unpriced == 1
    assert [len(r) for r in vendor.requests[:3]] == [10, 10, 5]
    part = catalogue_store.parts(["p0003"])["p0003"]
    assert part["price"] == VendorServer.price("MPN-3") and part["priceUpdatedAt"]
    assert len(catalogue_store.history("p0003")) >= 1
    assert catalogue_store.requests_used(T0.date().isoformat()) == report.requests


def test_the_quota_stops_the_run_and_the_next_utc_day_resumes_at_the_cursor(
    catalogue_store: Any, vendor: VendorServer
) -> None:
    clock = FakeClock(T0)
    fill(catalogue_store, 50)
    first = walk(catalogue_store, vendor, clock, quota=2, batch=10)
    assert first.requests == 2 and first.stopped.startswith("quota of 2 requests spent for 2026-11-30")
    assert catalogue_store.load_cursor() == "p0019"
    again = walk(catalogue_store, vendor, clock, quota=2, batch=10)  # same day: nothing asked
    assert again.requests == 0 and len(vendor.requests) == 2
    clock.advance(3 * 3600)  # past midnight UTC
    nextday = walk(catalogue_store, vendor, clock, quota=2, batch=10)
    assert nextday.requests == 2 and vendor.requests[2][0] == "MPN-20"  # resumed at the cursor
    assert catalogue_store.load_cursor() == "p0039"


def test_replicas_share_the_daily_quota(catalogue_store: Any, vendor: VendorServer) -> None:
    clock = FakeClock(T0)
    fill(catalogue_store, 200)
    reports: list[Any] = []
    walkers = [
        threading.Thread(target=lambda: reports.append(walk(catalogue_store, vendor, clock, quota=5, batch=10)))
        for _ in range(3)
    ]
    for thread in walkers:
        thread.start()
    for thread in walkers:
        thread.join()
    assert len(vendor.requests) == 5 == sum(r.requests for r in reports)


def test_a_429_is_waited_out_for_its_retry_after_and_counts_against_the_quota(
    catalogue_store: Any, vendor: VendorServer
) -> None:
    clock = FakeClock(T0)
    fill(catalogue_store, 10)
    vendor.throttle_next, vendor.retry_after = 2, "7"
    report = walk(catalogue_store, vendor, clock, batch=10)
    assert report.throttled == 2 and report.pages == 1 and report.requests == 3
    assert "sleeps=[7.0, 7.0]" in report.notes
    assert catalogue_store.requests_used(T0.date().isoformat()) == 3


def test_a_retry_after_past_the_deadline_ends_the_run(catalogue_store: Any, vendor: VendorServer) -> None:
    clock = FakeClock(T0)
    fill(catalogue_store, 10)
    vendor.throttle_next, vendor.retry_after = 1, "3600"
    report = walk(catalogue_store, vendor, clock, batch=10, budget=timedelta(minutes=5))
    assert report.stopped == "throttled by the vendor (Retry-After 3600 s)" and report.pages == 0


@pytest.mark.parametrize("mode", ["500", "slow"])
def test_a_vendor_outage_ends_the_run_with_the_cursor_kept(
    catalogue_store: Any, vendor: VendorServer, mode: str
) -> None:
    clock = FakeClock(T0)
    fill(catalogue_store, 30)
    walk(catalogue_store, vendor, clock, quota=1, batch=10)  # one page priced
    assert catalogue_store.load_cursor() == "p0009"
    clock.advance(86400)
    vendor.mode, vendor.delay = mode, 2.0
    with pytest.raises(VendorUnavailable, match="answered 500" if mode == "500" else "no answer .* within 0.5 s"):
        walk(catalogue_store, vendor, clock, batch=10, timeout=0.5)
    assert catalogue_store.load_cursor() == "p0009"
    vendor.mode = "ok"
    resumed = walk(catalogue_store, vendor, clock, batch=10)
    assert vendor.requests[-resumed.requests][0] == "MPN-10"
