"""The store's role ports (ticklock/ports.py): ``Store`` is its roles and nothing more, each of its methods in
exactly one role; each adapter implements every role in the module that declares it (a role a module), and
a store opened on every backend is an instance of every role."""

from __future__ import annotations

from typing import Any

import pytest

from ticklock.adapters.store.mongo import MongoStore
from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.ports import ExecutionStore, FireStore, JobStore, LedgerStore, Store, StoreConnection

ROLES: dict[Any, str] = {  # each role, and the module of each adapter that implements it
    StoreConnection: "connection",
    JobStore: "jobs",
    FireStore: "fires",
    ExecutionStore: "executions",
    LedgerStore: "ledger",
}
ADAPTERS = [SQLiteStore, MongoStore]


def declared(cls: type) -> set[str]:
    """The public methods ``cls`` declares itself (not those it inherits)."""
    return {name for name, value in vars(cls).items() if callable(value) and not name.startswith("_")}


def public(cls: type) -> set[str]:
    """The public methods ``cls`` has, its own and inherited."""
    return {name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


def test_every_store_method_is_in_exactly_one_role() -> None:
    assert {base for base in Store.__bases__ if base in ROLES} == set(ROLES)
    assert declared(Store) == set()  # Store adds nothing of its own
    seen: dict[str, str] = {}
    for role in ROLES:
        assert declared(role), f"{role.__name__} declares no method"
        for name in declared(role):
            assert name not in seen, f"{name} is in {seen[name]} and {role.__name__}"
            seen[name] = role.__name__
    assert set(seen) == public(Store)


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.__name__)
def test_an_adapters_public_methods_are_the_stores(adapter: type) -> None:
    assert public(adapter) == public(Store)


@pytest.mark.parametrize("role", list(ROLES), ids=lambda r: r.__name__)
@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.__name__)
def test_each_adapter_implements_each_role_in_the_module_that_declares_it(adapter: type, role: Any) -> None:
    """One class of the adapter names the role among its bases, in the role's module; each method of the
    role is written once in the adapter, by that class or a helper it builds on (listing.py's, for SQLite's
    jobs), never left to the protocol's empty one nor written again in another module."""
    assert issubclass(adapter, role)
    [declaring] = [cls for cls in adapter.__mro__ if role in cls.__bases__]
    assert declaring.__module__ == f"{adapter.__module__}.{ROLES[role]}"
    for name in declared(role):
        owners = [cls for cls in adapter.__mro__ if name in vars(cls) and cls not in ROLES]
        assert [cls in declaring.__mro__ for cls in owners] == [True], f"{name}: {owners}, not {declaring}"


def test_a_store_on_every_backend_is_an_instance_of_every_role(store: Store) -> None:
    for role in (*ROLES, Store):
        assert isinstance(store, role), role.__name__
