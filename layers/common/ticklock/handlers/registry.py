"""The handler contract's first home, kept for the plug-ins that import ``Handler``, ``HandlerContext``
or ``Registry`` from here: they live in the core (``ticklock.domain.handlers``), and are re-exported by
``ticklock.plugin``, the plug-in contract. ``register_all`` (for tests and scripts) is now
``ticklock.runtimes.plugins.register_all``.
"""

from __future__ import annotations

from ticklock.domain.handlers import Handler, HandlerContext, HandlerFunc, RegisterFunc, Registry
from ticklock.plugin import LEGACY_GROUP

__all__ = ["ENTRY_POINT_GROUP", "Handler", "HandlerContext", "HandlerFunc", "RegisterFunc", "Registry"]

ENTRY_POINT_GROUP = LEGACY_GROUP  # register(registry) functions; new plug-ins use ticklock.plugin.GROUP
