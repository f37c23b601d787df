"""Fixtures shared by every suite. The store fixture is parametrised over every adapter of the port."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.ports import Store

STORES = ["sqlite"]


def _open(kind: str, tmp_path: Path, name: str = "store") -> Store:
    if kind == "sqlite":
        return SQLiteStore(tmp_path / f"{name}.db")
    raise ValueError(kind)


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(store_kind: str, tmp_path: Path) -> Iterator[Store]:
    opened = _open(store_kind, tmp_path)
    yield opened
    opened.close()


@pytest.fixture
def open_store(store_kind: str, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Open more connections to the same store (as another process would)."""
    opened: list[Store] = []

    def again() -> Store:
        s = _open(store_kind, tmp_path)
        opened.append(s)
        return s

    yield again
    for s in opened:
        s.close()
