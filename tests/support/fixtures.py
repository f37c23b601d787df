"""Fixtures shared by every suite, the engine's and the plug-ins' (a pytest plug-in the repository's
``conftest.py`` loads): the real servers, and the store fixture parametrised over every adapter of the
Store port (SQLite; MongoDB on FerretDB 1.24 and 2.5; a real MongoDB too when MONGODB_URI is set)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import servers
from ticklock.adapters.store.mongo import MongoStore, shared_client
from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.ports import Store

# FerretDB runs on both its backends: SQLite (as issue 3 asks) and PostgreSQL, which the replica tests
# and the benchmark need (measured here: the SQLite backend manages ~220 updates/s and slows under
# concurrency; see README "Testing against FerretDB"). FerretDB 2.5 runs on PostgreSQL with DocumentDB, which
# stores BSON and serves filters from indexes as MongoDB does (the benchmark's row (n)).
STORES = ["sqlite", "ferretdb-sqlite", "ferretdb-postgresql", "ferretdb2-documentdb"] + (
    ["mongodb"] if os.environ.get("MONGODB_URI") else []
)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Server]:
    yield from a_redis(tmp_path_factory, "redis")


def a_redis(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[servers.Server]:
    """A Redis started in a folder ``name`` and stopped after, its URL as ``.url``."""
    server, url = servers.start_redis(tmp_path_factory.mktemp(name))
    server.url = url  # type: ignore[attr-defined]
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: servers.Server) -> str:
    return str(redis_server.url)  # type: ignore[attr-defined]


def ferretdb_on_sqlite(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[tuple[str, Path]]:
    """A FerretDB on its SQLite backend, started in a folder ``name`` and stopped after: its URI, and the
    folder of its SQLite files (one per database)."""
    workdir = tmp_path_factory.mktemp(name)
    server, uri = servers.start_ferretdb(workdir)
    yield uri, workdir / "ferretdb-data"
    server.stop()


@pytest.fixture(scope="session")
def ferretdb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """FerretDB on its SQLite backend: its URI, and the folder of its SQLite files (one per database)."""
    yield from ferretdb_on_sqlite(tmp_path_factory, "ferretdb")


@pytest.fixture(scope="session")
def ferretdb_uri(ferretdb: tuple[str, Path]) -> str:
    return ferretdb[0]


def ferretdb_on_postgresql(
    tmp_path_factory: pytest.TempPathFactory, name: str, *, documentdb: bool = False
) -> Iterator[tuple[str, str]]:
    """A FerretDB on PostgreSQL (a cluster of its own), started in folders named after ``name`` and
    stopped after: its URI, and the PostgreSQL URL behind it. FerretDB 1.24 keeps a database as a schema
    and a collection as a table of JSONB documents; with ``documentdb``, FerretDB 2.5 on PostgreSQL with
    the DocumentDB extension (BSON documents, served from indexes)."""
    postgres, postgres_url = servers.start_postgresql(
        tmp_path_factory.mktemp(f"{name}-postgresql"), documentdb=documentdb
    )
    start = servers.start_ferretdb2 if documentdb else servers.start_ferretdb
    try:
        server, uri = start(tmp_path_factory.mktemp(name), postgresql_url=postgres_url)
        try:
            yield uri, postgres_url
        finally:
            server.stop()
    finally:
        postgres.stop()


@pytest.fixture(scope="session")
def ferretdb_pg_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """FerretDB on PostgreSQL: the faster, concurrent backend, for the replica tests."""
    for uri, _ in ferretdb_on_postgresql(tmp_path_factory, "ferretdb-pg"):
        yield uri


@pytest.fixture(scope="session")
def ferretdb2_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """FerretDB 2.5 on PostgreSQL with DocumentDB."""
    for uri, _ in ferretdb_on_postgresql(tmp_path_factory, "ferretdb2", documentdb=True):
        yield uri


@pytest.fixture(scope="session")
def pushgateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server, url = servers.start_pushgateway(tmp_path_factory.mktemp("pushgateway"))
    yield url
    server.stop()


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def mongodb_uri(store_kind: str, request: pytest.FixtureRequest) -> str:
    if store_kind == "mongodb":
        return os.environ["MONGODB_URI"]
    if store_kind == "ferretdb-postgresql":
        return str(request.getfixturevalue("ferretdb_pg_uri"))
    if store_kind == "ferretdb2-documentdb":
        return str(request.getfixturevalue("ferretdb2_uri"))
    return str(request.getfixturevalue("ferretdb_uri"))


@pytest.fixture
def open_store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[], Store]]:
    """Open connections to one fresh store; each call is another client (as another process would be)."""
    opened: list[Store] = []
    database = f"t{uuid.uuid4().hex[:12]}"
    uri = request.getfixturevalue("mongodb_uri") if store_kind != "sqlite" else ""

    def again() -> Store:
        store: Store
        if store_kind == "sqlite":
            store = SQLiteStore(tmp_path / "store.db")
        else:
            fresh = bool(opened)
            store = MongoStore(uri, database=database, client=shared_client(uri, fresh=fresh), owns_client=fresh)
        opened.append(store)
        return store

    yield again
    for s in opened:
        s.close()
    if uri:
        shared_client(uri).drop_database(database)


@pytest.fixture
def store(open_store: Callable[[], Store]) -> Store:
    return open_store()


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto in server mode (EventBridge, SQS), on a loopback port, with fake credentials for boto3."""
    from moto.server import ThreadedMotoServer

    port = servers.free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    yield f"http://127.0.0.1:{port}"
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
