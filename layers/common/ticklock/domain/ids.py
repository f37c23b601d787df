"""The ids of jobs and executions: 32 hex digits in UUIDv7's layout, so that they sort by creation time.

Why not random (uuid4): a new row's id then lands on a random page of every index that holds it (the
primary key, ``(handler, id)``, ``(last_at, id)`` ...), and each of those pages is rewritten at the commit.
With the millisecond first, new ids go at the end of those indexes (bench/api.py measures creating jobs).
Unique by their 74 random bits, read from the OS for each id, so that threads and forked processes share
no state; ids made within one millisecond are in no given order.
"""

from __future__ import annotations

import os
import time

_RANDOM_B = (1 << 62) - 1


def new_id() -> str:
    """A fresh id: Unix milliseconds (48 bits), the version 7, 12 random bits, the variant, 62 random bits."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | (rand >> 68) << 64 | 0b10 << 62 | (rand & _RANDOM_B)
    return f"{value:032x}"


def new_token() -> str:
    """A fresh opaque token (a run's, a lock's): 96 random bits as 24 hex digits."""
    return os.urandom(12).hex()
