"""One MongoDB client per URI and process for the product's stores (pymongo pools connections itself)."""

from __future__ import annotations

import threading
from typing import Any

from pymongo import MongoClient

_clients: dict[str, MongoClient[dict[str, Any]]] = {}
_mutex = threading.Lock()


def shared_client(uri: str) -> MongoClient[dict[str, Any]]:
    with _mutex:
        if uri not in _clients:
            _clients[uri] = MongoClient(
                uri,
                tz_aware=True,
                serverSelectionTimeoutMS=5000,
                connectTimeoutMS=5000,
                socketTimeoutMS=20000,
                appname="ticklock-parts",
            )
        return _clients[uri]
