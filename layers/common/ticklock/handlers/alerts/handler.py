"""``alerts.scan``: the scanner as a registered handler, wired from the settings on its first run.

Registered through ticklock's ``ticklock.handlers`` entry point (``register``). Its data is at
``TICKLOCK_PRODUCT_STORE`` (default: the job store), its email goes by ``TICKLOCK_EMAIL``. The payload
may tune the run: ``{"batch": 200, "lookups": 50, "sends": 10}`` (whole numbers within 1-1000).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, replace
from typing import Any

from ticklock.handlers.alerts.ports import AlertStore, EmailSender
from ticklock.handlers.alerts.scanner import ScanLimits, Scanner
from ticklock.handlers.registry import HandlerContext, Registry
from ticklock.settings import Settings

NAME = "alerts.scan"
TUNABLE = ("batch", "lookups", "sends")


@dataclass(frozen=True)
class ScannerDeps:
    store: AlertStore
    email: EmailSender | None


_deps: dict[tuple[str, str, str], ScannerDeps] = {}  # by what they were built from
_deps_mutex = threading.Lock()


def build_deps(settings: Settings) -> ScannerDeps:
    """The scanner's adapters, chosen by the settings."""
    from ticklock.adapters.email import sender_from
    from ticklock.adapters.product import open_product_store

    return ScannerDeps(open_product_store(settings.product_store_url), sender_from(settings))


def deps(settings: Settings | None = None) -> ScannerDeps:
    """Built once per process (per warm Lambda environment) and reused; ``None``: from the environment."""
    settings = settings or Settings.load()
    key = (settings.product_store_url, settings.email, settings.email_from)
    with _deps_mutex:
        if key not in _deps:
            _deps[key] = build_deps(settings)
        return _deps[key]


def limits_from(payload: Any) -> ScanLimits:
    values: dict[str, int] = {}
    for name in TUNABLE:
        value = payload.get(name) if isinstance(payload, dict) else None
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
            raise ValueError(f"payload.{name} must be a whole number from 1 to 1000, got {value!r}")
        values[name] = value
    default = ScanLimits()
    return replace(
        default,
        batch=values.get("batch", default.batch),
        lookups=values.get("lookups", default.lookups),
        sends=values.get("sends", default.sends),
    )


async def scan(ctx: HandlerContext, settings: Settings | None = None) -> None:
    """Evaluate the users' alert rules; notify (and email) on each change."""
    found = deps(settings)
    scanner = Scanner(
        found.store, email=found.email, now=ctx.now, limits=limits_from(dict(ctx.payload)), log=ctx.logger
    )
    report = await scanner.scan(ctx.deadline)
    if found.email is None and report.triggered:
        ctx.logger.warning("alerts.email_not_configured", extra={"reason": "TICKLOCK_EMAIL is empty"})


def register(registry: Registry) -> None:
    settings = registry.settings  # the process's, flags included

    @functools.wraps(scan)
    async def run(ctx: HandlerContext) -> None:
        await scan(ctx, settings)

    registry.register(NAME, run)
