"""The local worker pool: a queue bounded at ``queue_size`` (twice the workers by default) and ``workers``
threads that each take a fire and ``run`` it to its end (the reference's channel and workers). A worker that
takes a fire which may go ``together`` with others takes those of the same handler queued right behind it
too (up to ``most``) and runs them as one list: they share their store writes (``fire_path.run_all``); a
handler that suddenly hangs holds up the rest of its own list only, until its deadline.

``submit`` waits while the queue is full, so the dispatcher falls behind the clock instead of growing
memory: at most ``workers + queue_size`` fires are ever held here. A worker is woken when the queue stops
being empty, and each worker that takes fires wakes the next while some are left: fires handed over in a
burst are taken in groups by the few workers that wake, rather than one each by as many.

A worker held by a handler past its deadline is replaced (``stuck``, which the invoker calls once it has
given the run up and started finishing the fire on another thread), so ``workers`` threads keep serving
the queue however many handlers hang; the stuck one ends when its handler returns.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence

from ticklock.domain.fires import Fire
from ticklock.errors import QueueUnavailable

log = logging.getLogger("ticklock.pool")


class WorkerPool:
    """The ``FireQueue`` port in process."""

    def __init__(
        self,
        run: Callable[[list[Fire]], object],
        *,
        workers: int = 30,
        queue_size: int | None = None,
        together: Callable[[Fire], bool] = lambda fire: False,
        most: int = 16,
    ) -> None:
        self._run = run  # the work: a fire, or fires taken together, as a list
        self._together = together
        self._most = most
        self.workers = workers
        self.maxsize = queue_size or 2 * workers
        self._fires: collections.deque[Fire] = collections.deque()
        self._mutex = threading.Lock()
        self._not_empty = threading.Condition(self._mutex)
        self._not_full = threading.Condition(self._mutex)
        self._taking = True  # fires are taken (until ``close_intake``)
        self._stopping = False  # workers end once the queue is empty (``stop``)
        self._busy = 0
        self._threads: set[threading.Thread] = set()
        self._names = itertools.count()
        with self._mutex:
            for _ in range(workers):
                self._start_worker()

    # -- the FireQueue port ---------------------------------------------------------------------------
    def submit(self, fire: Fire) -> None:
        """Queue ``fire``, waiting while the queue is full; QueueUnavailable once the pool takes no more
        fires (``close_intake``, ``drain_unstarted``, ``stop``), even if this call was waiting then: the caller
        gives the fire back."""
        with self._mutex:
            while self._taking and len(self._fires) >= self.maxsize:
                self._not_full.wait()
            if not self._taking:
                raise QueueUnavailable("the worker pool is shutting down", [fire])
            self._fires.append(fire)
            if len(self._fires) == 1:  # else a worker woken for the fires before it wakes the next (``_work``)
                self._not_empty.notify()

    def free_slots(self) -> int:
        # an idle worker takes a fire off the queue at once, so the room left in the queue is the room
        with self._mutex:
            return max(0, self.maxsize - len(self._fires))

    def flush(self) -> None:
        """Nothing to send: a submitted fire is in the queue already."""

    def drain_unstarted(self) -> Sequence[Fire]:
        """Take no more fires, and hand back those not started (to be given back to the store)."""
        with self._mutex:
            self._taking = False
            self._not_full.notify_all()
            fires, self._fires = list(self._fires), collections.deque()
        return fires

    # -- running and stopping -------------------------------------------------------------------------
    def close_intake(self) -> None:
        """Take no more fires: a ``submit`` waiting for room raises now, and every one after."""
        with self._mutex:
            self._taking = False
            self._not_full.notify_all()

    def stuck(self, thread: threading.Thread) -> None:
        """``thread``'s handler outlived its deadline, and its fire is being finished by its take-over: it no
        longer counts as a worker, and another takes its place while the pool runs."""
        with self._mutex:
            if thread not in self._threads:
                return
            self._threads.discard(thread)
            self._busy -= 1
            if not self._stopping:
                self._start_worker()

    def stop(self, timeout: float) -> bool:
        """Let the workers finish what they run (and what is queued); True if all did within ``timeout``.
        A stuck worker is not waited for: its take-over finishes its fire (``Invoker.close`` waits for it)."""
        with self._mutex:
            self._taking = False
            self._stopping = True
            self._not_full.notify_all()
            self._not_empty.notify_all()
        ends_at = time.monotonic() + timeout
        while True:
            with self._mutex:
                live = [t for t in self._threads if t.is_alive()]
            left = ends_at - time.monotonic()
            if not live:
                return True
            if left <= 0:
                return False
            live[0].join(min(left, 0.1))

    def busy(self) -> int:
        with self._mutex:
            return self._busy

    def depth(self) -> int:
        with self._mutex:
            return len(self._fires)

    def _start_worker(self) -> None:
        """Under ``_mutex``."""
        thread = threading.Thread(target=self._work, name=f"ticklock-worker-{next(self._names)}", daemon=True)
        self._threads.add(thread)
        thread.start()

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            with self._mutex:
                while not self._fires and not self._stopping:
                    self._not_empty.wait()
                if not self._fires:  # stopping, and nothing left to run
                    self._threads.discard(me)
                    return
                fires = [first := self._fires.popleft()]
                if self._together(first):  # of one handler: one that hangs holds up only its own kind
                    while self._fires and len(fires) < self._most and _alike(first, self._fires[0], self._together):
                        fires.append(self._fires.popleft())
                if self._fires:  # the rest for the next worker
                    self._not_empty.notify()
                self._not_full.notify()
                self._busy += 1
            try:
                self._run(fires)
            except Exception:
                first = fires[0]
                log.exception("worker.crashed", extra={"job_id": first.job.id, "fires": len(fires),
                                                       "fire_time": first.scheduled_at.isoformat()})  # fmt: skip
            with self._mutex:
                if me not in self._threads:  # replaced while its handler hung (``stuck``): its place is taken
                    return
                self._busy -= 1


def _alike(first: Fire, other: Fire, together: Callable[[Fire], bool]) -> bool:
    return other.job.handler == first.job.handler and together(other)
