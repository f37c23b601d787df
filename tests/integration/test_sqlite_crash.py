"""The SQLite store killed with SIGKILL while its checkpoint thread checkpoints and truncates the WAL, and
while another process writes the same file: nothing committed is lost and the file stays sound.

What this attacks: the checkpoint thread (connection.py) truncates the WAL whenever a round passes with
nothing committed, on a connection of its own, beside writers in this process and in others. A kill -9
can land anywhere in that: inside a PASSIVE copy, inside TRUNCATE (which holds the write lock, copies
what is left, fsyncs and cuts the file), between a writer's WAL frames and its commit frame, or while the
other process recovers a WAL a killed one left behind. SQLite's WAL-reset bug (sqlite.org/wal.html,
3.7.0-3.51.2) needs exactly this pattern - a checkpointer beside writers that restart the log - and would
show here as a failed integrity check or a missing row.

Each round starts two writer processes (tests/support/sqlite_writer.py): one with the checkpoint thread
every 10 ms and no WAL kept, one with none (a CLI beside ``serve``); kills each with SIGKILL at a random
moment, the other first at random; and the next round opens what they left. The rows they reported
committed must all be there, once each, and ``PRAGMA integrity_check`` must say ok.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from ticklock.adapters.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 12


class _Writer:
    """A writer process and what it has said so far (read on a thread, so that its pipe never fills)."""

    def __init__(self, path: Path, prefix: str, *, checkpoint: bool, seed: int) -> None:
        argv = [sys.executable, "-m", "tests.support.sqlite_writer", str(path), prefix, str(seed)]
        if checkpoint:
            argv.append("--checkpoint")
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.committed: list[str] = []
        self.truncations = self.checkpoints = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "ok":
                self.committed.append(rest)
            elif kind == "t":
                truncations, checkpoints = rest.split()
                self.truncations, self.checkpoints = int(truncations), int(checkpoints)

    def wait_writing(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.committed:
            if self.proc.poll() is not None:
                raise AssertionError(f"the writer exited with {self.proc.returncode}: {self._stderr()}")
            assert time.monotonic() < deadline, "the writer wrote nothing"
            time.sleep(0.01)

    def kill(self) -> None:
        if self.proc.poll() is not None:  # it must be killed, not have died: a crash is a failure of its own
            raise AssertionError(f"the writer exited with {self.proc.returncode} before the kill: {self._stderr()}")
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._reader.join(10)
        assert not self._reader.is_alive(), "the writer's output was not read to its end"

    def end(self) -> None:
        """Kill it if it still runs, and close its pipes (after ``kill``, or after a failure)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(10)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()

    def _stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read()[-2000:]


def test_sigkill_during_checkpoints_and_truncations_loses_no_committed_row(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    SQLiteStore(path, checkpoint_every=0).close()  # the schema, before two processes race to make it
    seed = int(os.environ.get("CRASH_SEED", "0")) or random.randrange(1, 1 << 30)
    rng = random.Random(seed)
    committed: list[str] = []
    truncations = checkpoints = 0
    for n in range(ROUNDS):
        writers: list[_Writer] = []
        try:
            checkpointing = _Writer(path, f"c{n}", checkpoint=True, seed=seed + 2 * n)
            writers.append(checkpointing)
            other = _Writer(path, f"o{n}", checkpoint=False, seed=seed + 2 * n + 1)
            writers.append(other)
            checkpointing.wait_writing()
            other.wait_writing()
            time.sleep(rng.uniform(0.2, 0.6))
            first, second = (checkpointing, other) if rng.random() < 0.5 else (other, checkpointing)
            first.kill()
            time.sleep(rng.uniform(0.0, 0.1))  # the survivor goes on alone for a while: it may recover the WAL
            second.kill()
        finally:
            for writer in writers:  # a failure above must not leave a writer running for the rest of the suite
                writer.end()
        committed += checkpointing.committed + other.committed
        truncations += checkpointing.truncations
        checkpoints += checkpointing.checkpoints

    seen = f"(CRASH_SEED={seed}: {checkpoints} checkpoints, {truncations} truncations, {len(committed)} rows)"
    # the rounds did what they are here for: the WAL was checkpointed and truncated again and again
    assert checkpoints >= ROUNDS, seen
    assert truncations >= ROUNDS, seen
    assert len(committed) > 1_000, seen
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)], seen
        stored = {name for (name,) in conn.execute("SELECT name FROM jobs")}
    finally:
        conn.close()
    missing = set(committed) - stored
    assert not missing, f"{len(missing)} committed rows lost, e.g. {sorted(missing)[:5]} {seen}"
    # and the store opens it as ``serve`` would, and reads every row
    store = SQLiteStore(path, checkpoint_every=0)
    try:
        assert all(store.find_job_by_name(name) is not None for name in committed[:: max(1, len(committed) // 200)])
    finally:
        store.close()
