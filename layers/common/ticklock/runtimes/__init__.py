"""Runtimes: composition roots that wire adapters into the core. They contain no logic of their own."""
