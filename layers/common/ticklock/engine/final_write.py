"""Steps 4 and 5's write, tried again through a store outage. Giving up would leave the execution RUNNING,
and the fire would be run again once its claim lapsed; so the write is retried (``COMPLETE_BACKOFF``), and
a try after one that failed checks whether that one applied."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from ticklock.clock import Clock
from ticklock.domain.executions import Execution
from ticklock.domain.fires import Fire
from ticklock.errors import StoreUnavailable
from ticklock.ports import Store

log = logging.getLogger("ticklock.lifecycle")  # a fire's life, as its log lines have always been named
T = TypeVar("T")

COMPLETE_BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)  # seconds between tries while the store is out


def complete(store: Store, clock: Clock, done: Execution, fire: Fire, next_run: datetime | None, now: datetime, *,
             retried: bool = False) -> tuple[bool, bool]:  # fmt: skip
    """``Store.complete`` (finished, advanced), through an outage. The writes are guarded, and a try after
    the first (``retried``: a write of it failed before) checks whether an earlier one finished the row and
    failed on the advance."""
    tries = 1 if retried else 0

    def write() -> tuple[bool, bool]:
        nonlocal tries
        tries += 1
        finished, advanced = store.complete(done, fire, next_run_at=next_run, now=now)
        if finished or tries == 1:  # the first try: nothing before it can have applied
            return finished, advanced
        stored = store.get_execution(done.id)
        if stored.run_token != done.run_token or stored.status is not done.status:
            return False, False
        return True, store.advance(fire, next_run_at=next_run, now=now)

    return through_outage(clock, fire, write, "execution.complete_retry")


def through_outage(clock: Clock, fire: Fire, write: Callable[[], T], retried: str) -> T:
    """``write``, tried again through a store outage, each retry logged as ``retried``."""
    for wait in (*COMPLETE_BACKOFF, None):
        try:
            return write()
        except StoreUnavailable as exc:
            if wait is None:
                raise
            log.warning(retried, extra={"job_id": fire.job.id, "error": str(exc), "wait": wait})
            clock.sleep(wait)
    raise AssertionError("unreachable")
