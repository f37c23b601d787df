"""The dispatcher: every wall-clock second it claims what is due, and starts each fire on time.

It claims with a look-ahead (``lookahead`` seconds, 1 by default): a job due within the coming second is
claimed now and held until its exact fire time, then handed to the queue. So fires start at their
scheduled instant, not at the next whole second, and interval jobs do not drift onto second
boundaries. Claimed-but-not-yet-due fires are bounded by ``max_pending``. A queue with a delivery delay
(SQS) is given fires ``send_ahead`` seconds early, in windows of half that, so that they go in full
batches; its consumer waits for the fire time. Between hand-overs the dispatcher sleeps at least
``resolution`` (serve: 20 ms): the fires that come due meanwhile go out together, each at most that late,
for one wake-up of the dispatcher rather than one per fire. A fire with none due that soon after the last
hand-over goes at its instant. While a claim comes back full it claims again at once: the batch is a batch,
not a ceiling per second. Handing a fire to a full
queue blocks, so the dispatcher falls behind the clock instead of growing memory. A store outage is
logged and the tick is tried again the next second; nothing here lets an exception end the loop.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from datetime import UTC, datetime, timedelta

from ticklock.clock import Clock
from ticklock.domain.fires import Fire
from ticklock.engine.heartbeat import Heartbeat
from ticklock.errors import QueueUnavailable, StoreUnavailable
from ticklock.ports import FireQueue, Metrics, Store

log = logging.getLogger("ticklock.dispatcher")


MAX_PENDING = 10_000  # claimed fires held for their time, at most (the setting's default)


class Dispatcher:
    """Claims due jobs in batches and releases each fire to the queue at its scheduled time."""

    def __init__(
        self,
        *,
        store: Store,
        queue: FireQueue,
        clock: Clock,
        metrics: Metrics,
        owner: str,
        batch_size: int = 100,
        lookahead: float = 1.0,
        lease_slack: float = 60.0,
        max_pending: int = MAX_PENDING,
        send_ahead: float = 0.0,
        resolution: float = 0.0,
        heartbeat: Heartbeat | None = None,
    ) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.metrics = metrics
        self.owner = owner
        self.batch_size = batch_size
        self.lookahead = timedelta(seconds=lookahead)
        self.slack = timedelta(seconds=lease_slack)
        self.max_pending = max_pending
        self.send_ahead = timedelta(seconds=send_ahead)
        self.resolution = timedelta(seconds=resolution)
        # keeps the claims of the fires held here and in the local pool (None: they wait in SQS instead,
        # which the claim's slack covers, and the runner that takes one keeps its claim)
        self.heartbeat = heartbeat
        self._handed: datetime | None = None  # when the last hand-over of any fire began
        self._pending: list[tuple[datetime, int, Fire]] = []
        self._starved = False  # the last claim was cut short by max_pending: more may be due
        self._seq = itertools.count()
        self._mutex = threading.Lock()

    # -- one claim round ----------------------------------------------------------------------------
    def claim(self, now: datetime) -> tuple[int, bool]:
        """Claim due jobs (up to one batch, within the room left); returns (claimed, came back full)."""
        limit = min(self.batch_size, self._room())
        if limit <= 0:
            self._starved = True
            return 0, False
        started = time.perf_counter()
        try:
            jobs = self.store.claim_due(
                now=now, horizon=now + self.lookahead, limit=limit, owner=self.owner, slack=self.slack
            )
        except StoreUnavailable as exc:
            log.error("tick.store_unavailable", extra={"error": str(exc)})
            self._safely_tick(0, time.perf_counter() - started, failed=True)
            self._starved = False  # tried again at the next second, not at once (no loop on a store that is down)
            return 0, False
        fires = []
        for job in jobs:
            try:
                fires.append(Fire.of(job, now + self.lookahead))
            except ValueError as exc:  # claimed with nothing due (an edit raced the claim): give it back
                log.warning("claim.nothing_due", extra={"job_id": job.id, "error": str(exc)})
                if job.lease is not None:
                    self.store.release(job.id, job.lease.token)
        if self.heartbeat is not None:
            for fire in fires:
                self.heartbeat.hold(fire)
        with self._mutex:
            for fire in fires:
                heapq.heappush(self._pending, (fire.due, next(self._seq), fire))  # its slot plus its jitter
        self._safely_tick(len(jobs), time.perf_counter() - started, failed=False)
        # stopped by the room left, not by the store running out of due jobs: claim again once there is room
        self._starved = len(jobs) == limit < self.batch_size
        return len(jobs), len(jobs) == limit

    def _room_again(self) -> bool:
        """Whether the last claim was cut short by max_pending and a batch's worth of room (or, with
        max_pending below a batch, all of it) has come since."""
        return self._starved and self._room() >= min(self.batch_size, self.max_pending)

    def _room(self) -> int:
        with self._mutex:
            return self.max_pending - len(self._pending)

    def release_due(self, now: datetime, stop: threading.Event | None = None) -> int:
        """Hand every held fire whose time has come to the queue (blocking while it is full)."""
        released = 0
        try:
            while stop is None or not stop.is_set():
                with self._mutex:
                    if not self._pending or self._pending[0][0] > now:
                        break
                    _, _, fire = heapq.heappop(self._pending)
                released += 1  # counted first: the fires a refusal names were all counted, the refused one too
                self.queue.submit(fire)
            if released:
                self.queue.flush()
        except QueueUnavailable as exc:
            if stop is not None and stop.is_set():  # a stopping pool refuses what is still handed over
                log.info("queue.closed", extra={"given_back": len(exc.fires)})
            else:
                log.error("queue.unavailable", extra={"error": str(exc), "fires": len(exc.fires)})
            self.give_back(exc.fires)
            released -= len(exc.fires)
        return released

    def give_back(self, fires: list[Fire]) -> None:
        """Release claimed fires to the store untouched, so that the next claim takes them again."""
        for fire in fires:
            if self.heartbeat is not None:
                self.heartbeat.drop(fire)
            try:
                self.store.release(fire.job.id, fire.lease_token)
            except Exception as exc:  # noqa: BLE001 - the lease runs out instead; nothing is lost
                log.warning("release.failed", extra={"job_id": fire.job.id, "error": str(exc)})

    def next_wake(self) -> datetime | None:
        with self._mutex:
            return self._pending[0][0] if self._pending else None

    def take_pending(self) -> list[Fire]:
        """Empty the held fires (at shutdown, so that they can be released back to the store)."""
        with self._mutex:
            fires = [item[2] for item in self._pending]
            self._pending.clear()
        return fires

    # -- the loop -----------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Tick every wall-clock second until ``stop`` is set."""
        next_tick = self.clock.now()
        log.info(
            "dispatcher.started",
            extra={"owner": self.owner, "batch_size": self.batch_size, "lookahead": self.lookahead.total_seconds()},
        )
        more = False
        while not stop.is_set():
            try:
                now = self.clock.now()
                if now >= next_tick or more or self._room_again():
                    # a full batch means more may be due: claim again at once, not at the next second; so
                    # does a claim cut short by max_pending once released fires have made room (under a
                    # load of more than max_pending fires a second, waiting for the next second made each
                    # fire late by up to a second, and an interval job's next fire later still)
                    _, more = self.claim(now)
                    if now >= next_tick:
                        next_tick = _next_second(now)
                began = self.clock.now()
                if self.release_due(began + self.send_ahead, stop):
                    self._handed = began
                if more or self._room_again():  # before sleeping: the room may have come with the last release
                    continue
                now = self.clock.now()
                wake = next_tick
                held = self.next_wake()
                if held is not None:
                    # with send_ahead, fires go out in windows of half of it: fuller batches, fewer calls; and
                    # never sooner than ``resolution`` after the last hand-over began, so that the fires due
                    # within it go out together; a hand-over that itself lasted longer is followed at once
                    gap = max(self.send_ahead / 2, self.resolution)
                    after = held if self._handed is None else self._handed + gap
                    wake = min(wake, max(held - self.send_ahead, after))
                self.clock.sleep(max(0.0, (wake - now).total_seconds()), stop)
            except Exception:
                log.exception("dispatcher.error")
                more = False
                self.clock.sleep(1.0, stop)
        log.info("dispatcher.stopped", extra={"owner": self.owner})

    def _safely_tick(self, claimed: int, seconds: float, *, failed: bool) -> None:
        try:
            self.metrics.tick(claimed, seconds, failed)
        except Exception as exc:  # noqa: BLE001 - the loop must outlive any one bad tick
            log.warning("metrics.failed", extra={"error": str(exc)})


def _next_second(now: datetime) -> datetime:
    """The next whole wall-clock second after ``now``."""
    return datetime.fromtimestamp(math.floor(now.timestamp()) + 1, tz=UTC)
