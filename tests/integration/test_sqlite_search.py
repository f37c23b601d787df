"""The SQLite store's search of the jobs table (``find_jobs``' ``search``), against an oracle written apart:
a job is found when its name or handler contains the words, whatever their case, in the listing's order and
pages. Rare words go through the trigram index, common ones and short ones are tested row by row: both ways
give what the oracle gives, and the index follows inserts, renames, deletes (whoever makes them), a file
that lacks it, and VACUUM."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.factories import make_job
from ticklock.adapters.store.sqlite import SQLiteStore, listing
from ticklock.domain.jobs import Job
from ticklock.ports import JobQuery

WORDS = ["backup", "Report", "sync", "clean-up", "BILLING", "ex.port", 'quo"te', "x"]
NAME_PARTS = st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS), st.integers(0, 999))


def oracle(jobs: list[Job], search: str, sort: str) -> list[str]:
    wanted = search.lower()
    found = [j for j in jobs if wanted in j.name.lower() or wanted in j.handler.lower()]
    key = {"name": lambda j: j.name, "-name": lambda j: j.name, "id": lambda j: j.id}[sort]
    return [j.name for j in sorted(found, key=key, reverse=sort.startswith("-"))]


def paged(store: SQLiteStore, search: str, sort: str, limit: int = 7) -> list[str]:
    names: list[str] = []
    after: tuple[str, str] | None = None
    while True:
        query = JobQuery(search=search, sort=sort.lstrip("-"), descending=sort.startswith("-"), after=after)
        page = store.find_jobs(query, limit=limit)
        names += [j.name for j in page]
        if len(page) < limit:
            return names
        last = page[-1]
        after = (last.name if "name" in sort else last.id, last.id)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    made = SQLiteStore(tmp_path / "search.db")
    yield made
    made.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(NAME_PARTS, min_size=1, max_size=40, unique=True),
    search=st.sampled_from([*WORDS, "ort", "RT", "e-u", "nothing", "0", "backup-Report", '"', "x-1"]),
    sort=st.sampled_from(["name", "-name", "id"]),
    few=st.sampled_from([0, 3, 5000]),
)
def test_a_search_finds_what_the_oracle_finds_by_index_or_by_scan(
    tmp_path_factory: pytest.TempPathFactory, names: list[tuple[str, str, int]], search: str, sort: str, few: int
) -> None:
    path = tmp_path_factory.mktemp("search") / "s.db"
    made = SQLiteStore(path)
    try:
        jobs = [make_job(name=f"{a}-{b}-{n}".replace('"', "q"), handler=f"h.{b}") for a, b, n in names]
        made.add_jobs(jobs)
        stored = [made.get_job(j.id) for j in jobs]
        listing.SEARCH_FEW, before = few, listing.SEARCH_FEW  # 0: always by scan; 5000: by index when it can
        try:
            assert paged(made, search, sort) == oracle(stored, search, sort)
        finally:
            listing.SEARCH_FEW = before
    finally:
        made.close()


def test_the_index_follows_renames_deletes_and_other_writers(store: SQLiteStore, tmp_path: Path) -> None:
    first = store.add_job(make_job(name="nightly-backup", handler="noop"))
    store.add_job(make_job(name="hourly-report", handler="mail.send"))
    assert paged(store, "backup", "name") == ["nightly-backup"]
    store.update_job(first.with_changes(name="nightly-export"), expected_version=first.version)
    assert paged(store, "backup", "name") == []
    assert paged(store, "EXPORT", "name") == ["nightly-export"]
    assert paged(store, "mail.s", "name") == ["hourly-report"]  # by handler
    other = sqlite3.connect(tmp_path / "search.db")  # another process, in SQL
    other.execute("UPDATE jobs SET handler = 'backup.run' WHERE name = 'hourly-report'")
    other.commit()
    other.close()
    assert paged(store, "backup", "name") == ["hourly-report"]
    store.delete_job(first.id)
    assert paged(store, "export", "name") == []


def test_a_file_without_the_index_gains_it_filled_and_vacuum_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    jobs = [make_job(name=f"job-{i}-{'backup' if i % 50 == 0 else 'other'}") for i in range(400)]
    store.add_jobs(jobs)
    store.close()
    raw = sqlite3.connect(path)
    raw.executescript(
        "DROP TRIGGER jobs_search_added; DROP TRIGGER jobs_search_deleted; DROP TRIGGER jobs_search_renamed;"
        "DROP TABLE jobs_search;"
    )
    raw.execute("DELETE FROM jobs WHERE name = 'job-0-backup'")  # rowids no longer follow each other
    raw.commit()
    raw.close()
    store = SQLiteStore(path)
    try:
        assert store._searched("backup", {}).startswith("rowid IN")  # a rare word: looked up in the index
        assert paged(store, "backup", "name") == sorted(f"job-{i}-backup" for i in range(50, 400, 50))
    finally:
        store.close()
    raw = sqlite3.connect(path)
    raw.execute("VACUUM")
    raw.close()
    store = SQLiteStore(path)
    try:
        assert paged(store, "backup", "name") == sorted(f"job-{i}-backup" for i in range(50, 400, 50))
        check = sqlite3.connect(path)
        check.execute("INSERT INTO jobs_search (jobs_search, rank) VALUES ('integrity-check', 1)")  # raises if not
        check.close()
    finally:
        store.close()
