"""Where ``ticklock serve`` keeps its engine's threads (``runtimes.local.place_engine``), with the OS's
affinity calls replaced: what is asked of the OS, what is held, and what happens when the OS refuses. The
real calls are ``tests/e2e/test_serve.py``'s."""

from __future__ import annotations

import logging
import os
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ticklock.domain.invoke import STAY
from ticklock.errors import ConfigError
from ticklock.runtimes import local
from ticklock.runtimes.local import CpuPlacement, place_engine


class FakeOS:
    """The process may use ``allowed``; ``sched_setaffinity`` is noted (or refused with ``refuse``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, allowed: set[int]) -> None:
        self.allowed = allowed
        self.set: list[tuple[int, frozenset[int]]] = []
        self.refuse: OSError | None = None
        monkeypatch.setattr(sys, "platform", "linux")
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(self.allowed))
        monkeypatch.setattr(os, "sched_setaffinity", self.sched_setaffinity)

    def sched_setaffinity(self, pid: int, cpus: Any) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.set.append((pid, frozenset(cpus)))


@pytest.fixture
def held() -> Iterator[list[int]]:
    """The lock files ``place_engine`` holds, let go after the test (as the process's end would)."""
    yield local._held_cpus
    while local._held_cpus:
        os.close(local._held_cpus.pop())


def unpinned(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [str(r.__dict__["reason"]) for r in caplog.records if r.getMessage() == "cpus.unpinned"]


def test_any_keeps_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, held: list[int]) -> None:
    fake = FakeOS(monkeypatch, {0, 1})
    assert place_engine("any", "me", str(tmp_path)) is STAY
    assert fake.set == [] and held == [] and list(tmp_path.iterdir()) == []


def test_auto_keeps_every_thread_to_a_cpu_no_other_serve_holds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, held: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeOS(monkeypatch, {0, 2, 5})
    cpus = sorted(fake.allowed)
    first = cpus[zlib.crc32(b"me") % 3]
    with caplog.at_level(logging.INFO, logger="ticklock.service"):
        placements = [place_engine("auto", "me", str(tmp_path)) for _ in range(4)]
    engines = [p.engine for p in placements[:3] if isinstance(p, CpuPlacement)]
    assert len(engines) == 3 and engines[0] == {first}  # the owner's pick, then the next free ones
    assert sorted(min(e) for e in engines) == cpus
    assert all(p.handlers == {0, 2, 5} for p in placements[:3] if isinstance(p, CpuPlacement))
    assert placements[3] is STAY and unpinned(caplog) == ["every CPU keeps another serve's engine"]
    threads = {int(t) for t in os.listdir("/proc/self/task")}
    assert {pid for pid, cpus in fake.set if cpus == {first}} >= threads  # every thread there is, by its id
    assert len(held) == 3
    os.close(held.pop(0))  # the first serve ends: its CPU is free again
    again = place_engine("auto", "me", str(tmp_path))
    assert isinstance(again, CpuPlacement) and again.engine == {first}


def test_auto_keeps_nothing_on_one_cpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, held: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeOS(monkeypatch, {3})
    with caplog.at_level(logging.INFO, logger="ticklock.service"):
        assert place_engine("auto", "me", str(tmp_path)) is STAY
    assert fake.set == [] and held == [] and unpinned(caplog) == ["one CPU"]


def test_auto_keeps_nothing_off_linux(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, held: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeOS(monkeypatch, {0, 1})
    monkeypatch.setattr(sys, "platform", "darwin")
    with caplog.at_level(logging.INFO, logger="ticklock.service"):
        assert place_engine("auto", "me", str(tmp_path)) is STAY
    assert fake.set == [] and held == [] and unpinned(caplog) == ["not Linux"]
    with pytest.raises(ConfigError, match=r"TICKLOCK_CPUS \(--cpus\): CPU 1 is not one .* Linux only"):
        place_engine((1,), "me", str(tmp_path))


def test_auto_keeps_nothing_when_the_os_refuses_and_lets_its_cpu_go(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, held: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeOS(monkeypatch, {0, 1})
    fake.refuse = PermissionError(1, "Operation not permitted")
    with caplog.at_level(logging.INFO, logger="ticklock.service"):
        assert place_engine("auto", "me", str(tmp_path)) is STAY
    assert unpinned(caplog) == ["[Errno 1] Operation not permitted"]
    assert held == []  # the CPU it took is free again
    fake.refuse = None
    assert isinstance(place_engine("auto", "other", str(tmp_path)), CpuPlacement)
    assert isinstance(place_engine("auto", "other", str(tmp_path)), CpuPlacement)  # both CPUs were free


def test_auto_keeps_nothing_without_a_proc_to_list_the_threads_by(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, held: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeOS(monkeypatch, {0, 1})

    def no_proc(path: str) -> list[str]:
        raise FileNotFoundError(2, "No such file or directory", path)

    monkeypatch.setattr(os, "listdir", no_proc)
    with caplog.at_level(logging.INFO, logger="ticklock.service"):
        assert place_engine("auto", "me", str(tmp_path)) is STAY
    assert fake.set == [] and held == []
    assert unpinned(caplog) == ["[Errno 2] No such file or directory: '/proc/self/task'"]
    with pytest.raises(ConfigError, match=r"No such file or directory: '/proc/self/task' \(TICKLOCK_CPUS=any"):
        place_engine((1,), "me", str(tmp_path))


def test_cpus_named_are_kept_or_the_start_stops(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, held: list[int]
) -> None:
    fake = FakeOS(monkeypatch, {0, 1, 2})
    placed = place_engine((1, 2), "me", str(tmp_path))
    assert isinstance(placed, CpuPlacement)
    assert (placed.engine, placed.handlers) == (frozenset({1, 2}), frozenset({0, 1, 2}))
    assert held == []  # CPUs named are not held: the user chose them
    assert place_engine((0, 1, 2), "me", str(tmp_path)) is STAY  # every CPU: nothing to keep
    with pytest.raises(ConfigError, match=r"CPU 3 is not one this process may run on \(it may run on 0,1,2\)"):
        place_engine((1, 3), "me", str(tmp_path))
    fake.refuse = PermissionError(1, "Operation not permitted")
    with pytest.raises(ConfigError, match=r"Operation not permitted \(TICKLOCK_CPUS=any keeps no CPUs\)"):
        place_engine((1,), "me", str(tmp_path))


def test_a_move_the_os_refuses_leaves_the_thread_where_it_is_told_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeOS(monkeypatch, {0, 1})
    placement = CpuPlacement(frozenset({1}), frozenset({0, 1}))
    placement.to_handlers()
    placement.to_engine()
    assert fake.set == [(0, frozenset({0, 1})), (0, frozenset({1}))]
    fake.refuse = OSError(22, "Invalid argument")
    with caplog.at_level(logging.WARNING, logger="ticklock.service"):
        for _ in range(3):
            placement.to_handlers()
            placement.to_engine()
    assert [r.getMessage() for r in caplog.records] == ["cpus.move_refused"]
