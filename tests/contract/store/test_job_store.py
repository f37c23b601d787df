"""The ``JobStore`` role's contract (ticklock/ports.py): jobs added alone and in batches, read, listed,
changed under their version, deleted, and their open alerts set by compare-and-set. Run unchanged on every
adapter; the jobs table's pages and counts are in test_job_store_table.py and test_job_store_counts.py."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from tests.contract.store.helpers import claim
from tests.support.factories import T0, make_execution, make_job
from ticklock.domain.fires import Fire
from ticklock.domain.job_settings import AlertRules
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import CronSchedule
from ticklock.errors import DuplicateJobName, JobNotFound, StaleVersion
from ticklock.ports import Store


# -- definitions ------------------------------------------------------------------------------------
def test_add_then_get_round_trips_every_field(store: Store) -> None:
    job = make_job(
        schedule=CronSchedule("*/5 * * * * *", "Europe/London"), payload={"a": [1, "x"]}, timeout=2.5, max_retries=3
    )
    store.add_job(job)
    got = store.get_job(job.id)
    assert got == job
    assert got.next_run_at is not None and got.next_run_at.tzinfo is not None


def test_duplicate_name_is_rejected_and_nothing_is_written(store: Store) -> None:
    store.add_job(make_job("same"))
    with pytest.raises(DuplicateJobName):
        store.add_job(make_job("same"))
    assert len(store.list_jobs()) == 1


def test_concurrent_creates_of_one_name_leave_one_and_lose_none_of_the_others(store: Store) -> None:
    """Eight threads create 40 jobs each at once, every fourth one under a name all threads share (on
    SQLite the creates meet in group commits): each shared name is created once and refused to the
    other seven, and every job not refused is stored whole."""
    created: list[Job] = []
    refused: list[str] = []
    start = threading.Barrier(8)

    def add(side: int) -> None:
        start.wait()
        for i in range(40):
            job = make_job(f"shared-{i}" if i % 4 == 0 else f"own-{side}-{i}")
            try:
                created.append(store.add_job(job))
            except DuplicateJobName as exc:
                refused.append(exc.name)

    threads = [threading.Thread(target=add, args=(side,)) for side in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(refused) == sorted(f"shared-{i}" for i in range(0, 40, 4) for _ in range(7))
    assert len(created) == 8 * 30 + 10
    stored = {j.id: j for j in store.list_jobs(limit=1000)}
    assert stored == {j.id: j for j in created}


def test_add_jobs_inserts_every_job_of_the_batch(store: Store) -> None:
    jobs = [make_job(f"batch-{i:03}", schedule=CronSchedule(f"{i % 60} * * * * *")) for i in range(120)]
    store.add_jobs(jobs)
    for job in jobs:
        assert store.get_job(job.id) == job
    assert len(store.list_jobs(limit=500)) == 120


@pytest.mark.parametrize("taken_at", [0, 57, 119])
def test_add_jobs_with_a_taken_name_writes_nothing_and_names_it(store: Store, taken_at: int) -> None:
    existing = store.add_job(make_job(f"batch-{taken_at:03}"))
    jobs = [make_job(f"batch-{i:03}") for i in range(120)]
    with pytest.raises(DuplicateJobName) as raised:
        store.add_jobs(jobs)
    assert raised.value.name == f"batch-{taken_at:03}"
    assert [j.id for j in store.list_jobs(limit=500)] == [existing.id]


def test_add_jobs_with_a_name_twice_in_the_batch_writes_nothing(store: Store) -> None:
    jobs = [make_job("a"), make_job("b"), make_job("c"), make_job("b")]
    with pytest.raises(DuplicateJobName) as raised:
        store.add_jobs(jobs)
    assert raised.value.name == "b"
    assert store.list_jobs(limit=10) == []


def test_add_jobs_of_none_writes_nothing(store: Store) -> None:
    store.add_jobs([])
    assert store.list_jobs(limit=10) == []


def test_jobs_added_in_a_batch_are_claimed_when_due(store: Store) -> None:
    due = [make_job(f"due-{i}", next_run_at=T0) for i in range(5)]
    later = [make_job(f"later-{i}", next_run_at=T0 + timedelta(hours=1)) for i in range(5)]
    store.add_jobs([*due, *later])
    assert {j.id for j in claim(store)} == {j.id for j in due}


def test_concurrent_batches_racing_for_a_name_leave_one_whole_batch(open_store: Callable[[], Store]) -> None:
    """Two batches share their last name: one lands whole, the other not at all (on MongoDB, the loser
    may have inserted the rest before meeting the name, and must take it back)."""
    stores = [open_store(), open_store()]
    batches = [[make_job(f"{side}-{i:03}") for i in range(200)] + [make_job("shared")] for side in "ab"]
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def add(store: Store, batch: list[Job]) -> None:
        start.wait()
        try:
            store.add_jobs(batch)
            outcomes.append("added")
        except DuplicateJobName as exc:
            outcomes.append(exc.name)

    threads = [threading.Thread(target=add, args=(s, b)) for s, b in zip(stores, batches, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["added", "shared"]
    ids = {j.id for j in stores[0].list_jobs(limit=1000)}
    assert any(ids == {j.id for j in batch} for batch in batches), f"{len(ids)} jobs: not one whole batch"


def test_unknown_id_raises_not_found(store: Store) -> None:
    with pytest.raises(JobNotFound):
        store.get_job("missing")
    with pytest.raises(JobNotFound):
        store.delete_job("missing")
    assert store.find_job_by_name("missing") is None


def test_list_filters_and_pages_by_id(store: Store) -> None:
    jobs = [make_job(handler="noop" if i % 2 else "http.check", enabled=i % 3 != 0) for i in range(7)]
    for job in jobs:
        store.add_job(job)
    ids = sorted(j.id for j in jobs)
    first = store.list_jobs(limit=3)
    assert [j.id for j in first] == ids[:3]
    assert [j.id for j in store.list_jobs(limit=10, after=first[-1].id)] == ids[3:]
    assert {j.id for j in store.list_jobs(handler="noop")} == {j.id for j in jobs if j.handler == "noop"}
    assert {j.id for j in store.list_jobs(enabled=False)} == {j.id for j in jobs if not j.enabled}


def test_update_bumps_version_and_guards_against_stale_writes(store: Store) -> None:
    job = store.add_job(make_job("before"))
    updated = store.update_job(job.with_changes(name="after"), expected_version=job.version)
    assert updated.version == job.version + 1
    assert store.get_job(job.id).name == "after"
    with pytest.raises(StaleVersion):
        store.update_job(job.with_changes(name="stale"), expected_version=job.version)
    assert store.get_job(job.id).name == "after"


def test_disabled_reason_is_kept_and_cleared(store: Store) -> None:
    job = store.add_job(make_job("stopped"))
    assert store.get_job(job.id).disabled_reason is None
    reason = "its schedule found no next fire after 2026-10-25T00:55:00+00:00: no valid fire time"
    stopped = store.update_job(job.with_changes(enabled=False, disabled_reason=reason), expected_version=job.version)
    assert store.get_job(job.id).disabled_reason == reason
    assert [j.disabled_reason for j in store.list_jobs(enabled=False)] == [reason]
    store.update_job(stopped.with_changes(enabled=True, disabled_reason=None), expected_version=stopped.version)
    assert store.get_job(job.id).disabled_reason is None


def test_update_onto_a_taken_name_is_rejected(store: Store) -> None:
    store.add_job(make_job("taken"))
    job = store.add_job(make_job("mine"))
    with pytest.raises(DuplicateJobName):
        store.update_job(job.with_changes(name="taken"), expected_version=job.version)
    assert store.get_job(job.id).name == "mine"


def test_update_keeps_a_running_claim(store: Store) -> None:
    job = store.add_job(make_job())
    [claimed] = claim(store)
    store.update_job(claimed.with_changes(payload={"new": True}, lease=None), expected_version=claimed.version)
    assert store.get_job(job.id).lease == claimed.lease
    assert claim(store, now=T0 + timedelta(seconds=1)) == []


def test_delete_removes_job_and_history(store: Store) -> None:
    job = store.add_job(make_job())
    [claimed] = claim(store)
    execution = make_execution(Fire.of(claimed))
    store.start_execution(execution)
    store.delete_job(job.id)
    with pytest.raises(JobNotFound):
        store.get_job(job.id)
    with pytest.raises(JobNotFound):
        store.get_execution(execution.id)


# -- open alerts ------------------------------------------------------------------------------------
def test_open_alerts_change_by_compare_and_set_once_among_many(store: Store, open_store: Callable[[], Store]) -> None:
    job = store.add_job(make_job().with_changes(alerts=AlertRules(late_after=5)))
    raised = {"late": {"raised_at": T0.isoformat(), "detail": "late"}}
    others = [open_store() for _ in range(4)]
    start = threading.Barrier(len(others))
    won: list[bool] = []

    def race(other: Store) -> None:
        start.wait()
        won.append(other.set_open_alerts(job.id, expected={}, new=raised))

    threads = [threading.Thread(target=race, args=(o,)) for o in others]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(won) == [False, False, False, True]  # one of four writers wins the state
    got = store.get_job(job.id)
    assert got.open_alerts == raised and got.version == job.version  # the version is left alone
    assert not store.set_open_alerts(job.id, expected={}, new={})  # no longer what it was
    assert store.set_open_alerts(job.id, expected=raised, new={})
    assert store.set_open_alerts(job.id, expected={}, new=raised)  # raised again after a clear
    edited = store.update_job(got.with_changes(timeout=3.0, open_alerts={}), expected_version=got.version)
    assert edited.open_alerts == raised and store.get_job(job.id).open_alerts == raised  # an edit keeps them
    assert not store.set_open_alerts("no-such-job", expected={}, new=raised)


def test_list_jobs_alerting_gives_the_jobs_with_rules_or_alerts_raised(store: Store) -> None:
    plain = store.add_job(make_job())
    ruled = store.add_job(make_job().with_changes(alerts=AlertRules(no_success_for=60, email="a@b.example")))
    raised = store.add_job(make_job())
    assert store.set_open_alerts(raised.id, expected={}, new={"late": {"raised_at": "x", "detail": "y"}})
    found = {j.id for j in store.list_jobs(alerting=True, limit=10)}
    assert found == {ruled.id, raised.id} and plain.id not in found
    assert store.get_job(ruled.id).alerts == AlertRules(no_success_for=60, email="a@b.example")
