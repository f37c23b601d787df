"""The handler contract: a handler is a callable taking one ``HandlerContext``; it may be a plain function
or a coroutine function. Raising means failure (and a retry while retries and time remain); returning
means success. Handlers are registered by name in a ``Registry`` at boot; what a plug-in is and how
plug-ins are found is ``ticklock.handlers.plugin``.

It sits beside the domain, not in it: a context carries the ``threading.Event`` by which the engine tells
a running handler to stop, so it is the boundary between the engine and the code it runs.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ticklock.errors import ConfigError, DuplicateHandler

__all__ = ["FireLogger", "Handler", "HandlerContext", "HandlerFunc", "RegisterFunc", "Registry"]

HandlerFunc = Callable[["HandlerContext"], Any] | Callable[["HandlerContext"], Awaitable[Any]]
_MAKING = threading.Lock()  # a context's ``cancelled`` is made once, whichever thread asks first


class FireLogger(logging.LoggerAdapter[logging.Logger]):
    """A handler's logger: every line carries the fire's fields (job id, fire time, execution id) beside
    the ``extra`` fields the handler gives (``logging.LoggerAdapter`` alone would drop those)."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(kwargs.get("extra") or {}), **(self.extra or {})}
        return msg, kwargs


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
    _cancelled: threading.Event | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def cancelled(self) -> threading.Event:
        """Set when the deadline passes or the service shuts down. Made on first use (by the handler or by
        whoever tells it to stop), once: an ``Event`` is a lock and a condition, and most handlers never ask."""
        event = self._cancelled
        if event is None:
            with _MAKING:
                if self._cancelled is None:
                    self._cancelled = threading.Event()
                event = self._cancelled
        return event

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

    @functools.cached_property
    def is_async(self) -> bool:  # asked at every fire; ``func`` cannot change (frozen)
        return inspect.iscoroutinefunction(self.func)


class Registry:
    """Handlers by name. Registering a name twice raises ``DuplicateHandler``: boot fails fast.

    ``settings`` are the ones the process runs with (``ticklock.settings.Settings``: environment and
    flags together); a plug-in that needs configuration reads it from here in its ``register``, never
    from the environment again. ``None`` (tests, scripts) means: read the environment when first needed.
    The core only keeps them for the plug-ins: it reads none itself.
    """

    def __init__(self, settings: Any = None) -> None:
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
