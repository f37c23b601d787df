"""MongoDB-only behaviour of the store, on FerretDB (PostgreSQL backend)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from pymongo.errors import AutoReconnect

from tests.support.factories import T0, make_job
from ticklock.adapters.store.mongo import MongoStore, shared_client
from ticklock.errors import StoreUnavailable


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
