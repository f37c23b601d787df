"""Adapters for one port."""
