"""The walk: page by page through the catalogue, one vendor request per page, within the daily quota.

Each page: read the next ``batch`` parts after the cursor; take one request from the UTC day's quota
(shared by every replica and every run, counted in the store before the request is made, so the quota
is never exceeded, even by requests that fail); ask the vendor; write the prices and their history;
save the cursor. The run stops when the quota is spent (the next run, on the next UTC day, resumes at
the cursor), at the end of the catalogue (the next run starts it again), when the deadline is near, or
when the vendor fails. A 429 is waited out for its Retry-After if the deadline allows (else the run
stops); any other failure ends the run with ``VendorUnavailable`` and the cursor where it was.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ticklock_parts.catalogue.ports import CatalogueStore, Vendor, VendorThrottled


@dataclass(frozen=True)
class WalkLimits:
    batch: int = 50  # parts per vendor request
    quota: int = 1000  # vendor requests per UTC day
    margin: timedelta = timedelta(seconds=10)  # no new page this close to the deadline
    max_throttles: int = 5  # 429s in a row before the run gives up


@dataclass
class WalkReport:
    pages: int = 0
    requests: int = 0
    priced: int = 0
    unpriced: int = 0
    throttled: int = 0
    wrapped: bool = False
    stopped: str = ""
    cursor: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


class Walk:
    def __init__(
        self,
        store: CatalogueStore,
        vendor: Vendor,
        *,
        now: Callable[[], datetime],
        limits: WalkLimits | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
    ) -> None:
        self.store = store
        self.vendor = vendor
        self.now = now
        self.limits = limits or WalkLimits()
        self.sleep = sleep
        self.log = log or logging.getLogger("ticklock.handler.catalogue.spot_prices")

    async def run(self, deadline: datetime) -> WalkReport:
        report = WalkReport()
        cursor = await asyncio.to_thread(self.store.load_cursor)
        report.cursor = cursor
        try:
            while True:
                if self.now() >= deadline - self.limits.margin:
                    report.stopped = "deadline"
                    break
                parts = await asyncio.to_thread(self.store.parts_after, cursor, self.limits.batch)
                if not parts:
                    if cursor is None:
                        report.stopped = "empty catalogue"
                        break
                    # the end of the catalogue: this run is done, and the next starts it again
                    report.wrapped = True
                    await asyncio.to_thread(self.store.save_cursor, None, self.now())
                    report.cursor = None
                    report.stopped = "end of the catalogue"
                    break
                prices = await self._ask(parts, deadline, report)
                if prices is None:
                    break
                by_mpn = {p.mpn.strip().upper(): p for p in prices}
                found = [
                    (part, by_mpn[part.mpn.strip().upper()]) for part in parts if part.mpn.strip().upper() in by_mpn
                ]
                await asyncio.to_thread(self.store.record_prices, found, self.now())
                cursor = parts[-1].id
                await asyncio.to_thread(self.store.save_cursor, cursor, self.now())
                report.cursor = cursor
                report.pages += 1
                report.priced += len(found)
                report.unpriced += len(parts) - len(found)
        finally:
            self.log.info("catalogue.walked", extra=report.as_dict())
        return report

    async def _ask(self, parts: list[Any], deadline: datetime, report: WalkReport) -> list[Any] | None:
        """The vendor's prices for one page, within the quota; None when the run must stop."""
        throttles = 0
        while True:
            day = self.now().date().isoformat()  # the quota's day is the UTC day
            if not await asyncio.to_thread(self.store.take_request, day, self.limits.quota):
                report.stopped = f"quota of {self.limits.quota} requests spent for {day}"
                return None
            report.requests += 1
            try:
                return await self.vendor.spot_prices([p.mpn for p in parts])
            except VendorThrottled as exc:
                report.throttled += 1
                throttles += 1
                wait = max(exc.retry_after, 0.0)
                if throttles > self.limits.max_throttles or self.now() + timedelta(seconds=wait) >= (
                    deadline - self.limits.margin
                ):
                    report.stopped = f"throttled by the vendor (Retry-After {wait:g} s)"
                    return None
                self.log.info("vendor.throttled", extra={"retry_after": wait})
                await self.sleep(wait)
