"""The plug-in contract's former import path, kept because installed plug-ins import it (it was the documented
one); the contract is ``ticklock.handlers.plugin``."""

from ticklock.handlers.plugin import *  # noqa: F403
