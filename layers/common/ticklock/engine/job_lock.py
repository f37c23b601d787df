"""Step 1 of a fire's path: taking its job's lock (under allow_all, the fire's own), so that its runs do not
overlap. A lock held by something other than this fire's own run is waited for a little, and a lock
backend that is out is met by the operator's choice (``LockFailure``)."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import Any

from ticklock.clock import Clock
from ticklock.domain.fire_rules import SkipReason
from ticklock.errors import LockUnavailable
from ticklock.ports import Locker

log = logging.getLogger("ticklock.lifecycle")  # a fire's life, as its log lines have always been named
# how long a fire whose job lock is held by something other than its own run waits for it, in growing steps
LOCK_WAIT, LOCK_PAUSE = 2.0, 0.05


class LockFailure(enum.StrEnum):
    """What a fire does when the lock backend is out: skip (counted, logged), or run (fail open: the unique
    execution row still stops a second run of the same fire)."""

    SKIP = "skip"
    RUN = "run"


def take_lock(locker: Locker, clock: Clock, key: str, ttl: float, *, has_run: Callable[[], bool],
              on_failure: LockFailure, fields: dict[str, Any]) -> str | SkipReason | None:  # fmt: skip
    """The lock's token; None when the backend is out and ``on_failure`` says run; else why the fire skips."""
    try:
        token = locker.acquire(key, ttl)
    except LockUnavailable as exc:
        log.error("lock.unavailable", extra={**fields, "error": str(exc), "policy": on_failure.value})
        return SkipReason.LOCK_UNAVAILABLE if on_failure is LockFailure.SKIP else None
    if token is None:
        token = _once_free(locker, clock, key, ttl, has_run)
    if token is None:
        log.info("fire.skipped", extra={**fields, "reason": SkipReason.LOCK_HELD.value})
        return SkipReason.LOCK_HELD
    return token


def _once_free(locker: Locker, clock: Clock, key: str, ttl: float, has_run: Callable[[], bool]) -> str | None:
    """The lock is held. Skipping is right when the holder is this fire's own run (a second delivery: its
    execution is there, or is about to be); anything else holds it briefly (a late copy of an earlier
    fire, which meets its execution and lets go at once), and skipping then would leave this fire unrun
    until its claim lapsed. So: while no execution of this fire appears, try again, up to ``LOCK_WAIT``."""
    waited, pause = 0.0, LOCK_PAUSE
    while waited < LOCK_WAIT and not has_run():
        clock.sleep(pause)
        waited += pause
        try:
            token = locker.acquire(key, ttl)
        except LockUnavailable:
            return None
        if token is not None:
            return token
        pause = min(pause * 2, 0.5)
    return None
