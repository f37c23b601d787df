"""The ``LedgerStore`` role's contract (ticklock/ports.py), on every adapter: an entry is written once
whoever records it, listed by the window its slots meet, filtered, pruned with the executions, and gone
with its job."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

from tests.support.factories import T0, make_job
from ticklock.domain.fires import Trigger
from ticklock.domain.ledger import LedgerEntry, Outcome, Reason
from ticklock.ports import Store


def entry(job_id: str, reason: Reason, first: int, last: int | None = None, count: int = 1) -> LedgerEntry:
    at = T0 + timedelta(seconds=first)
    until = T0 + timedelta(seconds=first if last is None else last)
    return LedgerEntry(job_id, reason, at, until, count, T0 + timedelta(seconds=first + 1))


def test_an_entry_round_trips_and_is_written_once(store: Store) -> None:
    job = store.add_job(make_job())
    one = LedgerEntry(job.id, Reason.COLLAPSED, T0, T0 + timedelta(seconds=59), 60, T0, Trigger.SCHEDULE, True)
    assert store.record_fire(one) is True
    again = LedgerEntry(job.id, Reason.COLLAPSED, T0, T0 + timedelta(seconds=9), 10, T0 + timedelta(seconds=5))
    assert store.record_fire(again) is False  # same job, outcome and first slot: the first one stays
    [stored] = store.list_fires(job.id, start=T0, end=T0 + timedelta(hours=1))
    assert stored == one and stored.outcome is Outcome.MISSED and stored.capped


def test_three_replicas_recording_one_fire_leave_one_entry(open_store: Callable[[], Store]) -> None:
    stores = [open_store() for _ in range(3)]
    job = stores[0].add_job(make_job())
    go = threading.Barrier(3)
    won: list[bool] = []

    def record(store: Store) -> None:
        go.wait()
        won.append(store.record_fire(entry(job.id, Reason.OVERLAP_SKIP, 10)))

    threads = [threading.Thread(target=record, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False, False, True]
    assert len(stores[0].list_fires(job.id, start=T0, end=T0 + timedelta(minutes=1))) == 1


def test_listing_finds_the_entries_whose_slots_meet_the_window_newest_first(store: Store) -> None:
    a, b = store.add_job(make_job(name="a")), store.add_job(make_job(name="b"))
    store.record_fire(entry(a.id, Reason.OVERLAP_SKIP, 10))
    store.record_fire(entry(a.id, Reason.COLLAPSED, 20, 50, count=31))  # a range
    store.record_fire(entry(a.id, Reason.UNKNOWN_HANDLER, 100))
    store.record_fire(entry(b.id, Reason.PAUSED, 30, 40, count=11))

    def fires(
        job_id: str | None, start: int, end: int, outcome: str | None = None, reason: str | None = None
    ) -> list[tuple[str, int]]:
        begin, until = T0 + timedelta(seconds=start), T0 + timedelta(seconds=end)
        found = store.list_fires(job_id, start=begin, end=until, outcome=outcome, reason=reason)
        return [(e.reason.value, int((e.first_at - T0).total_seconds())) for e in found]

    assert fires(a.id, 0, 1000) == [("unknown_handler", 100), ("collapsed", 20), ("overlap_skip", 10)]
    assert fires(a.id, 45, 60) == [("collapsed", 20)]  # the range reaches into the window
    assert fires(a.id, 51, 99) == []
    assert fires(None, 35, 35) == [("paused", 30), ("collapsed", 20)]
    assert fires(None, 0, 1000, outcome="skipped") == [("unknown_handler", 100), ("overlap_skip", 10)]
    assert fires(None, 0, 1000, reason="paused") == [("paused", 30)]
    assert fires(None, 0, 1000, outcome="missed", reason="collapsed") == [("collapsed", 20)]
    assert len(store.list_fires(None, start=T0, end=T0 + timedelta(hours=1), limit=2)) == 2


def test_old_entries_are_pruned_with_the_executions_and_a_deleted_job_takes_its_own(store: Store) -> None:
    job = store.add_job(make_job())
    store.record_fire(entry(job.id, Reason.OVERLAP_SKIP, 10))
    store.record_fire(entry(job.id, Reason.COLLAPSED, 20, 3600, count=3581))
    gone = store.prune_executions(older_than=T0 + timedelta(seconds=60), keep_per_job=1000)
    assert gone == 1  # the range's last slot is newer: it stays
    assert [e.reason for e in store.list_fires(job.id, start=T0, end=T0 + timedelta(days=1))] == [Reason.COLLAPSED]
    store.delete_job(job.id)
    assert store.list_fires(None, start=T0, end=T0 + timedelta(days=1)) == []
