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
from ticklock.domain.executions import ExecutionStatus, RunSummary
from ticklock.domain.fires import Fire
from ticklock.domain.jobs import Hold, HoldKind
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


class _Commands(CommandListener):
    """The commands a client sends, as (command name, collection, command)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, object, dict[str, object]]] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.sent.append((event.command_name, event.command.get(event.command_name), dict(event.command)))

    def succeeded(self, event: CommandSucceededEvent) -> None:
        return None

    def failed(self, event: CommandFailedEvent) -> None:
        return None


@pytest.mark.parametrize("ferretdb", [True, False], ids=["grouped", "one-per-run"])
def test_the_runs_of_a_batch_that_end_alike_are_finished_by_one_update_statement_on_ferretdb(
    ferretdb_pg_uri: str, ferretdb: bool
) -> None:
    """FerretDB scans the whole ``executions`` collection for each update statement (it serves no filter from
    an index): there a batch's runs that started and ended together, with one outcome, go as one statement,
    each run that ended otherwise as one of its own. On MongoDB (``ferretdb`` False) each run keeps its own
    statement, so that the bulk write stays retryable. Either way each finish applies to its own run only,
    with its own values, and a run taken over meanwhile is left alone."""
    commands = _Commands()
    database = f"m{uuid.uuid4().hex[:10]}"
    client = shared_client(ferretdb_pg_uri, listeners=[commands])
    try:
        store = MongoStore(ferretdb_pg_uri, database=database, client=client)
        assert store.ferretdb  # what buildInfo says of the server the tests run on
        store.ferretdb = ferretdb
        for _ in range(8):
            store.add_job(make_job(next_run_at=T0))
        claimed = store.claim_due(now=T0, horizon=T0, limit=10, owner="a", slack=timedelta(seconds=30))
        fires = [Fire.of(j) for j in claimed]
        runs = [s.execution for s in store.start_executions([make_execution(f) for f in fires])]
        # the sixth run ended as the five before it did but for its duration, the seventh failed; the eighth
        # was taken over by another runner before this one finishes it (alike to the first five)
        taken = runs[7].with_changes(run_token="theirs", resumes=1)
        assert store.take_over_execution(taken, previous_token=runs[7].run_token)
        end = T0 + timedelta(seconds=1)
        done = [r.with_changes(status=ExecutionStatus.SUCCESS, attempts=1, finished_at=end, duration=1.0) for r in runs]
        done[5] = done[5].with_changes(duration=0.5)
        done[6] = done[6].with_changes(status=ExecutionStatus.FAILED, error="boom")
        later = T0 + timedelta(seconds=60)
        completions = [Completion(d, f, later) for d, f in zip(done, fires, strict=True)]
        commands.sent.clear()
        assert store.complete_many(completions, now=end) == [(True, True)] * 7 + [(False, False)]
        [finish] = [c for name, on, c in commands.sent if name == "update" and on == "executions"]
        statements = finish["updates"]
        assert isinstance(statements, list)
        if ferretdb:
            assert len(statements) == 3
            assert sorted(bool(s.get("multi")) for s in statements) == [False, False, True]  # six alike, two apart
        else:
            assert len(statements) == 8 and not any(s.get("multi") for s in statements)
        # one of them did not apply: the read of the finish marks told which
        assert [name for name, on, _ in commands.sent if on == "executions"] == ["update", "find"]
        assert [store.get_execution(r.id) for r in runs[:7]] == done[:7]  # each with its own values
        assert store.get_execution(runs[7].id) == taken  # still theirs, running
        # finished once: a second time applies to none of them, alike or not
        assert store.complete_many(completions, now=end) == [(False, False)] * 8
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
        make_job("b-paused", next_run_at=T0 + timedelta(minutes=1), enabled=False),  # paused: keeps its slot
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
        for state, outcome in (
            (None, None),
            ("paused", None),
            ("done", None),
            ("disabled", None),
            ("alerting", None),
            (None, "none"),
        )
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
                # by next fire, a job that is not enabled has none (``JobQuery``): its cursor holds None
                next_fire = last.next_run_at if last.enabled else None
                values: dict[str, object] = {"id": last.id, "name": last.name, "next_run_at": next_fire}
                value = values.get(query.sort, last.last_run.at if last.last_run else None)
                after = (value, last.id)
            pages.append(names)
        whole = [[job.name for job in mongo.find_jobs(query, limit=100)] for query in queries]
        return pages, whole, mongo.count_jobs(T0)

    slim = answers()
    assert slim[0] == slim[1]  # paging reads what one page would
    assert slim[2]["paused"] == 1 and slim[2]["done"] == 1 and slim[2]["disabled"] == 1 and slim[2]["alerting"] == 1
    raw = list(mongo.jobs.find({}))
    assert any(None not in doc.values() and len(doc) < len(JOB_FIELDS) for doc in raw)  # written without nulls
    for doc in raw[::2]:  # every other one as an older ticklock wrote it
        mongo.jobs.update_one(
            {"_id": doc["_id"]}, {"$set": {f: None for f in JOB_FIELDS if f != "id" and f not in doc}}
        )
    assert sum(None in doc.values() for doc in mongo.jobs.find({})) == len(raw[::2])
    assert answers() == slim


@pytest.mark.parametrize("uri", ["ferretdb_uri", "ferretdb_pg_uri"], ids=["sqlite", "postgresql"])
def test_a_store_creates_its_indexes_once_and_a_process_on_a_store_set_up_writes_none(
    uri: str, request: pytest.FixtureRequest
) -> None:
    """The first store on a new database creates its sixteen indexes; each one after (every Lambda cold
    start) lists them and creates none: FerretDB 1.24 on SQLite wedged for good when ``createIndexes`` met
    the updates of a burst (``MongoConnection._ensure_indexes``). An index missing is created again."""
    address: str = request.getfixturevalue(uri)
    commands = _Commands()
    database = f"m{uuid.uuid4().hex[:10]}"
    client = shared_client(address, listeners=[commands])
    try:
        MongoStore(address, database=database, client=client)
        assert len(_indexes_created(commands)) == 16 and len(set(_indexes_created(commands))) == 16
        db = client[database]
        assert {i["name"] for i in db["executions"].list_indexes()} >= {"fire_unique", "by_job", "by_time"}
        assert next(i for i in db["jobs"].list_indexes() if i["name"] == "name_unique").get("unique") is True
        commands.sent.clear()
        MongoStore(address, database=database, client=client)
        assert _indexes_created(commands) == []
        listed = sorted(str(c) for name, c, _ in commands.sent if name == "listIndexes")
        assert listed == ["claims", "executions", "jobs", "ledger"]
        db["ledger"].drop_index("last")
        commands.sent.clear()
        MongoStore(address, database=database, client=client)
        assert _indexes_created(commands) == [("ledger", "last")]
    finally:
        client.drop_database(database)
        client.close()


def _indexes_created(commands: _Commands) -> list[tuple[str, str]]:
    """(collection, index name) of each index the ``createIndexes`` commands sent asked for."""
    created: list[tuple[str, str]] = []
    for name, collection, command in commands.sent:
        if name == "createIndexes":
            indexes = command["indexes"]
            assert isinstance(indexes, list)
            created += [(str(collection), str(index["name"])) for index in indexes]
    return created


def test_jobs_held_before_hold_until_was_written_are_held_once_the_store_opens(ferretdb_pg_uri: str) -> None:
    """A job held by a release that wrote no ``hold_until`` gets it from its hold when a store of this
    release first opens the database (as its index is made), so the filters and counts say held."""
    database = f"h{uuid.uuid4().hex[:10]}"
    try:
        first = MongoStore(ferretdb_pg_uri, database=database)
        ends = T0 + timedelta(hours=2)
        hold = Hold(HoldKind.PAUSE, T0, skipped_from=T0, resumes_at=ends)
        job = first.add_job(make_job(next_run_at=ends).with_changes(hold=hold))
        other = first.add_job(make_job())
        first.jobs.update_one({"_id": job.id}, {"$unset": {"hold_until": ""}})  # as the older release wrote it
        first.jobs.drop_index("held")
        assert [j.id for j in first.find_jobs(JobQuery(state="held", at=T0), limit=10)] == []
        again = MongoStore(ferretdb_pg_uri, database=database)
        assert [j.id for j in again.find_jobs(JobQuery(state="held", at=T0), limit=10)] == [job.id]
        assert [j.id for j in again.find_jobs(JobQuery(state="enabled", at=T0), limit=10)] == [other.id]
        assert again.count_jobs(T0)["held"] == 1
    finally:
        shared_client(ferretdb_pg_uri).drop_database(database)
