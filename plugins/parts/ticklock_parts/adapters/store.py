"""The product's data (alerts, parts, notifications, price history, the walk's state), opened by URL:
``sqlite:///PATH`` or ``mongodb://``. One store serves both handlers: the catalogue store is the alert
store with the walk's collections added. ``shared_store`` opens one per URL and process (per warm Lambda
environment) and reuses it."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pymongo is imported only for a MongoDB URL
    from ticklock_parts.adapters.catalogue.mongo import MongoCatalogueStore
    from ticklock_parts.adapters.catalogue.sqlite import SQLiteCatalogueStore

    ProductStore = SQLiteCatalogueStore | MongoCatalogueStore

_stores: dict[str, ProductStore] = {}
_opening: dict[str, threading.Lock] = {}  # one per URL: opening a MongoDB store (indexes) holds no other
_mutex = threading.Lock()


def open_product_store(url: str) -> ProductStore:
    if url.startswith("sqlite:///"):
        from ticklock_parts.adapters.catalogue.sqlite import SQLiteCatalogueStore

        return SQLiteCatalogueStore(url.removeprefix("sqlite:///"))
    from ticklock_parts.adapters.catalogue.mongo import MongoCatalogueStore

    return MongoCatalogueStore(url)


def shared_store(url: str) -> ProductStore:
    """The store at ``url``, opened on first use and then reused (a failed open is tried again next time)."""
    with _mutex:
        lock = _opening.setdefault(url, threading.Lock())
    with lock:
        if url not in _stores:
            _stores[url] = open_product_store(url)
        return _stores[url]
