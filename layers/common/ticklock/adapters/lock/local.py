"""The in-process lock: right for one process; several processes need the Redis lock."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from ticklock.clock import Clock, SystemClock
from ticklock.domain.ids import new_token


class LocalLocker:
    """The ``Locker`` port in memory, with expiry read from the injected clock."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._held: dict[str, tuple[str, datetime]] = {}
        self._mutex = threading.Lock()

    def acquire(self, key: str, ttl: float) -> str | None:
        now = self._clock.now()
        token = new_token()  # unique, from a per-thread pool of random bytes: no system call (uuid4 makes one)
        with self._mutex:
            current = self._held.get(key)
            if current is not None and current[1] > now:
                return None
            self._held[key] = (token, now + timedelta(seconds=ttl))
            if len(self._held) > 1024:
                self._held = {k: v for k, v in self._held.items() if v[1] > now}
            return token

    def release(self, key: str, token: str) -> None:
        with self._mutex:
            current = self._held.get(key)
            if current is not None and current[0] == token:
                del self._held[key]

    def extend(self, key: str, token: str, ttl: float) -> bool:
        if ttl <= 0:
            raise ValueError(f"a lock is extended by a positive ttl, not {ttl}")
        now = self._clock.now()
        with self._mutex:
            current = self._held.get(key)
            if current is None or current[0] != token or current[1] <= now:
                return False
            self._held[key] = (token, now + timedelta(seconds=ttl))
            return True

    def close(self) -> None:
        """Nothing to let go of: the keys are this process's memory."""
