"""ticklock-parts: the part-alert product as a ticklock plug-in (``ticklock_parts.plugin:plugin``).

``alerts.scan`` evaluates users' alert rules on watched parts and notifies (and emails) on each change;
``catalogue.spot_prices`` walks the parts catalogue pricing it at a vendor under a daily quota. Both are
seeded as system jobs; their data lives in their own store (``TICKLOCK_PARTS_STORE``, default: the job
store). The plug-in reaches ticklock only through its contract (``ticklock.handlers.plugin`` and
``ticklock.handlers.contract``), ``ticklock.domain``, ``ticklock.ports`` and ``ticklock.errors``.
"""
