"""The heartbeat: keeps the claims and locks of the fires a process runs alive, a few seconds at a time.

A claim and a job's lock last only ``lease`` seconds past their last beat, so that when a process dies the
jobs it was running are claimable again within seconds, on any replica, whatever their timeouts (a long
timeout no longer means a long outage). While a fire is held (``hold``: from its claim, while it waits, is
queued and runs, to ``drop``: its final write, or its claim given back), every
``lease / 3`` seconds one store write extends the claims of all of them and each lock is extended
(``Locker.extend``). A process too stalled to beat for ``lease`` seconds loses its claims, and its fires may
be resumed elsewhere: the one re-run a crash may cause (docs/design.md, "What a crash can cause").
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from ticklock.clock import Clock
from ticklock.domain.fires import Fire
from ticklock.errors import LockUnavailable, TicklockError
from ticklock.ports import FireStore, Locker

log = logging.getLogger("ticklock.heartbeat")
LEASE = 6.0  # seconds a claim and a lock last past their last beat (TICKLOCK_LEASE_SLACK)


@dataclass
class Held:
    """A fire this process holds: its claim and how long it lasts, and its job's lock once taken ('' before,
    or once let go)."""

    job_id: str
    lease_token: str
    until: datetime
    lock_key: str = ""
    lock_token: str = ""
    claim: bool = True  # False once the write that ends the claim is about to be made: no beat keeps it


class Heartbeat:
    """The fires a process holds, and the beat that keeps their claims and locks (``beat``, from ``run``'s
    thread). Thread-safe: the fire path's threads hold and drop fires while it beats."""

    def __init__(self, *, store: FireStore, locker: Locker, clock: Clock, lease: float, lookahead: float) -> None:
        self.store = store
        self.locker = locker
        self.clock = clock
        self.lease = lease
        self.lookahead = lookahead  # a claim lasts from its horizon, which is this far ahead of its claim
        self.every = lease / 3
        # by delivery (the fire object, kept alive while held): a second delivery of the same fire in this
        # process is held and dropped on its own, never in place of the run it duplicates
        self._held: dict[int, tuple[Fire, Held]] = {}
        self._mutex = threading.Lock()
        # held through a beat's writes: a write that ends a claim waits for the beat in flight, so that no
        # beat of a claim overlaps its end (a store that updates a document as a whole could undo the end)
        self._beating = threading.Lock()

    def hold(self, fire: Fire) -> None:
        lease = fire.job.lease
        until = lease.until if lease is not None else self.clock.now()
        with self._mutex:
            self._held.setdefault(id(fire), (fire, Held(fire.job.id, fire.lease_token, until)))

    def locked(self, fire: Fire, key: str, token: str) -> None:
        """The fire's job lock, taken (``token``) or let go (''): kept alive with its claim."""
        with self._mutex:
            if (entry := self._held.get(id(fire))) is not None:
                entry[1].lock_key, entry[1].lock_token = key, token

    def claim_ends(self, fire: Fire) -> None:
        """The write that ends ``fire``'s claim (its final write, an advance, a release) comes next: no beat
        keeps the claim from here on, and none is in flight. Its lock is still kept until ``drop``."""
        with self._beating, self._mutex:
            if (entry := self._held.get(id(fire))) is not None:
                entry[1].claim = False

    def drop(self, fire: Fire) -> None:
        with self._beating, self._mutex:
            self._held.pop(id(fire), None)

    def until(self, fire: Fire) -> datetime | None:
        """When the fire's claim ends, as far as this process knows (its last beat, or its claim)."""
        with self._mutex:
            entry = self._held.get(id(fire))
        if entry is not None:
            return entry[1].until
        return fire.job.lease.until if fire.job.lease is not None else None

    def renew(self, fire: Fire) -> bool:
        """Extend ``fire``'s claim now, whether or not it looked lapsed: True if it is still this fire's (nobody
        claimed the job since), and then it lasts another lease. A fire that waited long in a queue, or whose
        beats a slow store held up, goes on rather than skip a claim that is still its own."""
        until = self.clock.now() + timedelta(seconds=self.lease + self.lookahead)
        try:
            renewed = self.store.extend_claims([(fire.job.id, fire.lease_token)], until=until) == 1
        except TicklockError:
            return False
        if renewed:
            with self._mutex:
                if (entry := self._held.get(id(fire))) is not None:
                    entry[1].until = max(entry[1].until, until)
        return renewed

    def held(self) -> list[Held]:
        with self._mutex:
            return [held for _, held in self._held.values()]

    def beat(self) -> None:
        """Extend every held claim and lock; a failure is logged, and the next beat tries again."""
        with self._beating:
            self._beat()

    def _beat(self) -> None:
        held = self.held()
        claims = [h for h in held if h.claim]
        until = self.clock.now() + timedelta(seconds=self.lease + self.lookahead)
        try:
            if claims:
                self.store.extend_claims([(h.job_id, h.lease_token) for h in claims], until=until)
        except TicklockError as exc:
            log.warning("heartbeat.claims_failed", extra={"fires": len(claims), "error": str(exc)})
        else:
            with self._mutex:
                for h in claims:
                    h.until = max(h.until, until)
        for h in held:
            if h.lock_token:
                try:
                    self.locker.extend(h.lock_key, h.lock_token, self.lease)
                except LockUnavailable as exc:
                    log.warning("heartbeat.lock_failed", extra={"job_id": h.job_id, "error": str(exc)})

    def run(self, stop: threading.Event) -> None:
        """Beat every ``lease / 3`` seconds until ``stop`` is set (a thread of the runtime's)."""
        # waited in real time: a fake clock's sleep returns at once, and the beats would spin it forward
        while not stop.wait(self.every):
            try:
                self.beat()
            except Exception:  # a beat's failure must not end the beating
                log.exception("heartbeat.failed")
