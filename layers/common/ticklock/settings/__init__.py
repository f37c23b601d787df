"""Configuration: one typed, frozen object, read once at start-up.

Every setting has an environment variable (``TICKLOCK_*``) and a ``ticklock serve`` flag; a flag wins
over the variable. A bad value stops start-up with a message naming the variable. The engine's settings
are ``SETTINGS``; each installed plug-in adds its own (``ticklock.handlers.plugin``), read as
``TICKLOCK_<PLUGIN>_<NAME>`` into a typed section (``Settings.section``). The README's configuration
tables are ``ticklock config-table`` (generated from them).

Where each part lives: ``typed`` (``Settings``, and what it derives), ``declared`` (every setting the
engine declares), ``parsers`` (the parsers of the engine's own settings), ``reading``
(a value's source: flag, variable, older names, default), ``table`` (the README's tables). The names
callers use are here.
"""

from ticklock.handlers.plugin import Setting
from ticklock.settings.declared import ALL, LAMBDA_CEILING, RUNNER_MARGIN, SETTINGS, every_setting
from ticklock.settings.table import markdown_table
from ticklock.settings.typed import Settings

__all__ = [
    "ALL",
    "LAMBDA_CEILING",
    "RUNNER_MARGIN",
    "SETTINGS",
    "Setting",
    "Settings",
    "every_setting",
    "markdown_table",
]
