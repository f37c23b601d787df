"""The ``StoreConnection`` role's contract (ticklock/ports.py), run unchanged on every adapter."""

from __future__ import annotations

from ticklock.ports import Store


def test_ping_answers(store: Store) -> None:
    store.ping()
