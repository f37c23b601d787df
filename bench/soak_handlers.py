"""The soak's handler, loaded by ``ticklock serve`` as a handler module (TICKLOCK_HANDLER_MODULES)."""

from __future__ import annotations

from ticklock.handlers.contract import HandlerContext, Registry


def wait(ctx: HandlerContext) -> None:
    """Wait payload.seconds, or until cancelled (overlap policy cancel_other, a deadline, a shutdown)."""
    ctx.cancelled.wait(float(ctx.payload.get("seconds", 1.0)))


def register(registry: Registry) -> None:
    registry.register("soak.wait", wait)
