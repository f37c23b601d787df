"""Advances from many workers written in bulks by one thread."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from ticklock.domain.executions import Execution
from ticklock.domain.fires import Fire


@dataclass
class PendingAdvance:
    fire: Fire
    next_run_at: datetime | None
    now: datetime
    summary: Execution | None = None  # the finished run the advance counts in the job's summary
    done: threading.Event = field(default_factory=threading.Event)
    result: bool = False
    error: BaseException | None = None


class GroupCommit:
    """Advances handed in by many workers, written by one thread in bulks of at most ``MAX``.

    No waiting to fill a batch: the writer takes whatever is queued when it is free, so under load the
    advances of concurrent fires share one command, and alone a fire pays one round trip as before.
    ``MAX`` stays under what FerretDB 1.24 on PostgreSQL stalls on (an update command of ~50 statements).
    """

    MAX = 16

    def __init__(self, write: Callable[[list[PendingAdvance]], list[bool]]) -> None:
        self._write = write
        self._queue: queue.SimpleQueue[PendingAdvance] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._mutex = threading.Lock()

    def submit(self, item: PendingAdvance) -> bool:
        return self.submit_many([item])[0]

    def submit_many(self, items: list[PendingAdvance]) -> list[bool]:
        """``submit`` for each, all queued before waiting for any: they share the writer's bulks. Raises the
        first error met (each item's own result is kept on it)."""
        with self._mutex:
            if self._writer is None:
                self._writer = threading.Thread(target=self._loop, name="ticklock-mongo-advances", daemon=True)
                self._writer.start()
        for item in items:
            self._queue.put(item)
        for item in items:
            item.done.wait()
        for item in items:
            if item.error is not None:
                raise item.error
        return [item.result for item in items]

    def _loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < self.MAX:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                for item, result in zip(batch, self._write(batch), strict=True):
                    item.result = result
            except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
                for item in batch:
                    item.error = exc
            for item in batch:
                item.done.set()
