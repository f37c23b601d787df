"""MongoDB-only behaviour of the store, on FerretDB (PostgreSQL backend)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from pymongo.errors import AutoReconnect
from pymongo.monitoring import CommandFailedEvent, CommandListener, CommandStartedEvent, CommandSucceededEvent

from tests.support.factories import T0, make_execution, make_job
from ticklock.adapters.records import JOB_FIELDS
from ticklock.adapters.store.mongo import MongoStore, shared_client
from ticklock.domain.jobs import ExecutionStatus, Fire, RunSummary
from ticklock.errors import StoreUnavailable
from ticklock.ports import JOB_SORTS, Completion, JobQuery


@pytest.fixture
def mongo(ferretdb_pg_uri: str) -> Iterator[MongoStore]:
    database = f"m{uuid.uuid4().hex[:10]}"
    yield MongoStore(ferretdb_pg_uri, database=database)
    shared_client(ferretdb_pg_uri).drop_database(database)


def test_a_failed_lease_write_takes_its_claim_marks_back(mongo: MongoStore, monkeypatch: pytest.MonkeyPatch) -> None:
    job = mongo.add_job(make_job())

    def broken(*args: object, **kwargs: object) -> None:
        raise AutoReconnect("connection reset")

    with monkeypatch.context() as patch:
        patch.setattr(mongo, "_lease", broken)
        with pytest.raises(StoreUnavailable):
            mongo.claim_due(now=T0, horizon=T0, limit=10, owner="a", slack=timedelta(seconds=30))
    assert mongo.claims.count_documents({}) == 0
    # the job state was not left blocked: the next claim takes it
    [claimed] = mongo.claim_due(now=T0, horizon=T0, limit=10, owner="b", slack=timedelta(seconds=30))
    assert claimed.id == job.id


class _Updates(CommandListener):
    """The ``update`` commands a client sends."""

    def __init__(self) -> None:
        self.commands: list[dict[str, object]] = []

    def started(self, event: CommandStartedEvent) -> None:
        if event.command_name == "update":
            self.commands.append(dict(event.command))

    def succeeded(self, event: CommandSucceededEvent) -> None:
        return None

    def failed(self, event: CommandFailedEvent) -> None:
        return None


def test_the_runs_of_a_batch_that_end_alike_are_finished_by_one_update_statement(ferretdb_pg_uri: str) -> None:
    """FerretDB scans the whole ``executions`` collection for each update statement (it serves no filter from
    an index): a batch's runs that started and ended together, with one outcome, go as one statement,
    a run that ended otherwise as one of its own; each finish still applies to its own run only."""
    updates = _Updates()
    database = f"m{uuid.uuid4().hex[:10]}"
    client = shared_client(ferretdb_pg_uri, listeners=[updates])
    store = MongoStore(ferretdb_pg_uri, database=database, client=client)
    try:
        for _ in range(6):
            store.add_job(make_job(next_run_at=T0))
        fires = [
            Fire.of(j) for j in store.claim_due(now=T0, horizon=T0, limit=10, owner="a", slack=timedelta(seconds=30))
        ]
        started = store.start_executions([make_execution(f) for f in fires])
        runs = [s.execution for s in started]
        outcomes = [ExecutionStatus.SUCCESS] * 5 + [ExecutionStatus.FAILED]
        done = [
            r.with_changes(status=o, attempts=1, finished_at=T0 + timedelta(seconds=1), duration=1.0)
            for r, o in zip(runs, outcomes, strict=True)
        ]
        updates.commands.clear()
        later = T0 + timedelta(seconds=60)
        completions = [Completion(d, f, later) for d, f in zip(done, fires, strict=True)]
        assert store.complete_many(completions, now=T0 + timedelta(seconds=1)) == [(True, True)] * 6
        [finish] = [c for c in updates.commands if c["update"] == "executions"]
        statements = finish["updates"]
        assert isinstance(statements, list) and len(statements) == 2
        assert sorted(bool(s.get("multi")) for s in statements) == [False, True]  # the five alike, the one apart
        assert [store.get_execution(r.id).status for r in runs] == outcomes
        # finished once: a second time applies to none of them, alike or not
        assert store.complete_many(completions, now=T0 + timedelta(seconds=1)) == [(False, False)] * 6
    finally:
        shared_client(ferretdb_pg_uri).drop_database(database)
        client.close()


def test_documents_with_their_nulls_written_out_and_without_them_list_count_and_page_alike(mongo: MongoStore) -> None:
    """Documents written before null fields were left out hold them as nulls; new ones lack them. A store
    holding both kinds must filter, count, sort and page them as one: FerretDB evaluates these filters and
    sorts itself (none is pushed down to PostgreSQL), so MongoDB's rule that null and missing are one is
    checked here on it, not assumed."""
    ran = RunSummary(ExecutionStatus.FAILED, T0 - timedelta(minutes=1), runs=2, ok=1)
    jobs = [
        make_job("a-due", next_run_at=T0 + timedelta(seconds=5)),
        make_job("b-paused", next_run_at=None, enabled=False),
        make_job("c-disabled", next_run_at=None, enabled=False).with_changes(disabled_reason="no next fire"),
        make_job("d-ran", next_run_at=T0 + timedelta(seconds=1)).with_changes(last_run=ran),
        make_job("e-alerting", next_run_at=T0).with_changes(open_alerts={"late": {"since": T0.isoformat()}}),
        make_job("f-never", next_run_at=None, enabled=False),
    ]
    for job in jobs:
        mongo.add_job(job)
    queries = [
        JobQuery(sort=sort, descending=descending, state=state, outcome=outcome)
        for sort in JOB_SORTS
        for descending in (False, True)
        for state, outcome in ((None, None), ("paused", None), ("disabled", None), ("alerting", None), (None, "none"))
    ]

    def answers() -> tuple[list[list[str]], list[list[str]], dict[str, int]]:
        pages = []
        for query in queries:  # paged two at a time: the keyset cursor crosses the null values
            names: list[str] = []
            after = None
            while True:
                page = mongo.find_jobs(replace(query, after=after), limit=2)
                names += [job.name for job in page]
                if len(page) < 2:
                    break
                last = page[-1]
                values: dict[str, object] = {"id": last.id, "name": last.name, "next_run_at": last.next_run_at}
                value = values.get(query.sort, last.last_run.at if last.last_run else None)
                after = (value, last.id)
            pages.append(names)
        whole = [[job.name for job in mongo.find_jobs(query, limit=100)] for query in queries]
        return pages, whole, mongo.count_jobs()

    slim = answers()
    assert slim[0] == slim[1]  # paging reads what one page would
    assert slim[2]["paused"] == 2 and slim[2]["disabled"] == 1 and slim[2]["alerting"] == 1
    raw = list(mongo.jobs.find({}))
    assert any(None not in doc.values() and len(doc) < len(JOB_FIELDS) for doc in raw)  # written without nulls
    for doc in raw[::2]:  # every other one as an older ticklock wrote it
        mongo.jobs.update_one(
            {"_id": doc["_id"]}, {"$set": {f: None for f in JOB_FIELDS if f != "id" and f not in doc}}
        )
    assert sum(None in doc.values() for doc in mongo.jobs.find({})) == len(raw[::2])
    assert answers() == slim
