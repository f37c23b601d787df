"""The handler contract's first import path, kept because plug-ins of the older ``ticklock.handlers``
entry-point group (still read) were written against it; new code imports ``ticklock.handlers.contract``."""

from ticklock.handlers.contract import *  # noqa: F403
