"""Advances from many workers written in bulks by one thread."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from ticklock.domain.jobs import Execution, Fire


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
        with self._mutex:
            if self._writer is None:
                self._writer = threading.Thread(target=self._loop, name="ticklock-mongo-advances", daemon=True)
                self._writer.start()
        self._queue.put(item)
        item.done.wait()
        if item.error is not None:
            raise item.error
        return item.result

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
