"""The plug-in's own fixtures: its stores on every adapter, over the repository's test servers (the
root ``conftest.py`` loads those)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ticklock_parts.adapters.alerts.mongo import MongoAlertStore
from ticklock_parts.adapters.alerts.sqlite import SQLiteAlertStore
from ticklock_parts.adapters.catalogue.mongo import MongoCatalogueStore
from ticklock_parts.adapters.catalogue.sqlite import SQLiteCatalogueStore
from ticklock_parts.adapters.client import shared_client

AlertStoreForTests = SQLiteAlertStore | MongoAlertStore


def _product_store(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest, sqlite_type: Any, mongo_type: Any
) -> Iterator[Any]:
    """A fresh product-data store of the given adapter types, on SQLite or in a database of its own."""
    if store_kind == "sqlite":
        sqlite = sqlite_type(tmp_path / "product.db")
        yield sqlite
        sqlite.close()
        return
    uri = str(request.getfixturevalue("mongodb_uri"))
    database = f"p{uuid.uuid4().hex[:12]}"
    yield mongo_type(uri, database=database)
    shared_client(uri).drop_database(database)


@pytest.fixture
def alert_store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[AlertStoreForTests]:
    """A fresh alert store (the scanner's data) on every adapter of the AlertStore port."""
    yield from _product_store(store_kind, tmp_path, request, SQLiteAlertStore, MongoAlertStore)


@pytest.fixture
def catalogue_store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh catalogue store (the walk's data) on every adapter of the CatalogueStore port."""
    yield from _product_store(store_kind, tmp_path, request, SQLiteCatalogueStore, MongoCatalogueStore)
