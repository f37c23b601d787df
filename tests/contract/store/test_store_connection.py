"""The ``StoreConnection`` role's contract (ticklock/ports.py), run unchanged on every adapter."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ticklock.errors import StoreUnavailable
from ticklock.ports import Store


def test_ping_answers(store: Store) -> None:
    store.ping()


def test_a_closed_store_answers_no_ping_and_another_on_its_backend_goes_on(open_store: Callable[[], Store]) -> None:
    """``close`` lets go of what the store opened (on MongoDB, a client of its own: the fixture's second
    store has one), so its ``ping`` fails as the backend failing would; a store beside it is untouched."""
    store, other = open_store(), open_store()
    other.ping()
    other.close()
    with pytest.raises(StoreUnavailable):
        other.ping()
    store.ping()
