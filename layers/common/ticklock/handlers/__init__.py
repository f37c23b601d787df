"""Handlers: the registry, the built-in handlers, and plug-in discovery."""
