"""``alerts.scan``: the scanner as a registered handler.

Its data is at ``TICKLOCK_PARTS_STORE`` (default: the job store); its email goes by the engine's notifier
(``TICKLOCK_EMAIL``), which the plug-in's context hands it. The payload may tune the run:
``{"batch": 200, "lookups": 50, "sends": 10}`` (whole numbers within 1-1000).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ticklock.handlers.plugin import Context, HandlerContext, Registry
from ticklock_parts.adapters.store import shared_store
from ticklock_parts.alerts.scanner import ScanLimits, Scanner

if TYPE_CHECKING:
    from ticklock_parts.plugin import PartsConfig

NAME = "alerts.scan"
TUNABLE = ("batch", "lookups", "sends")


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


async def scan(ctx: HandlerContext, context: Context[PartsConfig]) -> None:
    """Evaluate the users' alert rules; notify (and email) on each change."""
    store = shared_store(context.config.store_url(context.engine))
    email = context.email()
    scanner = Scanner(store, email=email, now=ctx.now, limits=limits_from(dict(ctx.payload)), log=ctx.logger)
    report = await scanner.scan(ctx.deadline)
    if email is None and report.triggered:
        ctx.logger.warning("alerts.email_not_configured", extra={"reason": "TICKLOCK_EMAIL is empty"})


def register(registry: Registry, context: Context[PartsConfig]) -> None:
    @functools.wraps(scan)
    async def run(ctx: HandlerContext) -> None:
        await scan(ctx, context)

    registry.register(NAME, run)
