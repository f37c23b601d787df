"""A process that writes jobs into a SQLite store until it is killed (tests/integration/test_sqlite_crash.py).

    python -m tests.support.sqlite_writer PATH PREFIX SEED [--checkpoint]

It writes in bursts with pauses between them, so that the checkpoint thread (``--checkpoint``: every
10 ms, truncating any WAL it finds quiet) checkpoints and truncates over and over while it runs. After each
write returns it prints ``ok <name>`` (the write is committed: the test holds the store to every such
line), and before and after each pause ``t <truncations> <checkpoints>``. Without ``--checkpoint`` it is another
process on the same file with no checkpoint thread of its own: a CLI beside ``serve``.
"""

from __future__ import annotations

import random
import sys
import time

from tests.support.factories import make_job
from ticklock.adapters.store.sqlite import SQLiteStore


def main(path: str, prefix: str, seed: int, checkpoint: bool) -> None:
    store = SQLiteStore(path, checkpoint_every=0.01 if checkpoint else 0, wal_kept=0)
    rng = random.Random(seed)
    n = 0
    pad = "x" * 300  # a few rows a page: every burst dirties pages for the checkpoint to copy
    while True:
        for _ in range(rng.randint(1, 40)):
            if rng.random() < 0.5:
                store.add_job(make_job(f"{prefix}-{n}", payload={"pad": pad}))
                names = [f"{prefix}-{n}"]
                n += 1
            else:  # a batch in one transaction: all of it is there after a crash, or none of it
                names = [f"{prefix}-{n + k}" for k in range(5)]
                store.add_jobs([make_job(name, payload={"pad": pad}) for name in names])
                n += 5
            sys.stdout.write("".join(f"ok {name}\n" for name in names))
            sys.stdout.flush()
        for _ in range(2):  # before the pause and after it: what the checkpoint thread did in it counts too
            sys.stdout.write(f"t {store.truncations} {store.checkpoints}\n")
            sys.stdout.flush()
            time.sleep(rng.uniform(0.01, 0.04))  # quiet rounds (of 10 ms) for the checkpoint thread to truncate in


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), "--checkpoint" in sys.argv[4:])
