"""Adapters: one folder per port, implementations side by side."""
