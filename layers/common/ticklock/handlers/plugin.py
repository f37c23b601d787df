"""The plug-in contract: how ticklock is extended, declared once.

A plug-in is a ``Plugin`` object that a distribution names in the ``ticklock.plugins`` entry-point group::

    [project.entry-points."ticklock.plugins"]
    hello = "ticklock_hello:plugin"

It provides, all but ``register`` optional:

- **handlers**: ``register(registry, context)`` adds them to the ``Registry`` by name;
- **settings**: ``settings`` declares them (name, default, parser, help, secrecy) and ``config`` is the
  typed, frozen object they are parsed into. They are read as ``TICKLOCK_<PLUGIN>_<NAME>`` and
  ``--<plugin>-<name>`` and listed in the configuration table in a section of their own; a bad value stops
  start-up with a message naming the variable, like any engine setting;
- **system jobs**: ``system_jobs(context)`` names the interval jobs it wants seeded at boot
  (``TICKLOCK_SYSTEM_JOBS`` chooses among every plug-in's), idempotently by name;
- **health checks**: ``health(context)`` returns checks that ``GET /health`` runs with the store's.

Each of them gets a ``Context``: the plug-in's own ``config``, what it may know of the engine's
configuration (``EngineSettings``) and the engine's notifiers (``email()``, ``webhook()``). A handler gets a
``HandlerContext`` (re-exported here with ``Registry`` from ``ticklock.handlers.contract``). A plug-in
imports only this module, the handler contract, ``ticklock.domain``, ``ticklock.ports`` and
``ticklock.errors``; nothing in ticklock imports a plug-in. ``ticklock.plugin``, this module's former
path, still works for the plug-ins written against it.

The older ``ticklock.handlers`` group is still read, and ``TICKLOCK_HANDLER_MODULES`` names modules: each
names a ``Plugin``, a module with a ``plugin`` object, or a ``register(registry)`` function (a module's
own ``register``), which becomes a plug-in of handlers alone, named by the entry point or the module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, Generic, Protocol, TypeVar

from ticklock.errors import ConfigError
from ticklock.handlers.contract import HandlerContext, Registry
from ticklock.ports import EmailSender, WebhookSender

__all__ = [
    "GROUP",
    "LEGACY_GROUP",
    "Context",
    "EngineSettings",
    "HandlerContext",
    "HealthCheck",
    "Plugin",
    "Registry",
    "Setting",
    "SystemJob",
    "choice",
    "discover",
    "http_url",
    "integer",
    "names",
    "number",
    "optional_text",
    "store_url",
    "text",
]

GROUP = "ticklock.plugins"
LEGACY_GROUP = "ticklock.handlers"
PREFIX = "TICKLOCK_"


Parser = Callable[[str], Any]
C = TypeVar("C")


# -- settings ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One setting: its name (``snake_case``), its default as text, the parser that turns text into its
    value (raising ``ValueError`` with a message that says what is wrong), and a line of help.

    ``secret`` keeps it out of logs and ``as_dict``. ``section`` is the plug-in it belongs to (set by the
    engine; empty for the engine's own). ``aliases`` are older variable names still read, with a warning at
    start-up."""

    name: str
    default: str
    parse: Parser
    help: str
    secret: bool = False
    section: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Unique among all settings: ``name``, or ``section.name`` for a plug-in's."""
        return f"{self.section}.{self.name}" if self.section else self.name

    @property
    def env(self) -> str:
        return _env(self.key)

    @property
    def flag(self) -> str:
        return _flag(self.key)

    @property
    def older_envs(self) -> tuple[str, ...]:
        """The variables of its older names, ``aliases``' order."""
        return tuple(_env(old) for old in self.aliases)

    @property
    def older_flags(self) -> tuple[str, ...]:
        return tuple(_flag(old) for old in self.aliases)


def _env(key: str) -> str:
    return f"{PREFIX}{key.replace('.', '_').upper()}"


def _flag(key: str) -> str:
    return f"--{key.replace('.', '-').replace('_', '-')}"


def _bounded(convert: Callable[[str], float], what: str, low: float, high: float) -> Parser:
    def parse(raw: str) -> float:
        try:
            value = convert(raw)
        except ValueError:
            raise ValueError(f"expected {what}, got {raw!r}") from None
        if not low <= value <= high:  # also refuses nan
            raise ValueError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


def integer(low: int, high: int) -> Parser:
    """A whole number from ``low`` to ``high``."""
    return _bounded(int, "a whole number", low, high)


def number(low: float, high: float) -> Parser:
    """A number from ``low`` to ``high``."""
    return _bounded(float, "a number", low, high)


def choice(*options: str) -> Parser:
    """One of ``options``, case-insensitive; the value is lower case."""

    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ValueError(f"must be one of {', '.join(options)}, got {raw!r}")
        return value

    return parse


def text(raw: str) -> str:
    """Non-empty text, stripped."""
    if not raw.strip():
        raise ValueError("must not be empty")
    return raw.strip()


def optional_text(raw: str) -> str | None:
    """Text, stripped; empty is None."""
    return raw.strip() or None


def http_url(raw: str) -> str:
    """Empty, or an http(s) URL."""
    value = raw.strip()
    if value and not value.startswith(("http://", "https://")):
        raise ValueError(f"must be an http(s) URL, got {raw!r}")
    return value


def store_url(raw: str) -> str:
    """Empty, ``sqlite:///PATH``, or a ``mongodb://`` / ``mongodb+srv://`` URI."""
    value = raw.strip()
    if value and not value.startswith(("sqlite:///", "mongodb://", "mongodb+srv://")):
        raise ValueError(f"must be sqlite:///PATH, mongodb://... or mongodb+srv://..., got {raw!r}")
    if value == "sqlite:///":
        raise ValueError("sqlite:/// needs a path, e.g. sqlite:///var/lib/ticklock.db")
    return value


def names(raw: str) -> tuple[str, ...]:
    """A comma-separated list of names (blanks dropped)."""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


# -- what a plug-in gets ------------------------------------------------------------------------------------


class EngineSettings(Protocol):
    """What a plug-in may read of the engine's configuration (``ticklock.settings.Settings`` is one)."""

    @property
    def store_url(self) -> str:
        """The job store's URL (``sqlite:///PATH`` or ``mongodb://…``): a default home for a plug-in's data."""
        ...

    @property
    def effective_max_timeout(self) -> float:
        """The longest job timeout this deployment honours (a Lambda runner's is shorter)."""
        ...


def _no_notifier() -> None:
    return None  # a bare Context (a test's, a script's) has no notifiers


@dataclass(frozen=True)
class Context(Generic[C]):
    """What the engine hands a plug-in: its own settings, the engine's, and the engine's notifiers."""

    config: C
    engine: EngineSettings
    email: Callable[[], EmailSender | None] = _no_notifier
    """The email sender ``TICKLOCK_EMAIL`` configures (built once, on first call), or None when email is off."""
    webhook: Callable[[], WebhookSender | None] = _no_notifier
    """The webhook sender (``TICKLOCK_WEBHOOK_*``: signed JSON POSTs; ``await``-ed), built once, on first
    call. A context the engine builds always has one; a bare ``Context`` (a test's) has none."""


@dataclass(frozen=True)
class SystemJob:
    """An interval job a plug-in wants seeded at boot as ``system:<handler>``, if no job of that name
    exists (an operator's later change to it, or a pause, is kept). ``timeout`` is capped at what the
    deployment allows. With ``needs`` set the job is not configured: it is not seeded, and the start-up
    log says what it needs."""

    handler: str
    every: float
    timeout: float = 60.0
    max_retries: int = 0
    payload: Mapping[str, Any] = field(default_factory=dict)
    needs: str | None = None

    @property
    def name(self) -> str:
        return f"system:{self.handler}"


@dataclass(frozen=True)
class HealthCheck:
    """A check ``GET /health`` runs: ``check()`` returns None when healthy, else what is wrong (raising
    counts as what is wrong). It is run on the health probe's thread, bounded like the store's ping."""

    name: str
    check: Callable[[], str | None]


def _nothing(context: Context[Any]) -> Iterable[Any]:
    return ()


@dataclass(frozen=True)
class Plugin(Generic[C]):
    """One plug-in. ``name`` is its section: lower case letters, digits and ``_``, unique among those
    installed. ``config`` is called with the parsed settings as keyword arguments (a frozen dataclass whose
    fields are the settings' names is the usual choice)."""

    name: str
    register: Callable[[Registry, Context[C]], None]
    settings: tuple[Setting, ...] = ()
    config: Callable[..., C] | None = None
    system_jobs: Callable[[Context[C]], Iterable[SystemJob]] = _nothing
    health: Callable[[Context[C]], Iterable[HealthCheck]] = _nothing
    description: str = ""
    origin: str = ""

    def placed(self) -> tuple[Setting, ...]:
        """Its settings, named in its section."""
        return tuple(replace(s, section=self.name) for s in self.settings)

    def make_config(self, values: Mapping[str, Any]) -> C:
        """The typed object of its settings. Raises ``ConfigError`` when ``config`` does not take them."""
        if self.config is None:
            return None  # type: ignore[return-value]  # a plug-in without settings has no config
        try:
            return self.config(**values)
        except Exception as exc:  # noqa: BLE001 - a plug-in's bug stops the start with its name on it
            raise ConfigError(f"plug-in {self.name!r}: its config refused its settings: {exc}") from None


def _valid_name(name: str) -> bool:
    return bool(name) and all(c.isascii() and (c.islower() or c.isdigit() or c == "_") for c in name)


def _check_plugin(found: object, source: str) -> Plugin[Any]:
    if not isinstance(found, Plugin):
        raise ConfigError(f"{source} is not a ticklock.plugin.Plugin (got {type(found).__name__})")
    if not _valid_name(found.name):
        raise ConfigError(f"{source}: a plug-in's name is lower case letters, digits and _, got {found.name!r}")
    if not callable(found.register):
        raise ConfigError(f"{source}: the plug-in's register is not callable")
    seen: set[str] = set()
    for setting in found.settings:
        if not isinstance(setting, Setting):
            raise ConfigError(f"plug-in {found.name!r}: {setting!r} is not a ticklock.plugin.Setting")
        if setting.name in seen:
            raise ConfigError(f"plug-in {found.name!r} declares the setting {setting.name!r} twice")
        seen.add(setting.name)
    if found.config is not None and is_dataclass(found.config):
        declared = {f.name for f in fields(found.config)}
        if declared != seen:
            raise ConfigError(
                f"plug-in {found.name!r}: its config's fields {sorted(declared)} are not its settings {sorted(seen)}"
            )
    return replace(found, origin=found.origin or source)


def _handlers_only(name: str, register: Callable[[Registry], None], source: str) -> Plugin[None]:
    def adapted(registry: Registry, context: Context[None]) -> None:
        register(registry)

    return Plugin(name=name, register=adapted, origin=source)


def _plugin_of(loaded: object, name: str, source: str) -> Plugin[Any]:
    """What an older form names, as a plug-in: a ``Plugin``, a module with a ``plugin`` object or a
    ``register(registry)`` function, or such a function itself."""
    if isinstance(loaded, Plugin):
        return _check_plugin(loaded, source)
    if isinstance(loaded, ModuleType):
        found = getattr(loaded, "plugin", None)
        if found is not None:
            return _check_plugin(found, source)
        loaded = getattr(loaded, "register", None)
        if loaded is None:
            raise ConfigError(f"{source} has no plugin object and no register(registry) function")
    if not callable(loaded):
        raise ConfigError(f"{source}: its register(registry) is not a function (got {type(loaded).__name__})")
    if not _valid_name(name):
        raise ConfigError(f"{source}: a plug-in's name is lower case letters, digits and _, got {name!r}")
    return _handlers_only(name, loaded, source)


def _from_module(module_name: str) -> Plugin[Any]:
    source = f"TICKLOCK_HANDLER_MODULES: {module_name!r}"
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{source}: cannot import it: {exc}") from exc
    return _plugin_of(module, module_name.replace(".", "_").lower(), source)


def discover(modules: tuple[str, ...] = ()) -> tuple[Plugin[Any], ...]:
    """Every installed plug-in: the ``ticklock.plugins`` entry points, then the older ``ticklock.handlers``
    ones, then ``modules``, in that order and by name within a group (each module is imported once per
    process; the entry points are looked up again on each call). Raises
    ``ConfigError`` when one fails to load or two share a name."""
    found: list[Plugin[Any]] = []
    for group, kind in ((GROUP, "plug-in"), (LEGACY_GROUP, "handler plug-in")):
        for ep in sorted(entry_points(group=group), key=lambda e: e.name):
            source = f"{kind} {ep.name!r} ({ep.value})"
            try:
                loaded = ep.load()
            except Exception as exc:
                raise ConfigError(f"{source} failed to load: {exc}") from exc
            found.append(_check_plugin(loaded, source) if group == GROUP else _plugin_of(loaded, ep.name, source))
    found.extend(_from_module(name) for name in modules)
    names_seen: dict[str, str] = {}
    for plugin in found:
        if plugin.name in names_seen:
            raise ConfigError(f"two plug-ins are named {plugin.name!r}: {names_seen[plugin.name]} and {plugin.origin}")
        names_seen[plugin.name] = plugin.origin
    return tuple(found)
