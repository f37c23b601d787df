"""Waiting in tests for what other threads do, without a timed assertion: poll until true or give up."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], timeout: float = 10.0) -> bool:
    """Poll ``condition`` every 10 ms until it is true or ``timeout`` seconds pass; its last answer."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())
