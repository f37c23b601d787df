"""The handler registry: handlers are plug-ins registered by name at boot.

A handler is a callable taking one ``HandlerContext``; it may be a plain function or a coroutine
function. Raising means failure (and a retry while retries and time remain); returning means success.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from ticklock.errors import ConfigError, DuplicateHandler

if TYPE_CHECKING:
    from ticklock.settings import Settings

ENTRY_POINT_GROUP = "ticklock.handlers"

HandlerFunc = Callable[["HandlerContext"], Any] | Callable[["HandlerContext"], Awaitable[Any]]


@dataclass
class HandlerContext:
    """What a handler gets: the job, the fire, its deadline and a logger.

    ``cancelled`` is set when the deadline passes or the service shuts down; a sync handler that does
    long work should check it (or ``remaining()``) and stop. Async handlers are cancelled for real.
    """

    job_id: str
    job_name: str
    payload: Mapping[str, Any]
    scheduled_at: datetime
    execution_id: str
    attempt: int
    deadline: datetime
    logger: logging.LoggerAdapter[logging.Logger]
    now: Callable[[], datetime]
    cancelled: threading.Event = field(default_factory=threading.Event)

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, (self.deadline - self.now()).total_seconds())


@dataclass(frozen=True)
class Handler:
    """A registered handler."""

    name: str
    func: HandlerFunc
    description: str
    origin: str

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.func)


class Registry:
    """Handlers by name. Registering a name twice raises ``DuplicateHandler``: boot fails fast.

    ``settings`` are the ones the process runs with (environment and flags together); a plug-in that
    needs configuration reads it from here in its ``register``, never from the environment again.
    ``None`` (tests, scripts) means: read the environment when first needed.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self._handlers: dict[str, Handler] = {}
        self.settings = settings

    def register(self, name: str, func: HandlerFunc, *, description: str = "") -> None:
        origin = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"
        if not name or not isinstance(name, str):
            raise ConfigError(f"a handler name must be a non-empty string, got {name!r} from {origin}")
        if name in self._handlers:
            raise DuplicateHandler(name, self._handlers[name].origin, origin)
        doc = description or (inspect.getdoc(func) or "").split("\n", 1)[0]
        self._handlers[name] = Handler(name, func, doc, origin)

    def handler(self, name: str, *, description: str = "") -> Callable[[HandlerFunc], HandlerFunc]:
        """Decorator form of ``register``."""

        def decorate(func: HandlerFunc) -> HandlerFunc:
            self.register(name, func, description=description)
            return func

        return decorate

    def get(self, name: str) -> Handler | None:
        return self._handlers.get(name)

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def __iter__(self) -> Iterator[Handler]:
        return iter(sorted(self._handlers.values(), key=lambda h: h.name))

    def __len__(self) -> int:
        return len(self._handlers)


RegisterFunc = Callable[[Registry], None]


def register_all(registry: Registry, *, modules: tuple[str, ...] = ()) -> Registry:
    """Fill ``registry`` once at boot: every ``ticklock.handlers`` entry point, then ``modules``.

    Each entry point and each module names a ``register(registry)`` callable (a module's own
    ``register`` attribute). The built-in handlers arrive through ticklock's own entry point. Raises
    ``DuplicateHandler`` or ``ConfigError``; the caller stops the process.
    """
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            register = ep.load()
        except Exception as exc:
            raise ConfigError(f"handler plug-in {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
        register(registry)
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigError(f"TICKLOCK_HANDLER_MODULES: cannot import {module_name!r}: {exc}") from exc
        register = getattr(module, "register", None)
        if not callable(register):
            raise ConfigError(f"TICKLOCK_HANDLER_MODULES: {module_name!r} has no register(registry) function")
        register(registry)
    return registry
