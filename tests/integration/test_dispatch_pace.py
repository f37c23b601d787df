"""The dispatcher's pace between hand-overs (``resolution``), on the real SQLite store and the fake clock:
when each fire is handed over, and with which others: each fire is handed over once, never before it is due
and never more than ``resolution`` after; a fire with none due within ``resolution`` of the last hand-over
goes at its instant; fires due close together share a hand-over.
"""

from __future__ import annotations

import itertools
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.factories import make_job
from tests.support.recorders import RecordingMetrics
from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.clock import FakeClock
from ticklock.domain.fires import Fire
from ticklock.domain.jobs import Job
from ticklock.engine.dispatcher import Dispatcher
from ticklock.runtimes.local import LocalService
from ticklock.settings import Settings

START = datetime(2026, 1, 1, 12, 0, 0, 100_000, tzinfo=UTC)  # claims at whole seconds: this one 0.9 s ahead


@dataclass
class HandOvers:
    """A queue that keeps, for each flush, the clock's time and the fires submitted since the last one."""

    clock: FakeClock
    expected: int
    run_ms: float = 0.0  # of the fake clock's time a fire, as the hand-over is made
    done: threading.Event = field(default_factory=threading.Event)
    taken: list[tuple[datetime, list[Fire]]] = field(default_factory=list)
    _open: list[Fire] = field(default_factory=list)

    def submit(self, fire: Fire) -> None:
        self._open.append(fire)

    def free_slots(self) -> int:
        return 1_000_000

    def flush(self) -> None:
        self.taken.append((self.clock.now(), self._open))
        self.clock.advance(self.run_ms * len(self._open) / 1000)
        self._open = []
        if sum(len(fires) for _, fires in self.taken) >= self.expected:
            self.done.set()

    def drain_unstarted(self) -> Sequence[Fire]:
        return []


Taken = list[tuple[datetime, list[Fire]]]


class SlowClaims(SQLiteStore):
    """A store whose claims take ``claim_ms`` of the fake clock's time (a real one's round trip)."""

    clock: FakeClock
    claim_ms = 0.0

    def claim_due(self, **kw: Any) -> list[Job]:
        self.clock.advance(self.claim_ms / 1000)
        return super().claim_due(**kw)


def hand_overs(
    offsets_ms: Sequence[int],
    *,
    resolution: float,
    run_ms: float = 0.0,
    claim_ms: float = 0.0,
) -> Taken:
    """Jobs due at START + each offset (ms), dispatched until all are handed over: the hand-overs. Each
    hand-over takes ``run_ms`` a fire of the fake clock's time (the dispatcher running it itself), each
    claim ``claim_ms``."""
    with tempfile.TemporaryDirectory() as folder:
        store = SlowClaims(Path(folder) / "pace.db")
        clock = FakeClock(START)
        store.clock, store.claim_ms = clock, claim_ms
        queue = HandOvers(clock, len(offsets_ms), run_ms)
        try:
            store.add_jobs([make_job(next_run_at=START + timedelta(milliseconds=ms)) for ms in offsets_ms])
            dispatcher = Dispatcher(
                store=store,
                queue=queue,
                clock=clock,
                metrics=RecordingMetrics(),
                owner="d",
                resolution=resolution,
            )
            loop = threading.Thread(target=dispatcher.run, args=(queue.done,), daemon=True)
            loop.start()
            loop.join(60)
            assert not loop.is_alive(), "the dispatcher did not hand every fire over"
        finally:
            queue.done.set()  # a loop still going ends (on the fake clock its sleeps take no time)
            store.close()
    return queue.taken


def due_times(taken: Taken) -> list[datetime]:
    return sorted(fire.due for _, fires in taken for fire in fires)


def lags_ms(taken: Taken) -> list[float]:
    return [(at - fire.due).total_seconds() * 1000 for at, fires in taken for fire in fires]


def test_fires_due_close_together_share_a_hand_over_none_later_than_the_resolution() -> None:
    taken = hand_overs(range(0, 200), resolution=0.02)  # one a millisecond
    assert due_times(taken) == [START + timedelta(milliseconds=ms) for ms in range(200)]  # each once
    assert min(lags_ms(taken)) >= 0 and max(lags_ms(taken)) <= 20
    # the first at its instant, then one hand-over every 20 ms with the 20 due since the last
    assert [len(fires) for _, fires in taken] == [1] + [20] * 9 + [19]


def test_without_a_resolution_each_fire_goes_at_its_instant() -> None:
    taken = hand_overs(range(0, 50), resolution=0.0)
    assert [len(fires) for _, fires in taken] == [1] * 50
    assert lags_ms(taken) == [0.0] * 50


def test_a_fire_alone_within_the_resolution_goes_at_its_instant() -> None:
    # 100 ms apart, under a resolution of 20 ms: no waiting
    taken = hand_overs(range(0, 1000, 100), resolution=0.02)
    assert [len(fires) for _, fires in taken] == [1] * 10
    assert lags_ms(taken) == [0.0] * 10


def test_a_hand_over_the_dispatcher_runs_itself_does_not_add_to_the_wait() -> None:
    # one fire a millisecond, each hand-over taking 0.5 ms a fire of the clock (20 fires: 10 ms): the gap
    # counts from when a hand-over began, so none waits more than the resolution (from its end: 30 ms)
    taken = hand_overs(range(0, 400), resolution=0.02, run_ms=0.5)
    assert max(lags_ms(taken)) <= 20
    assert max(len(fires) for _, fires in taken) == 20
    # a hand-over that lasts longer than the resolution (1.5 ms a fire): the next begins as it ends (within
    # the clock's millisecond), with what came due meanwhile
    slow = hand_overs(range(0, 400), resolution=0.02, run_ms=1.5)
    waits = [
        (later - (at + timedelta(milliseconds=1.5 * len(fires)))).total_seconds() * 1000
        for (at, fires), (later, _) in itertools.pairwise(slow)
        if 1.5 * len(fires) >= 20
    ]
    assert waits and all(-1 < wait < 1 for wait in waits), waits


def test_serve_hands_over_at_its_resolution(tmp_path: Path) -> None:
    service = LocalService(Settings.load({"TICKLOCK_DB": str(tmp_path / "serve.db")}, plugins=()))
    try:
        assert service.dispatcher.resolution == timedelta(milliseconds=20)
    finally:
        service.stop()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    offsets=st.lists(st.integers(0, 2500), min_size=1, max_size=150),
    resolution_ms=st.integers(0, 50),
)
def test_every_fire_once_never_early_never_later_than_the_resolution(offsets: list[int], resolution_ms: int) -> None:
    taken = hand_overs(offsets, resolution=resolution_ms / 1000)
    assert due_times(taken) == sorted(START + timedelta(milliseconds=ms) for ms in offsets)
    assert all(0 <= lag <= resolution_ms for lag in lags_ms(taken)), (lags_ms(taken), resolution_ms)
    # no hand-over is empty, and each holds only fires due by then
    for at, fires in taken:
        assert fires and all(fire.due <= at for fire in fires)
