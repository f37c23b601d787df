"""``catalogue.spot_prices``: the walk as a registered handler.

Its data is at ``TICKLOCK_PARTS_STORE`` (default: the job store); the vendor is
``TICKLOCK_PARTS_VENDOR_URL`` with ``TICKLOCK_PARTS_VENDOR_KEY``, ``TICKLOCK_PARTS_VENDOR_BATCH`` parts a
request and ``TICKLOCK_PARTS_VENDOR_DAILY_QUOTA`` requests a UTC day. A vendor outage fails the run
(``VendorUnavailable``) with the cursor kept.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING

from ticklock.errors import ConfigError
from ticklock.handlers.plugin import Context, HandlerContext, Registry
from ticklock_parts.adapters.catalogue.vendor import HttpVendor
from ticklock_parts.adapters.store import shared_store
from ticklock_parts.catalogue.walk import Walk, WalkLimits

if TYPE_CHECKING:
    from ticklock_parts.plugin import PartsConfig

NAME = "catalogue.spot_prices"

_vendors: dict[tuple[str, str], HttpVendor] = {}  # one client per vendor and key, reused while warm
_vendors_mutex = threading.Lock()


def _vendor(url: str, key: str) -> HttpVendor:
    with _vendors_mutex:
        if (url, key) not in _vendors:
            _vendors[url, key] = HttpVendor(url, key)
        return _vendors[url, key]


async def walk(ctx: HandlerContext, context: Context[PartsConfig]) -> None:
    """Price the next pages of the parts catalogue at the vendor, within its daily quota."""
    config = context.config
    if not config.vendor_url:
        raise ConfigError("catalogue.spot_prices needs TICKLOCK_PARTS_VENDOR_URL (and TICKLOCK_PARTS_VENDOR_KEY)")
    store = shared_store(config.store_url(context.engine))
    limits = WalkLimits(batch=config.vendor_batch, quota=config.vendor_daily_quota)
    vendor = _vendor(config.vendor_url, config.vendor_key or "")
    await Walk(store, vendor, now=ctx.now, limits=limits, log=ctx.logger).run(ctx.deadline)


def register(registry: Registry, context: Context[PartsConfig]) -> None:
    @functools.wraps(walk)
    async def run(ctx: HandlerContext) -> None:
        await walk(ctx, context)

    registry.register(NAME, run)
