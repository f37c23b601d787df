"""Execution events on an EventBridge bus, sent from a background thread so a run never waits for them.

``publish`` only queues (bounded: 10,000 events); a sender thread ships them with ``PutEvents``, ten
entries per call. An outage, throttling or a rejected entry is logged and counted
(``ticklock_events_dropped_total`` through ``on_drop``), never raised into a run; a full queue drops
the newest event the same way. ``flush`` waits for the queue to empty (the end of a Lambda invocation,
a shutdown). The endpoint follows ``AWS_ENDPOINT_URL`` (LocalStack, moto), as boto3 does.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config

from ticklock.domain.events import ExecutionEvent

log = logging.getLogger("ticklock.events")
SOURCE = "ticklock"
BATCH = 10  # PutEvents takes at most ten entries


def events_client(endpoint_url: str | None = None) -> Any:
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"})
    return boto3.client("events", region_name=region, endpoint_url=endpoint_url, config=config)


class EventBridgePublisher:
    """The ``Publisher`` port on an EventBridge bus."""

    publishes = True

    def __init__(
        self, bus: str, *, client: Any = None, max_queue: int = 10_000, on_drop: Callable[[int], None] | None = None
    ) -> None:
        self.bus = bus
        self._client = client or events_client()
        self._queue: queue.Queue[ExecutionEvent | None] = queue.Queue(maxsize=max_queue)
        self._on_drop = on_drop or (lambda n: None)
        self.dropped = 0
        self._sender = threading.Thread(target=self._send_loop, name="ticklock-events", daemon=True)
        self._sender.start()

    def publish(self, event: ExecutionEvent) -> None:
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._drop(1, "queue_full")

    def flush(self, timeout: float) -> None:
        ends = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < ends:
            time.sleep(0.01)

    def close(self, timeout: float = 5.0) -> None:
        self.flush(timeout)
        self._queue.put(None)
        self._sender.join(timeout)

    def _send_loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                self._queue.task_done()
                return
            batch = [first]
            while len(batch) < BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # stop after this batch
                    self._queue.task_done()
                    break
                batch.append(item)
            try:
                self._send(batch)
            finally:
                for _ in batch:
                    self._queue.task_done()

    def _send(self, batch: list[ExecutionEvent]) -> None:
        entries = [
            {"Source": SOURCE, "DetailType": e.detail_type, "Detail": json.dumps(e.detail()), "EventBusName": self.bus}
            for e in batch
        ]
        try:
            answer = self._client.put_events(Entries=entries)
        except Exception as exc:  # noqa: BLE001 - an outage must never reach a run
            self._drop(len(batch), "put_events_failed", error=f"{type(exc).__name__}: {exc}")
            return
        if answer.get("FailedEntryCount"):
            failed = [r for r in answer.get("Entries", []) if r.get("ErrorCode")]
            self._drop(
                len(failed), "entries_rejected", error=", ".join(sorted({str(r.get("ErrorCode")) for r in failed}))
            )

    def _drop(self, count: int, reason: str, error: str | None = None) -> None:
        self.dropped += count
        log.warning("events.dropped", extra={"count": count, "reason": reason, "error": error, "bus": self.bus})
        try:
            self._on_drop(count)
        except Exception:  # noqa: BLE001 - metrics fail soft too
            log.debug("events.drop_count_failed")
