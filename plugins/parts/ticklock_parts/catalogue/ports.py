"""The catalogue walk's ports: the catalogue and its walk state, and the vendor's price API.

Adapters: ``ticklock_parts.adapters.catalogue`` (SQLite, MongoDB; one contract suite in
``tests_parts/contract/test_catalogue_store.py``) and ``ticklock_parts.adapters.catalogue.vendor`` (HTTP).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from ticklock.errors import TicklockError


@dataclass(frozen=True)
class PartRef:
    id: str
    mpn: str


@dataclass(frozen=True)
class SpotPrice:
    mpn: str
    price: float
    currency: str = "USD"


class VendorUnavailable(TicklockError):
    """The vendor's API failed (5xx, a connection error, a timeout, an answer that is not a price list)."""


class VendorThrottled(TicklockError):
    """The vendor answered 429; ``retry_after`` is how long it asked us to wait, in seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class CatalogueStore(Protocol):
    def parts_after(self, cursor: str | None, limit: int) -> list[PartRef]:
        """Up to ``limit`` parts with an mpn, in id order, with ids after ``cursor``."""
        ...

    def load_cursor(self) -> str | None:
        """The id of the last part priced by the walk (None: start from the beginning)."""
        ...

    def save_cursor(self, cursor: str | None, now: datetime) -> None: ...

    def record_prices(self, prices: Sequence[tuple[PartRef, SpotPrice]], now: datetime) -> None:
        """Set each part's current price and append a price-history record, in one write."""
        ...

    def take_request(self, day: str, quota: int) -> bool:
        """Count one vendor request against ``day``'s quota, shared by every process: True if it was
        within ``quota`` (and is now counted), False if the day's quota is spent. Never over-counts."""
        ...


class Vendor(Protocol):
    async def spot_prices(self, mpns: Sequence[str]) -> list[SpotPrice]:
        """One request. Raises ``VendorThrottled`` (429) or ``VendorUnavailable``."""
        ...
