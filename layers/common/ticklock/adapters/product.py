"""The product handlers' data (alerts, parts, notifications, price history, the walk's state), opened by
URL: ``sqlite:///PATH`` or ``mongodb://``. One store serves both handlers: the catalogue store is the
alert store with the walk's collections added."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ticklock.adapters.catalogue.mongo import MongoCatalogueStore
    from ticklock.adapters.catalogue.sqlite import SQLiteCatalogueStore


def open_product_store(url: str) -> SQLiteCatalogueStore | MongoCatalogueStore:
    if url.startswith("sqlite:///"):
        from ticklock.adapters.catalogue.sqlite import SQLiteCatalogueStore

        return SQLiteCatalogueStore(url.removeprefix("sqlite:///"))
    from ticklock.adapters.catalogue.mongo import MongoCatalogueStore

    return MongoCatalogueStore(url)
