"""The health probes behind ``/health``: the store's and each plug-in health check's, each pinged on a
thread of its own with a bound on the wait, so that a hung store costs one thread and a flood of health
checks one ping."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Protocol

from ticklock.errors import StoreUnavailable
from ticklock.handlers.plugin import HealthCheck
from ticklock.ports import StoreConnection

HEALTH_TIMEOUT = 1.0  # seconds /health waits for the store before it says "unavailable"
HEALTH_FRESH = 0.25  # seconds a ping's answer is reused by the health checks that follow it


class _CheckFailing(Exception):
    """A plug-in's health check said what is wrong (or raised)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Pingable(Protocol):
    def ping(self) -> None:
        """Return when healthy; raise ``StoreUnavailable`` or ``_CheckFailing`` with what is wrong."""
        ...


@dataclass(frozen=True)
class _Check:
    """A plug-in's health check, pinged like the store."""

    check: HealthCheck

    def ping(self) -> None:
        try:
            problem = self.check.check()
        except Exception as exc:  # noqa: BLE001 - a plug-in's check failing is its answer
            problem = f"{type(exc).__name__}: {exc}"
        if problem is not None:
            raise _CheckFailing(str(problem))


class Probe:
    """Pings the store (or a plug-in health check) with a bound on the wait. One ping at a time, shared:
    callers that come while it is out wait for it and its deadline (none longer than ``timeout`` from the
    ping's start), and an answer is reused for ``fresh_for`` seconds, so a flood of health checks costs
    the store one ping and a hung store one thread."""

    def __init__(
        self,
        target: _Pingable,
        timeout: float = HEALTH_TIMEOUT,
        fresh_for: float = HEALTH_FRESH,
        *,
        what: str = "the store",
    ) -> None:
        self._ping, self._what = target.ping, what
        self._timeout = timeout
        self._fresh_for = fresh_for
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ticklock-health")
        # re-entrant: a ping that is over already runs its done-callback (_record) inside _current
        self._mutex = threading.RLock()
        self._pending: Future[None] | None = None
        self._deadline = 0.0
        self._answer: str | None = None
        self._answered_at = float("-inf")

    def __call__(self) -> str | None:
        """None when the store answered in time, else why not."""
        current = self._current()
        if not isinstance(current, tuple):
            return current.problem
        pending, deadline = current
        try:
            pending.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            return f"{self._what} did not answer within {self._timeout:g} s"
        except (StoreUnavailable, _CheckFailing) as exc:
            return exc.message
        return None

    async def settle(self) -> None:
        """Wait, on the event loop and holding no thread, until ``__call__`` would answer at once."""
        current = self._current()
        if isinstance(current, tuple):
            pending, deadline = current
            with contextlib.suppress(Exception):
                shared = asyncio.shield(asyncio.wrap_future(pending))
                await asyncio.wait_for(shared, max(0.0, deadline - time.monotonic()))

    def start(self) -> None:
        """Send the ping now unless one is out or an answer is fresh (``__call__`` then waits for it)."""
        self._current()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _current(self) -> _Answer | tuple[Future[None], float]:
        with self._mutex:
            if time.monotonic() - self._answered_at < self._fresh_for:
                return _Answer(self._answer)
            if self._pending is None or self._pending.done():
                self._pending = self._pool.submit(self._ping)
                self._deadline = time.monotonic() + self._timeout
                self._pending.add_done_callback(self._record)
            return self._pending, self._deadline

    def _record(self, done: Future[None]) -> None:
        failure = None if done.cancelled() else done.exception()
        with self._mutex:
            self._answer = None if failure is None else getattr(failure, "message", None) or str(failure)
            self._answered_at = time.monotonic()


class Probes:
    """The store's probe and one per plug-in health check, asked together by ``/health``."""

    def __init__(self, store: StoreConnection, checks: Sequence[HealthCheck] = ()) -> None:
        self.store = Probe(store)
        self.checks = {c.name: Probe(_Check(c), what=c.name) for c in checks}

    def __call__(self) -> tuple[str | None, dict[str, str | None]]:
        """The store's problem (None: it answered), and each check's: all asked at once, so the answer
        takes as long as the slowest (each bounded by its timeout), not their sum."""
        for probe in (self.store, *self.checks.values()):
            probe.start()
        return self.store(), {name: probe() for name, probe in self.checks.items()}

    async def settle(self) -> None:
        await asyncio.gather(self.store.settle(), *(p.settle() for p in self.checks.values()))

    def close(self) -> None:
        for probe in (self.store, *self.checks.values()):
            probe.close()


@dataclass(frozen=True)
class _Answer:
    problem: str | None
