"""``catalogue.spot_prices``: the walk as a registered handler, wired from the settings on its first run.

Its data is at ``TICKLOCK_PRODUCT_STORE`` (default: the job store); the vendor is ``TICKLOCK_VENDOR_URL``
with ``TICKLOCK_VENDOR_KEY``, ``TICKLOCK_VENDOR_BATCH`` parts a request and ``TICKLOCK_VENDOR_DAILY_QUOTA``
requests a UTC day. A vendor outage fails the run (``VendorUnavailable``) with the cursor kept.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

from ticklock.errors import ConfigError
from ticklock.handlers.catalogue.ports import CatalogueStore, Vendor
from ticklock.handlers.catalogue.walk import Walk, WalkLimits
from ticklock.handlers.registry import HandlerContext, Registry
from ticklock.settings import Settings

NAME = "catalogue.spot_prices"


@dataclass(frozen=True)
class WalkDeps:
    store: CatalogueStore
    vendor: Vendor
    limits: WalkLimits


_deps: dict[tuple[str, str, str, int, int], WalkDeps] = {}
_deps_mutex = threading.Lock()


def build_deps(settings: Settings) -> WalkDeps:
    if not settings.vendor_url:
        raise ConfigError("catalogue.spot_prices needs TICKLOCK_VENDOR_URL (and TICKLOCK_VENDOR_KEY)")
    from ticklock.adapters.catalogue.vendor import HttpVendor
    from ticklock.adapters.product import open_product_store

    store = open_product_store(settings.product_store_url)
    limits = WalkLimits(batch=settings.vendor_batch, quota=settings.vendor_daily_quota)
    return WalkDeps(store, HttpVendor(settings.vendor_url, settings.vendor_key or ""), limits)


def deps(settings: Settings | None = None) -> WalkDeps:
    """Built once per process (per warm Lambda environment) and reused; ``None``: from the environment."""
    s = settings or Settings.load()
    key = (s.product_store_url, s.vendor_url, s.vendor_key or "", s.vendor_batch, s.vendor_daily_quota)
    with _deps_mutex:
        if key not in _deps:
            _deps[key] = build_deps(s)
        return _deps[key]


async def walk(ctx: HandlerContext, settings: Settings | None = None) -> None:
    """Price the next pages of the parts catalogue at the vendor, within its daily quota."""
    found = deps(settings)
    await Walk(found.store, found.vendor, now=ctx.now, limits=found.limits, log=ctx.logger).run(ctx.deadline)


def register(registry: Registry) -> None:
    settings = registry.settings  # the process's, flags included

    @functools.wraps(walk)
    async def run(ctx: HandlerContext) -> None:
        await walk(ctx, settings)

    registry.register(NAME, run)
