"""The handler contract's first home, kept for the plug-ins that import it from here: ``Handler``,
``HandlerContext``, ``Registry`` live in the core (``ticklock.domain.handlers``); the plug-in contract, and
how plug-ins are found, is ``ticklock.plugin``.
"""

from __future__ import annotations

from ticklock.domain.handlers import Handler, HandlerContext, HandlerFunc, RegisterFunc, Registry
from ticklock.plugin import LEGACY_GROUP

__all__ = ["ENTRY_POINT_GROUP", "Handler", "HandlerContext", "HandlerFunc", "RegisterFunc", "Registry"]

ENTRY_POINT_GROUP = LEGACY_GROUP  # register(registry) functions; new plug-ins use ticklock.plugin.GROUP
