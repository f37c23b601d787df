"""How handlers are found: every ``ticklock.handlers`` entry point, then ``TICKLOCK_HANDLER_MODULES``.

The contract itself (``Handler``, ``HandlerContext``, ``Registry``) lives in the core,
``ticklock.domain.handlers``; it is re-exported here, where plug-ins have always imported it from.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from ticklock.domain.handlers import Handler, HandlerContext, HandlerFunc, RegisterFunc, Registry
from ticklock.errors import ConfigError

__all__ = ["ENTRY_POINT_GROUP", "Handler", "HandlerContext", "HandlerFunc", "RegisterFunc", "Registry", "register_all"]

ENTRY_POINT_GROUP = "ticklock.handlers"


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
