"""Handlers and plug-ins, in one place: what a handler is and gets (``contract``), how ticklock is extended
(``plugin``: the plug-in contract and discovery) and ticklock's own handlers (``builtin``)."""
