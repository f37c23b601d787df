"""One MongoDB client per URI and process, and a listener that counts the commands sent."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from pymongo import MongoClient
from pymongo.monitoring import CommandFailedEvent, CommandListener, CommandStartedEvent, CommandSucceededEvent

T = TypeVar("T")
Doc = dict[str, Any]
DUPLICATE_KEY = 11000  # MongoDB's error code for a write that meets a unique key already there
_clients: dict[str, MongoClient[Doc]] = {}
_clients_mutex = threading.Lock()


class CommandCounter(CommandListener):
    """Counts the commands this process sends (``ticklock_store_commands_total``): counts do not drift
    with a noisy machine, so they are what the benchmark reports against its per-fire budget."""

    def __init__(self, count: Callable[[str], None]) -> None:
        self._count = count

    def started(self, event: CommandStartedEvent) -> None:
        self._count(event.command_name)

    def succeeded(self, event: CommandSucceededEvent) -> None:
        return None

    def failed(self, event: CommandFailedEvent) -> None:
        return None


def shared_client(uri: str, *, listeners: list[CommandListener] | None = None, fresh: bool = False) -> MongoClient[Doc]:
    """One client per URI per process (and per warm Lambda container): pymongo pools connections itself.

    ``fresh`` (or ``listeners``) gives a client of its own, as another process would have.
    """
    with _clients_mutex:
        client = None if fresh or listeners else _clients.get(uri)
        if client is None:
            client = MongoClient(
                uri,
                tz_aware=True,
                serverSelectionTimeoutMS=5000,
                connectTimeoutMS=5000,
                socketTimeoutMS=20000,
                retryWrites=True,
                event_listeners=listeners or [],
                appname="ticklock",
            )
            if not (fresh or listeners):
                _clients[uri] = client
        return client
