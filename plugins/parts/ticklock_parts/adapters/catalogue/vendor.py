"""The vendor's spot-price API over HTTP (httpx).

One request per page: ``GET {base_url}/spot-prices?mpn=A,B,C`` with the key in ``X-Api-Key``; the answer
is ``{"prices": [{"mpn": "A", "price": 1.23, "currency": "USD"}, ...]}`` (a part the vendor does not price
is absent). 429 raises ``VendorThrottled`` with the Retry-After (seconds, or an HTTP date; 60 s when
missing). Any other failure - a 5xx or other unexpected status, a connection error, no answer within
``timeout``, a body that is not a price list - raises ``VendorUnavailable`` with what happened.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ticklock_parts.catalogue.ports import SpotPrice, VendorThrottled, VendorUnavailable

DEFAULT_RETRY_AFTER = 60.0


class HttpVendor:
    """The ``Vendor`` port over HTTP. A client per request: a page is one request, and each run may be on
    another event loop (a client is bound to the loop it was made on)."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 10.0) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"the vendor URL must be http(s), got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    async def spot_prices(self, mpns: Sequence[str]) -> list[SpotPrice]:
        url = f"{self.base_url}/spot-prices"
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.get(url, params={"mpn": ",".join(mpns)}, headers={"X-Api-Key": self.api_key})
        except httpx.TimeoutException:
            raise VendorUnavailable(f"vendor: no answer from {url} within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise VendorUnavailable(f"vendor: {url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code == 429:
            wait = retry_after(response.headers.get("Retry-After"))
            raise VendorThrottled(f"vendor: 429 Too Many Requests, Retry-After {wait:g} s", wait)
        if response.status_code != 200:
            raise VendorUnavailable(f"vendor: {url} answered {response.status_code}: {response.text[:200]}")
        try:
            return parse(response.json())
        except (ValueError, KeyError, TypeError) as exc:
            raise VendorUnavailable(f"vendor: {url}: not a price list: {exc}") from exc


def parse(body: Any) -> list[SpotPrice]:
    prices = []
    for item in body["prices"]:
        price = float(item["price"])
        if not math.isfinite(price) or price < 0:
            raise ValueError(f"price {item['price']!r} of {item.get('mpn')!r}")
        prices.append(SpotPrice(str(item["mpn"]), price, str(item.get("currency") or "USD")))
    return prices


def retry_after(header: str | None) -> float:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date."""
    if not header:
        return DEFAULT_RETRY_AFTER
    text = header.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
