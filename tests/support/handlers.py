"""Handlers for tests, loaded as a plug-in module (TICKLOCK_HANDLER_MODULES=tests.support.handlers).

They are stateless - behaviour comes from the payload - so they work the same in any process.
``record`` appends one line per invocation to ``payload["path"]``: counting lines counts handler starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time

from ticklock.handlers.contract import HandlerContext, Registry


def _record(ctx: HandlerContext) -> None:
    path = ctx.payload.get("path")
    if path:
        line = json.dumps(
            {
                "job_id": ctx.job_id,
                "scheduled_at": ctx.scheduled_at.isoformat(),
                "execution_id": ctx.execution_id,
                "attempt": ctx.attempt,
                "pid": os.getpid(),
                "tid": threading.get_native_id(),
            }
        )
        fd = os.open(str(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def record(ctx: HandlerContext) -> None:
    """Append a line to payload.path and succeed."""
    _record(ctx)


def fail(ctx: HandlerContext) -> None:
    """Always fail."""
    _record(ctx)
    raise RuntimeError(str(ctx.payload.get("message", "planned failure")))


def flaky(ctx: HandlerContext) -> None:
    """Fail until attempt number payload.succeed_on."""
    _record(ctx)
    if ctx.attempt < int(ctx.payload.get("succeed_on", 2)):
        raise RuntimeError(f"attempt {ctx.attempt} fails")


def sleep(ctx: HandlerContext) -> None:
    """Sleep payload.seconds, ignoring the deadline (the behaviour the pool must survive)."""
    _record(ctx)
    time.sleep(float(ctx.payload.get("seconds", 1.0)))


def wait(ctx: HandlerContext) -> None:
    """Wait payload.seconds, or until cancelled (the cooperative way)."""
    _record(ctx)
    ctx.cancelled.wait(float(ctx.payload.get("seconds", 1.0)))


def gated(ctx: HandlerContext) -> None:
    """Sleep payload.seconds, ignoring the deadline, while the file payload.gate exists; else return at once
    (a quick handler that turns slow when a test says so)."""
    _record(ctx)
    if os.path.exists(str(ctx.payload["gate"])):
        time.sleep(float(ctx.payload.get("seconds", 1.0)))


async def async_sleep(ctx: HandlerContext) -> None:
    """Sleep payload.seconds asynchronously (cancelled at the deadline)."""
    _record(ctx)
    await asyncio.sleep(float(ctx.payload.get("seconds", 1.0)))


def register(registry: Registry) -> None:
    registry.register("test.record", record)
    registry.register("test.fail", fail)
    registry.register("test.flaky", flaky)
    registry.register("test.sleep", sleep)
    registry.register("test.wait", wait)
    registry.register("test.gated", gated)
    registry.register("test.async_sleep", async_sleep)
