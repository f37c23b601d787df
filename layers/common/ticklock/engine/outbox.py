"""Alert deliveries in the background (the ``Outbox`` port, to which ``domain.alerts`` hands its news): a
thread of their own with its own event loop, so that no run and no tick waits on a receiver."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ticklock.ports import EmailSender, WebhookSender

log = logging.getLogger("ticklock.alerts")
RETRY_WAITS = (1.0, 2.0, 4.0, 8.0, 16.0)  # seconds between tries of one delivery
MAX_SENDING = 8  # webhook calls and emails in flight at once


class Outbox:
    """Webhook calls and emails, each tried until it is taken (RETRY_WAITS): one destination's in the order
    they were asked for, different destinations side by side, at most MAX_SENDING at once."""

    def __init__(self, webhook: WebhookSender | None, email: EmailSender | None) -> None:
        self.webhook = webhook
        self.email = email
        self._loop: asyncio.AbstractEventLoop | None = None  # made on the first delivery
        self._thread: threading.Thread | None = None
        self._pending = 0
        self._idle = threading.Condition()
        self._sending: asyncio.Semaphore | None = None  # at most MAX_SENDING calls at once
        self._in_order: dict[str, asyncio.Lock] = {}  # one per destination (they are few: the jobs' and the default)

    def post(self, url: str, document: Mapping[str, Any]) -> None:
        if self.webhook is not None:
            sender = self.webhook
            parts = urlsplit(url)  # logged as scheme and host: a webhook's path and query often carry its key
            where = f"{parts.scheme}://{parts.hostname}"
            self._submit(url, f"webhook {where}", lambda: sender.post(url, document))

    def mail(self, to: str, subject: str, body: str) -> None:
        if self.email is not None:
            sender = self.email
            self._submit(to, f"email to {to}", lambda: sender.send(to, subject, body))

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every delivery to be made or given up; True if none is left."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        """Stop the delivery thread (what is still waiting for a retry is dropped, and logged as left)."""
        with self._idle:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
            left, self._pending, self._sending = self._pending, 0, None  # a reused outbox starts afresh
            self._in_order = {}
        if loop is None or thread is None:
            return
        if left:
            log.warning("alert.deliveries_dropped", extra={"count": left})
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()

    def _submit(self, target: str, what: str, deliver: Callable[[], Awaitable[None]]) -> None:
        with self._idle:
            self._pending += 1
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name="ticklock-alerts", daemon=True)
                self._thread.start()
            loop = self._loop
        asyncio.run_coroutine_threadsafe(self._deliver(target, what, deliver), loop)

    async def _deliver(self, target: str, what: str, deliver: Callable[[], Awaitable[None]]) -> None:
        if self._sending is None:
            self._sending, self._in_order = asyncio.Semaphore(MAX_SENDING), {}
        # one destination's deliveries go in the order they were asked for (a raise before its clear),
        # each with its retries; different destinations go side by side
        turn = self._in_order.setdefault(target, asyncio.Lock())
        try:
            async with turn:
                await self._attempts(what, deliver)
        finally:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()

    async def _attempts(self, what: str, deliver: Callable[[], Awaitable[None]]) -> None:
        assert self._sending is not None
        for attempt, wait in enumerate((*RETRY_WAITS, None), start=1):
            try:
                async with self._sending:
                    await deliver()
                return
            except Exception as exc:  # noqa: BLE001 - a receiver may fail any way: try again, then give up
                if wait is None or isinstance(exc, ValueError):  # ValueError: it never can be delivered
                    log.error(
                        "alert.delivery_failed", extra={"to": what, "attempts": attempt, "error": type(exc).__name__}
                    )
                    return
                log.warning("alert.delivery_retry", extra={"to": what, "error": type(exc).__name__, "wait": wait})
                await asyncio.sleep(wait)
