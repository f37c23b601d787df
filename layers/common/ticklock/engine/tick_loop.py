"""The tick function's minute: per-second ticks under a lease, handed over to the next minute's invocation.

EventBridge can fire a function at most once a minute, so each invocation runs the dispatcher - claims
every second, fires handed to the queue at their exact times - for about a minute. A lease in the lock
backend keeps it to one loop at a time, whatever EventBridge does (a late or retried invocation, two at
once): the loop runs only while it holds the lease.

The hand-over: an invocation that finds the lease held raises a flag and waits for the lease (up to
``wait_for_lease`` seconds). The holder, once it has run ``run_for - overlap`` seconds, looks for that
flag every ``check_every`` seconds and, seeing it, stops, gives its held fires back to the store and
releases the lease; the newcomer takes over within about a second. With no newcomer the holder goes on
until ``run_for + overlap`` (or its own time budget), so a late invocation leaves no gap either. A loop
whose invocation died keeps the lease until its TTL: the gap is then at most one lease length.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from ticklock.clock import Clock
from ticklock.domain.fires import LOCK_MARGIN
from ticklock.engine.dispatcher import Dispatcher
from ticklock.errors import LockUnavailable
from ticklock.ports import Locker

log = logging.getLogger("ticklock.tick")

LEASE_KEY = "ticklock:tick"
HANDOFF_KEY = "ticklock:tick:handoff"


@dataclass(frozen=True)
class TickReport:
    """What one invocation did."""

    ran: bool
    seconds: float = 0.0
    reason: str = ""
    handed_over: bool = False
    given_back: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "ran": self.ran,
            "seconds": round(self.seconds, 3),
            "reason": self.reason,
            "handed_over": self.handed_over,
            "given_back": self.given_back,
        }


class TickLoop:
    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        locker: Locker,
        clock: Clock,
        run_for: float = 60.0,
        overlap: float = 10.0,
        wait_for_lease: float = 15.0,
        check_every: float = 0.5,
    ) -> None:
        self.dispatcher = dispatcher
        self.locker = locker
        self.clock = clock
        self.run_for = run_for
        self.overlap = overlap
        self.wait_for_lease = wait_for_lease
        self.check_every = check_every

    def run(self, budget: float) -> TickReport:
        """Tick for about a minute, within ``budget`` seconds (the invocation's remaining time less a margin)."""
        started = self.clock.now()
        end_by = started + timedelta(seconds=budget)
        try:
            token = self._take_lease(end_by)
        except LockUnavailable as exc:
            log.error("tick.lease_unavailable", extra={"error": str(exc)})
            return TickReport(ran=False, reason=f"lock backend unavailable: {exc}")
        if token is None:
            log.warning("tick.lease_held", extra={"waited": self.wait_for_lease})
            return TickReport(ran=False, reason="another tick loop holds the lease")
        acquired = self.clock.now()
        hard = min(acquired + timedelta(seconds=self.run_for + self.overlap), end_by)
        soft = acquired + timedelta(seconds=self.run_for - self.overlap)
        stop = threading.Event()
        handed_over = threading.Event()
        watcher = threading.Thread(
            target=self._watch, args=(stop, handed_over, soft, hard), name="ticklock-tick-watch", daemon=True
        )
        watcher.start()
        try:
            self.dispatcher.run(stop)
        finally:
            stop.set()
            watcher.join()
            held = self.dispatcher.take_pending()
            self.dispatcher.give_back(held)
            try:
                self.locker.release(LEASE_KEY, token)
            except LockUnavailable as exc:  # the lease's TTL ends it instead
                log.warning("tick.lease_release_failed", extra={"error": str(exc)})
        seconds = (self.clock.now() - acquired).total_seconds()
        log.info(
            "tick.loop_done",
            extra={"seconds": round(seconds, 3), "handed_over": handed_over.is_set(), "given_back": len(held)},
        )
        return TickReport(ran=True, seconds=seconds, handed_over=handed_over.is_set(), given_back=len(held))

    def _take_lease(self, end_by: datetime) -> str | None:
        """The lease, waiting for a running loop to hand over; None if it is not had in time."""
        give_up = min(self.clock.now() + timedelta(seconds=self.wait_for_lease), end_by)
        flag: str | None = None
        try:
            while True:
                ttl = (end_by - self.clock.now()).total_seconds() + LOCK_MARGIN
                token = self.locker.acquire(LEASE_KEY, ttl)
                if token is not None or self.clock.now() >= give_up:
                    return token
                if flag is None:  # tell the holder somebody is waiting
                    flag = self.locker.acquire(HANDOFF_KEY, self.wait_for_lease + LOCK_MARGIN)
                self.clock.sleep(0.1)
        finally:
            if flag is not None:
                self.locker.release(HANDOFF_KEY, flag)

    def _watch(self, stop: threading.Event, handed_over: threading.Event, soft: datetime, hard: datetime) -> None:
        while not self.clock.sleep(self.check_every, stop):
            now = self.clock.now()
            if now >= hard:
                stop.set()
            elif now >= soft and self._successor_waiting():
                handed_over.set()
                stop.set()

    def _successor_waiting(self) -> bool:
        try:
            probe = self.locker.acquire(HANDOFF_KEY, 1.0)
        except LockUnavailable:
            return False  # keep ticking; the hard deadline still ends this loop
        if probe is None:
            return True
        self.locker.release(HANDOFF_KEY, probe)
        return False
