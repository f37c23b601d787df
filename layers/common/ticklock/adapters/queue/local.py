"""The local worker pool: N threads fed by a queue bounded at 2 x N (the reference's channel).

``submit`` blocks while the queue is full: the dispatcher falls behind the clock instead of growing
memory. At most ``workers + queue_size`` fires are ever held here.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence

from ticklock.domain.jobs import Fire

log = logging.getLogger("ticklock.pool")
_STOP = object()


class WorkerPool:
    """The ``FireQueue`` port in process: a bounded queue and a fixed set of worker threads."""

    def __init__(self, run: Callable[[Fire], object], *, workers: int = 30, queue_size: int | None = None) -> None:
        self._run = run
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_size or 2 * workers)
        self._busy = 0
        self._mutex = threading.Lock()
        self._accepting = True
        self.workers = workers
        self._threads = [
            threading.Thread(target=self._work, name=f"ticklock-worker-{i}", daemon=True) for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fire: Fire) -> None:
        if not self._accepting:
            raise RuntimeError("the worker pool is shutting down")
        self._queue.put(fire)

    def free_slots(self) -> int:
        # An idle worker takes a fire off the queue at once, so the room left in the queue is the room.
        return max(0, self._queue.maxsize - self._queue.qsize())

    def flush(self) -> None:
        return None

    def depth(self) -> int:
        return self._queue.qsize()

    def drain_unstarted(self) -> Sequence[Fire]:
        self._accepting = False
        fires: list[Fire] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, Fire):
                fires.append(item)
        return fires

    def stop(self, timeout: float) -> bool:
        """Let the workers finish what they run; True if every one returned within ``timeout``."""
        self._accepting = False
        for _ in self._threads:
            self._queue.put(_STOP)
        ends_at = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, ends_at - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def busy(self) -> int:
        with self._mutex:
            return self._busy

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            assert isinstance(item, Fire)
            with self._mutex:
                self._busy += 1
            try:
                self._run(item)
            except Exception:
                log.exception(
                    "worker.crashed", extra={"job_id": item.job.id, "fire_time": item.scheduled_at.isoformat()}
                )
            finally:
                with self._mutex:
                    self._busy -= 1
