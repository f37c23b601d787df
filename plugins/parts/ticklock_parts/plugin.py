"""The plug-in object ticklock finds through the ``ticklock.plugins`` entry point: the two handlers,
their settings (``TICKLOCK_PARTS_*``; the names they had inside ticklock still work for one release, with
a warning at start-up), their system jobs and the health check of their store."""

from __future__ import annotations

from dataclasses import dataclass

from ticklock.handlers.plugin import (
    Context,
    EngineSettings,
    HealthCheck,
    Plugin,
    Registry,
    Setting,
    SystemJob,
    http_url,
    integer,
    optional_text,
    store_url,
)
from ticklock_parts.adapters.store import shared_store
from ticklock_parts.alerts import handler as alerts
from ticklock_parts.catalogue import handler as catalogue

DAY = 86400


@dataclass(frozen=True)
class PartsConfig:
    """The plug-in's settings, typed (``Settings.section("parts")``)."""

    store: str
    alerts_every: int
    catalogue_every: int
    vendor_url: str
    vendor_key: str | None
    vendor_batch: int
    vendor_daily_quota: int

    def store_url(self, engine: EngineSettings) -> str:
        """Where the product's data lives: ``TICKLOCK_PARTS_STORE``, else the job store."""
        return self.store or engine.store_url


SETTINGS = (
    Setting(
        "store",
        "",
        store_url,
        "where the product's data lives (alerts, parts, notifications): empty = the job store",
        aliases=("product_store",),
    ),
    Setting(
        "alerts_every",
        "86400",
        integer(60, 30 * DAY),
        "seconds between alert scans (the seeded job's interval)",
        aliases=("alerts_every",),
    ),
    Setting(
        "catalogue_every",
        "3600",
        integer(60, 30 * DAY),
        "seconds between catalogue walks (the seeded job)",
        aliases=("catalogue_every",),
    ),
    Setting(
        "vendor_url", "", http_url, "the spot-price vendor's API base URL (the catalogue walk)", aliases=("vendor_url",)
    ),
    Setting(
        "vendor_key",
        "",
        optional_text,
        "the vendor's API key (sent as X-Api-Key)",
        secret=True,
        aliases=("vendor_key",),
    ),
    Setting("vendor_batch", "50", integer(1, 1000), "parts priced per vendor request", aliases=("vendor_batch",)),
    Setting(
        "vendor_daily_quota",
        "1000",
        integer(1, 10_000_000),
        "vendor requests allowed per UTC day, all processes",
        aliases=("vendor_daily_quota",),
    ),
)


def register(registry: Registry, context: Context[PartsConfig]) -> None:
    alerts.register(registry, context)
    catalogue.register(registry, context)


def system_jobs(context: Context[PartsConfig]) -> list[SystemJob]:
    config = context.config
    return [
        # ten minutes; no retries: the next run is the retry
        SystemJob(alerts.NAME, every=config.alerts_every, timeout=600.0),
        SystemJob(
            catalogue.NAME,
            every=config.catalogue_every,
            timeout=900.0,  # fifteen minutes of pages at most; the next run resumes at the cursor
            needs=None if config.vendor_url else "TICKLOCK_PARTS_VENDOR_URL",
        ),
    ]


def health(context: Context[PartsConfig]) -> list[HealthCheck]:
    url = context.config.store_url(context.engine)

    def store() -> str | None:
        shared_store(url).ping()
        return None

    return [HealthCheck("store", store)]


plugin = Plugin(
    name="parts",
    register=register,
    settings=SETTINGS,
    config=PartsConfig,
    system_jobs=system_jobs,
    health=health,
    description="the part-alert product: the alert scanner and the spot-price catalogue walk",
)
